"""`countbot models pull NAME|URL`: one GGUF file into the models folder, resumable and checked.

A catalogue name, or a Hub URL (`…/REPO/resolve/REVISION/FILE`), is asked of the Hub through
huggingface_hub: the file's address under `HF_ENDPOINT`, then its metadata (a HEAD): the sha256
the Hub keeps for it, its size, the commit, where the bytes are. Any other URL is fetched as it
is and checked by size. The bytes go to `<name>.gguf.part`, hashed as they come (with what an
earlier pull left there), and become `<name>.gguf` only when size and sha256 match: a mismatch
deletes the part, so nothing half-written or wrong ever carries the model's name. A pull of the
same file later goes on from where the part ends (`Range`), also after a kill.

huggingface_hub's own `hf_hub_download` is not used for the bytes: version 2.4 writes each try
to a temporary file unique to its process and deletes it on failure (so a pull killed at half
starts again from zero), and it checks the size only.
"""

from __future__ import annotations

import contextlib
import errno
import hashlib
import json
import os
import re
import shutil
import time
from collections.abc import Iterator, Mapping
from pathlib import Path
from typing import IO, Any, NamedTuple
from urllib.parse import unquote, urlsplit

from countbot_cli import fileio
from countbot_cli.config.local_models import (
    CATALOGUE,
    NAME,
    CatalogueEntry,
    Pulled,
    catalogue_entry,
    find_pulled,
    model_file,
    record_file,
)
from countbot_cli.errors import (
    AuthError,
    CountbotError,
    FetchError,
    StorageError,
    UsageError,
)
from countbot_cli.speedups.httpx_import import import_httpx

HUB = "https://huggingface.co"
CHUNK = 1 << 20
TRIES = 5  # attempts in a row that bring no new byte, before giving up
TIMEOUT = 30.0  # seconds without a byte
SPACE_SPARE = 64 << 20  # left free on the disk beyond the file itself
GGUF_MAGIC = b"GGUF"
HUB_PATH = re.compile(r"^/(?P<repo>[^/]+/[^/]+)/(?:resolve|blob)/(?P<rev>[^/]+)/(?P<file>.+)$")
SHA256 = re.compile(r"^[0-9a-f]{64}$")


class Source(NamedTuple):
    """What to fetch and what it must be."""

    name: str  # the model's name in the folder
    url: str  # where the bytes are (after the Hub's redirect)
    size: int | None
    sha256: str | None  # None: the server keeps none (a plain URL)
    described: str  # "Qwen/Qwen3-1.7B-GGUF/Qwen3-1.7B-Q8_0.gguf@<commit>", or the URL
    same_host_auth: Mapping[str, str]  # headers for `url` (the Hub's token, only on its host)


def endpoint(env: Mapping[str, str] | None = None) -> str:
    """The Hub to ask: `HF_ENDPOINT` (a mirror), else huggingface.co. Read at each pull, not
    when huggingface_hub was imported."""
    env = os.environ if env is None else env
    return (env.get("HF_ENDPOINT") or HUB).rstrip("/")


def parse_target(target: str, hub: str) -> tuple[CatalogueEntry | None, str | None]:
    """(catalogue entry, None) for a name; (None, URL) for a URL; UsageError otherwise."""
    entry = catalogue_entry(target)
    if entry is not None:
        return entry, None
    if re.match(r"^https?://", target, re.IGNORECASE):
        return None, target
    names = ", ".join(e.name for e in CATALOGUE)
    raise UsageError(
        f"no model called '{target}' in the catalogue",
        hint=f"pull one of {names}, or a GGUF file's URL (`countbot models` lists them)",
    )


def name_for_url(url: str) -> str:
    """The folder name a URL's file gets: its file name without `.gguf`, lower case."""
    stem = unquote(urlsplit(url).path.rsplit("/", 1)[-1])
    stem = stem[: -len(".gguf")] if stem.lower().endswith(".gguf") else stem
    name = re.sub(r"[^a-z0-9._-]+", "-", stem.lower()).strip("-.")[:64]
    if not NAME.match(name):
        raise UsageError(f"cannot name a model after {url}", hint="pass --name NAME")
    return name


def resolve(target: str, name: str | None, env: Mapping[str, str] | None = None) -> Source:
    """What `target` (a catalogue name or a URL) is, asked of its server (no bytes fetched)."""
    hub = endpoint(env)
    entry, url = parse_target(target, hub)
    if entry is not None:
        return _from_hub(name or entry.name, entry.repo, entry.file, "main", hub)
    assert url is not None
    if name is not None and not NAME.match(name):
        raise UsageError(f"'{name}' cannot name a model", hint="letters, digits, '.', '-', '_'")
    parts = urlsplit(url)
    match = HUB_PATH.match(parts.path)
    base = f"{parts.scheme}://{parts.netloc}".lower()
    if match and base in (hub.lower(), HUB):
        repo, rev, file = match["repo"], unquote(match["rev"]), unquote(match["file"])
        return _from_hub(name or name_for_url(url), repo, file, rev, base)
    return _plain(name or name_for_url(url), url)


def _from_hub(name: str, repo: str, file: str, revision: str, hub: str) -> Source:
    from huggingface_hub import get_hf_file_metadata, hf_hub_url
    from huggingface_hub.errors import (
        EntryNotFoundError,
        GatedRepoError,
        HfHubHTTPError,
        RepositoryNotFoundError,
        RevisionNotFoundError,
    )
    from huggingface_hub.utils import build_hf_headers

    what = f"{repo}/{file}"
    url = hf_hub_url(repo, file, revision=revision, endpoint=hub)
    try:
        meta = get_hf_file_metadata(url, endpoint=hub, timeout=TIMEOUT)
    except GatedRepoError as e:
        raise AuthError(
            f"{repo} is gated on the Hub: {_first_line(e)}",
            hint="accept its licence on the model's page, then `hf auth login` (or HF_TOKEN)",
        ) from e
    except (RepositoryNotFoundError, RevisionNotFoundError, EntryNotFoundError) as e:
        raise UsageError(f"the Hub at {hub} has no {what}@{revision}: {_first_line(e)}") from e
    except HfHubHTTPError as e:
        raise FetchError(f"the Hub at {hub} failed for {what}: {_first_line(e)}") from e
    except Exception as e:  # httpx2's connect and timeout errors, an offline mode
        raise FetchError(f"cannot reach the Hub at {hub} for {what}: {_first_line(e)}") from e
    etag = (meta.etag or "").strip('"').lower()
    location = meta.location or url
    same_host = urlsplit(location).netloc.lower() == urlsplit(hub).netloc.lower()
    auth = {k: v for k, v in build_hf_headers().items() if k.lower() == "authorization"}
    commit = f"@{meta.commit_hash[:12]}" if meta.commit_hash else ""
    return Source(
        name=name,
        url=location,
        size=meta.size,
        sha256=etag if SHA256.match(etag) else None,
        described=f"{what}{commit}",
        same_host_auth=auth if same_host else {},
    )


def _plain(name: str, url: str) -> Source:
    return Source(name, url, None, None, url, {})


def _first_line(e: BaseException) -> str:
    text = str(e).strip().splitlines()
    return text[0] if text else type(e).__name__


# ---- the transfer ----


class Part:
    """`<name>.gguf.part` and its record `<name>.part.json` (what it is a part of)."""

    def __init__(self, folder: Path, source: Source) -> None:
        self.path = folder / f"{source.name}.gguf.part"
        self.record = folder / f"{source.name}.part.json"
        self.source = source

    def _identity(self) -> dict[str, Any]:
        s = self.source
        return {"sha256": s.sha256, "size": s.size, "source": s.described}

    def resumable(self) -> int:
        """Bytes already there for this very file; 0 (and the part gone) for anything else."""
        try:
            known = json.loads(self.record.read_text(encoding="utf-8"))
            size = self.path.stat().st_size
        except (OSError, ValueError):
            self.discard()
            return 0
        if known != self._identity() or self.source.sha256 is None:
            self.discard()  # another file, or a plain URL whose bytes may have changed
            return 0
        return size

    def start(self) -> None:
        blob = json.dumps(self._identity()).encode("utf-8")
        fileio.atomic_write(self.record, blob, durable=False)

    def discard(self) -> None:
        for p in (self.path, self.record):
            with contextlib.suppress(FileNotFoundError):
                p.unlink()


def check_space(folder: Path, needed: int) -> None:
    """StorageError when the disk holding `folder` has less than `needed` bytes (and a spare)."""
    free = shutil.disk_usage(folder).free
    if free < needed + SPACE_SPARE:
        raise StorageError(
            f"not enough space in {folder}: the model needs {_mb(needed)}, {_mb(free)} are free",
            hint="free some space and pull again (what was fetched so far is kept)",
        )


def _mb(n: int) -> str:
    return f"{n / 1e6:,.0f} MB" if n >= 10e6 else f"{n / 1e6:.1f} MB"


def transfer(source: Source, folder: Path, progress: Any) -> tuple[int, str]:
    """Fetch `source` into its part, going on from what is there; (size, sha256) of it all.
    `progress`: a tqdm-like bar (update(n), total, n)."""
    part = Part(folder, source)
    have = part.resumable()
    if source.size is not None:
        check_space(folder, source.size - have)
    if have == 0:
        part.start()
    digest = hashlib.sha256()
    with open(part.path, "ab+") as f:
        f.seek(0)
        for block in iter(lambda: f.read(CHUNK), b""):
            digest.update(block)
        f.seek(0, os.SEEK_END)
        have = f.tell()
        progress.update(have)
        tries = 0
        while source.size is None or have < source.size:
            before = have
            try:
                have, done = _get(source, f, have, digest, progress)
            except _Refetch:
                f.seek(0)
                f.truncate()
                digest, have = hashlib.sha256(), 0
                progress.reset(total=source.size)
                continue
            except OSError as e:
                raise _disk_error(e, folder) from e
            except _Transient as e:
                have = f.tell()  # what was written (and hashed) before the break
                tries = 0 if have > before else tries + 1
                if tries >= TRIES:
                    raise FetchError(
                        f"the download of {source.described} stopped at {_mb(have)}: {e}",
                        hint="pull again to go on from there",
                    ) from e
                if have == before:
                    time.sleep(min(0.5 * 2**tries, 8.0))
                continue
            if done:
                break
        f.flush()
        os.fsync(f.fileno())
    return have, digest.hexdigest()


class _Transient(Exception):
    """The connection broke, timed out, or a 5xx: try again from where the part ends."""


class _Damaged(FetchError):
    """The server's copy is not the file it describes: nothing fetched from it is kept."""


class _Refetch(Exception):
    """The server ignored the Range: what is there is dropped and the whole file fetched."""


def _get(source: Source, f: IO[bytes], have: int, digest: Any, progress: Any) -> tuple[int, bool]:
    """One GET from byte `have` on, appended to `f`; (bytes now, whether the file is whole)."""
    httpx = import_httpx()
    headers = {"Accept-Encoding": "identity", **source.same_host_auth}
    if have:
        headers["Range"] = f"bytes={have}-"
    timeout = httpx.Timeout(TIMEOUT, connect=10.0)
    try:
        with (
            httpx.Client(timeout=timeout, follow_redirects=True) as client,
            client.stream("GET", source.url, headers=headers) as resp,
        ):
            if resp.status_code == 416 and have and have == source.size:
                return have, True
            if resp.status_code == 416 and source.size is not None:
                raise _Damaged(
                    f"the server's copy of {source.described} ends at {have:,} bytes, not "
                    f"{source.size:,}; it was not kept",
                    hint="pull again later; if it fails again the server's copy is damaged",
                )
            if resp.status_code >= 500 or resp.status_code in (408, 429):
                raise _Transient(f"HTTP {resp.status_code}")
            if resp.status_code == 404:
                raise UsageError(f"{source.described} is not there (HTTP 404)")
            if resp.status_code in (401, 403):
                raise AuthError(f"{source.described}: HTTP {resp.status_code}")
            if resp.status_code not in (200, 206):
                raise FetchError(f"{source.described}: HTTP {resp.status_code}")
            if have and resp.status_code == 200:
                raise _Refetch
            length = resp.headers.get("content-length")
            total = have + int(length) if length and length.isdigit() else None
            if source.size is None and total is not None:
                source = source._replace(size=total)
                progress.total = total
            for block in resp.iter_bytes():  # as it arrives: a break loses nothing received
                if have == 0 and not block.startswith(GGUF_MAGIC[: len(block)]):
                    raise UsageError(f"{source.described} is not a GGUF file")
                f.write(block)
                f.flush()  # on disk as it comes: a kill keeps all of it for the next pull
                digest.update(block)
                have += len(block)
                progress.update(len(block))
    except httpx.TransportError as e:  # connect, read, timeout, a cut body
        raise _Transient(_first_line(e) or type(e).__name__) from e
    whole = source.size is None or have >= source.size
    if not whole:  # the server ended the body early without an error
        raise _Transient(f"the server sent {_mb(have)} of {_mb(source.size or 0)}")
    return have, whole


def _disk_error(e: OSError, folder: Path) -> CountbotError:
    if e.errno in (errno.ENOSPC, errno.EDQUOT, errno.EFBIG):
        return StorageError(
            f"the disk is full while writing into {folder} ({e.strerror})",
            hint="free some space and pull again (what was fetched so far is kept)",
        )
    return StorageError(f"cannot write into {folder}: {e.strerror or e}")


# ---- the pull ----


def pull(
    target: str, folder: Path, progress_for: Any, *, name: str | None = None
) -> tuple[Pulled, float]:
    """Fetch `target` into `folder` (see the module); the model and the seconds it took.
    `progress_for(source, initial)`: the bar for it, a context manager."""
    started = time.monotonic()
    source = resolve(target, name)
    folder.mkdir(parents=True, exist_ok=True)
    with fileio.locked(folder / f".{source.name}.lock", 1.0, f"the pull of {source.name}"):
        existing = find_pulled(source.name, folder)
        if existing is not None and source.sha256 and existing.sha256 == source.sha256:
            return existing, time.monotonic() - started
        part = Part(folder, source)
        with progress_for(source) as bar:
            try:
                size, sha = transfer(source, folder, bar)
            except (UsageError, AuthError, _Damaged):  # nothing to go on from
                part.discard()
                raise
        wrong = (source.size is not None and size != source.size) or (
            source.sha256 is not None and sha != source.sha256
        )
        if wrong:
            part.discard()
            raise _Damaged(
                f"the download of {source.described} does not match the server's "
                f"{'sha256' if source.sha256 else 'size'} ({sha[:12]}…, {size:,} bytes); "
                "it was not kept",
                hint="pull again; if it fails again the server's copy is damaged",
            )
        record = {
            "name": source.name,
            "source": source.described,
            "url": source.url if not source.same_host_auth else None,
            "sha256": sha,
            "size": size,
            "pulled": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
        }
        blob = (json.dumps(record, indent=1) + "\n").encode("utf-8")
        fileio.atomic_write(record_file(folder, source.name), blob)
        os.replace(part.path, model_file(folder, source.name))
        fileio.fsync_dir(folder)
        part.discard()
    found = find_pulled(source.name, folder)
    assert found is not None
    return found, time.monotonic() - started


def remove(name: str, folder: Path) -> Pulled:
    """Delete a pulled model (its file, record and any part); UsageError when there is none."""
    found = find_pulled(name, folder)
    parts = list(folder.glob(f"{name.lower()}.gguf.part")) if NAME.match(name.lower()) else []
    if found is None and not parts:
        raise UsageError(f"no pulled model called '{name}'", hint="`countbot models` lists them")
    key = name.lower()
    for p in (
        model_file(folder, key),
        record_file(folder, key),
        folder / f"{key}.gguf.part",
        folder / f"{key}.part.json",
    ):
        with contextlib.suppress(FileNotFoundError):
            p.unlink()
    return found or Pulled(key, model_file(folder, key), 0, "?", "")


@contextlib.contextmanager
def no_progress(source: Source) -> Iterator[Any]:
    """A progress bar that shows nothing (tests, and callers that draw their own)."""

    class Quiet:
        total = source.size
        n = 0

        def update(self, k: int) -> None:
            self.n += k

        def reset(self, total: int | None = None) -> None:
            self.n = 0

    yield Quiet()
