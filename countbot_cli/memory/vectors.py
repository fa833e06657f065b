"""The vectors of MEMORY.md's lines: `MEMORY.vectors.bin`, a cache in the cache folder
(config/derived.py; and, the same way, of what was said in past sessions: `search-vectors.bin`).

MEMORY.md stays the source of truth; this file only saves embedding every line again. Each
vector is keyed by a hash of the line's content (not its number, date or source), so an edited
line is embedded again and nothing else, a moved line keeps its vector, and lines are embedded
as they appear: a line the conversation writes as it is written (memory/recall.py, when the
models are loaded), any other at the next recall, which embeds the lines it has no vector
for (one new line: one call); each writes the file again, keeping only the vectors of lines
still in the memory.

Layout: a magic line, a JSON header line (`model`, `dim`, `n`), `n` 16-byte keys, then `n`
float16 vectors of `dim` values. A file that does not parse exactly (wrong magic, model, size)
is damaged: it is rebuilt, and `notice` says so in one line; a missing one is built with a
notice and progress when there are many lines to embed (a cold build of 2,000 lines takes
about a minute on a small machine). Another process's write is picked up by the file's key.

A folder that cannot be written (a read-only memory or sessions folder) keeps its vectors in
the cache folder instead (`writable_place`: `$XDG_CACHE_HOME/countbot/vectors/`, the file named
by a hash of where it would be), so its lines are embedded once, not at every run.
"""

from __future__ import annotations

import hashlib
import json
import os
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import TYPE_CHECKING

from countbot_cli import fileio
from countbot_cli.config.derived import derived_file
from countbot_cli.config.home import cache_home
from countbot_cli.config.own_files import VECTORS_SUFFIX
from countbot_cli.memory.embed import DIM, MODEL_TAG, Embedder

if TYPE_CHECKING:
    import numpy as np
    from numpy.typing import NDArray

MAGIC = b"countbot-memory-vectors\n"
KEY_BYTES = 16
QUIET_BUILD = 32  # embedding this many lines or fewer says nothing
PROGRESS_STEPS = 4  # a cold build reports progress this many times


def vectors_path(memory_file: Path) -> Path:
    """MEMORY.md -> MEMORY.vectors.bin, in the cache folder of the memory's folder."""
    return derived_file(memory_file.parent, memory_file.stem + VECTORS_SUFFIX)


def writable_place(path: Path) -> Path:
    """`path` when its folder can be written (or is missing: nothing to decide), else its
    place in the cache folder, named by a hash of `path` resolved and its name."""
    folder = path.parent
    if not folder.is_dir() or os.access(folder, os.W_OK):
        return path
    key = hashlib.blake2b(os.fsencode(os.path.realpath(path)), digest_size=8).hexdigest()
    return cache_home(os.environ) / "vectors" / f"{key}-{path.name}"


def content_key(content: str) -> bytes:
    return hashlib.blake2b(content.encode("utf-8", "surrogatepass"), digest_size=KEY_BYTES).digest()


class Damaged(ValueError):
    """The cache file does not parse."""


class VectorCache:
    """The vectors of one memory file's lines, in memory and on disk."""

    def __init__(
        self,
        path: Path,
        embedder: Embedder,
        notice: Callable[[str], None],
        what: str = "memory lines",
    ) -> None:
        self.path = writable_place(Path(path))  # beside, unless that folder is read-only
        self.what = what  # what the vectors are of, for the notices
        self.embedder = embedder
        self.notice = notice
        self._rows: dict[bytes, int] = {}
        self._matrix: NDArray[np.float32] | None = None
        self._file_key: fileio.Key | None = None
        self._keys: dict[str, bytes] = {}  # content -> key, so a warm recall hashes nothing
        self.embedded = 0  # lines embedded by the last `matrix` call (for tests and the bench)

    def matrix(self, contents: Sequence[str]) -> NDArray[np.float32]:
        """One vector per content, in order, embedding (and saving) the ones not cached."""
        import numpy as np

        self._reload()
        keys = [self._key(c) for c in contents]
        missing = {k: c for k, c in zip(keys, contents, strict=True) if k not in self._rows}
        self.embedded = len(missing)
        if missing:
            self._add(list(missing), self._embed(list(missing.values())))
        assert self._matrix is not None
        rows = np.fromiter((self._rows[k] for k in keys), dtype=np.int64, count=len(keys))
        return self._matrix[rows]

    def stored(self, content: str) -> NDArray[np.float32] | None:
        """The cached vector of `content` (None when not cached), embedding nothing."""
        self._reload()
        row = self._rows.get(self._key(content))
        return None if row is None or self._matrix is None else self._matrix[row]

    def store(self, content: str, vector: NDArray[np.float32]) -> None:
        """Cache a whole vector computed elsewhere (the small-talk one: memory/recall.py)."""
        self._reload()
        self._add([self._key(content)], vector.reshape(1, DIM))

    def _key(self, content: str) -> bytes:
        key = self._keys.get(content)
        if key is None:
            key = self._keys[content] = content_key(content)
        return key

    def _embed(self, texts: list[str]) -> NDArray[np.float32]:
        if len(texts) <= QUIET_BUILD:
            return self.embedder.lines(texts)
        self.notice(f"embedding {len(texts):,} {self.what} for search by meaning (once)")
        step = max(1, len(texts) // PROGRESS_STEPS)
        said = [0]

        def progress(done: int, total: int) -> None:
            if done - said[0] >= step and done < total:
                said[0] = done
                self.notice(f"embedded {done:,} of {total:,} {self.what}")

        return self.embedder.lines_in_batches(texts, progress)

    def _add(self, keys: list[bytes], vectors: NDArray[np.float32]) -> None:
        import numpy as np

        base = 0 if self._matrix is None else len(self._matrix)
        old = self._matrix if self._matrix is not None else np.zeros((0, DIM), np.float32)
        self._matrix = np.concatenate([old, vectors.astype(np.float32)])
        for i, k in enumerate(keys):
            self._rows[k] = base + i
        self._save()

    def _reload(self) -> None:
        """Read the file when it changed since it was last read or written (or was never)."""
        import numpy as np

        key = fileio.key_of(self.path)
        if key is not None and key == self._file_key:
            return
        self._file_key = key
        if key is None:  # missing: start empty (the first recall builds it)
            if self._matrix is None:
                self._rows, self._matrix = {}, np.zeros((0, DIM), np.float32)
            return
        try:
            rows, matrix = _parse(self.path.read_bytes())
        except (OSError, Damaged) as e:
            self.notice(f"the vector cache {self.path} was damaged ({e}); rebuilding it")
            rows, matrix = {}, np.zeros((0, DIM), np.float32)
        self._rows, self._matrix = rows, matrix

    def _save(self) -> None:
        """Write the vectors of the lines seen in this process's memory (atomic; best effort:
        a cache that cannot be written is only slower next time)."""
        assert self._matrix is not None
        live = set(self._keys.values())
        keep = [(k, r) for k, r in self._rows.items() if k in live]
        head = json.dumps({"model": MODEL_TAG, "dim": DIM, "n": len(keep)}).encode() + b"\n"
        keys = b"".join(k for k, _ in keep)
        body = self._matrix[[r for _, r in keep]].astype("<f2").tobytes()
        try:
            self.path.parent.mkdir(mode=0o700, parents=True, exist_ok=True)  # the cache folder's
            self._file_key = fileio.atomic_write(
                self.path, MAGIC + head + keys + body, durable=False
            )
        except OSError:
            self._file_key = None


def _parse(data: bytes) -> tuple[dict[bytes, int], NDArray[np.float32]]:
    import numpy as np

    if not data.startswith(MAGIC):
        raise Damaged("not a vector cache")
    end = data.find(b"\n", len(MAGIC))
    try:
        head = json.loads(data[len(MAGIC) : end])
        n, dim, model = int(head["n"]), int(head["dim"]), head["model"]
    except (ValueError, KeyError, TypeError) as e:
        raise Damaged("bad header") from e
    if model != MODEL_TAG or dim != DIM or n < 0:
        raise Damaged(f"made by another model ({model})")
    start = end + 1
    if len(data) != start + n * KEY_BYTES + n * dim * 2:
        raise Damaged("wrong size")
    keys = data[start : start + n * KEY_BYTES]
    rows = {keys[i * KEY_BYTES : (i + 1) * KEY_BYTES]: i for i in range(n)}
    vectors = np.frombuffer(data, dtype="<f2", offset=start + n * KEY_BYTES, count=n * dim)
    matrix = vectors.reshape(n, dim).astype(np.float32)
    if not np.isfinite(matrix).all():
        raise Damaged("not a number in a vector")
    return rows, matrix
