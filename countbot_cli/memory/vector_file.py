"""The file that keeps lines' vectors: MAGIC, a JSON header line (`model`, `dim`), then records
of a KEY_BYTES key (`content_key`: a hash of what was embedded) and `dim` float16 values,
appended batch by batch.

`VectorFile` opens it as an untrusted file: never through a symlink, never a FIFO or a device
(opened without blocking, checked on the open descriptor), read from where it was last read up
to a number of records the caller bounds, only whole records, only this model's. Anything else
raises `Damaged`; a file that is torn at its end or mostly stale is written anew whole, aside
and renamed into place (a link, a FIFO or an empty file at its path is replaced, not written
through).
"""

from __future__ import annotations

import errno
import hashlib
import json
import os
import stat
from pathlib import Path
from typing import TYPE_CHECKING, NamedTuple

from countbot_cli import fileio
from countbot_cli.memory.encoder_spec import DIM, MODEL_TAG

if TYPE_CHECKING:
    import numpy as np
    from numpy.typing import NDArray

MAGIC = b"countbot-vectors\n"
OLD_MAGIC = b"countbot-memory-vectors\n"  # whole files of scaled vectors, before this layout
KEY_BYTES = 16
RECORD = KEY_BYTES + DIM * 2
HEADER_MAX = 4096
SLACK = 4096  # records read beyond twice the lines asked for, and stale ones kept


def content_key(content: str, kind: bytes = b"line") -> bytes:
    """The key of a text's vector: lines and questions (`kind`) are embedded differently."""
    data = kind + b"\0" + content.encode("utf-8", "surrogatepass")
    return hashlib.blake2b(data, digest_size=KEY_BYTES).digest()


class Damaged(ValueError):
    """The cache file cannot be used as it is."""


class Chunk(NamedTuple):
    fresh: bool  # another file than the one read so far: start over
    keys: list[bytes]
    vectors: NDArray[np.float16]
    clean: bool  # whole records only, all of them read


class VectorFile:
    """The file itself: read in bounded steps, appended to, rewritten."""

    def __init__(self, path: Path) -> None:
        self.path = path
        self._ino: int | None = None  # the file read so far
        self._start = 0  # where its records start
        self._read_to = 0  # how far they were read

    def read_new(self, limit: int) -> Chunk | None:
        """The records added since the last read (all of them when the file is another one),
        at most `limit`; None when there is no file. Damaged when it is not a sound one."""
        import numpy as np

        flags = os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_NOCTTY | os.O_CLOEXEC
        try:
            fd = os.open(self.path, flags)
        except FileNotFoundError:
            self._ino = None
            return None
        except OSError as e:
            raise Damaged(_why(e)) from e
        try:
            st = os.fstat(fd)
            if not stat.S_ISREG(st.st_mode):
                raise Damaged(_kind(st.st_mode))
            fresh = st.st_ino != self._ino
            if fresh:
                self._start = self._read_to = _header(fd, st.st_size)
                self._ino = st.st_ino
            whole = (st.st_size - self._read_to) // RECORD
            n = max(0, min(whole, limit))
            data = _pread(fd, n * RECORD, self._read_to)
        finally:
            os.close(fd)
        self._read_to += len(data)
        records = np.frombuffer(data, dtype=np.uint8).reshape(n, RECORD)
        keys = [bytes(k) for k in records[:, :KEY_BYTES]]
        vectors = records[:, KEY_BYTES:].view("<f2")  # over the bytes read: read-only, no copy
        if not np.isfinite(vectors).all():
            raise Damaged("not a number in a vector")
        clean = n == whole and (st.st_size - self._start) % RECORD == 0
        return Chunk(fresh, keys, vectors, clean)

    def append(self, keys: list[bytes], vectors: NDArray[np.float16]) -> bool:
        """Add records at the end of the file read so far; False when it is not there (or is
        another file now): then it is to be written whole."""
        flags = os.O_WRONLY | os.O_APPEND | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC
        try:
            fd = os.open(self.path, flags)
        except OSError:
            return False
        try:
            st = os.fstat(fd)
            if not stat.S_ISREG(st.st_mode) or st.st_ino != self._ino:
                return False
            data = b"".join(k + v.tobytes() for k, v in zip(keys, vectors, strict=True))
            view = memoryview(data)
            while view:
                view = view[os.write(fd, view) :]
            if st.st_size == self._read_to:  # nobody else appended meanwhile
                self._read_to += len(data)
        finally:
            os.close(fd)
        return True

    def rewrite(self, keys: list[bytes], vectors: NDArray[np.float16]) -> None:
        """Replace the file (whatever is at its path: a link, a FIFO, a damaged file) with these
        records; OSError when it cannot be."""
        head = MAGIC + json.dumps({"model": MODEL_TAG, "dim": DIM}).encode() + b"\n"
        body = b"".join(k + v.tobytes() for k, v in zip(keys, vectors, strict=True))
        self.path.parent.mkdir(mode=0o700, parents=True, exist_ok=True)
        key = fileio.atomic_write(self.path, head + body, durable=False)
        self._ino, self._start, self._read_to = key[0], len(head), len(head) + len(body)


def add_rows(
    store: NDArray[np.float16] | None,
    rows: dict[bytes, int],
    keys: list[bytes],
    vectors: NDArray[np.float16],
) -> NDArray[np.float16]:
    """`store` (None: none yet) with `vectors` after its `len(rows)` rows, grown (doubling) when
    it has no room for them; `rows` gets each key's row."""
    import numpy as np

    n = len(rows)
    need = n + len(keys)
    if store is None or len(store) < need:
        grown = np.zeros((max(need, 2 * n, 64), DIM), dtype="<f2")
        if store is not None:
            grown[:n] = store[:n]
        store = grown
    store[n:need] = vectors
    for i, k in enumerate(keys):
        rows[k] = n + i
    return store


def _header(fd: int, size: int) -> int:
    """Where the records start, once the header says they are this model's."""
    if size == 0:
        raise Damaged("empty")
    head = _pread(fd, min(size, HEADER_MAX), 0)
    end = head.find(b"\n", len(MAGIC))
    if head.startswith(OLD_MAGIC):
        raise Damaged("made by an older countbot")
    if not head.startswith(MAGIC) or end < 0:
        raise Damaged("not a vector cache")
    try:
        fields = json.loads(head[len(MAGIC) : end])
        model, dim = fields["model"], fields["dim"]
    except (ValueError, KeyError, TypeError) as e:
        raise Damaged("bad header") from e
    if model != MODEL_TAG or dim != DIM:
        raise Damaged(f"made by another model ({str(model)[:40]})")
    return end + 1


def _pread(fd: int, n: int, offset: int) -> bytes:
    parts = []
    while n > 0 and (chunk := os.pread(fd, min(n, 1 << 20), offset)):
        parts.append(chunk)
        n -= len(chunk)
        offset += len(chunk)
    return b"".join(parts)


def _kind(mode: int) -> str:
    if stat.S_ISDIR(mode):
        return "a folder"
    if stat.S_ISFIFO(mode):
        return "a named pipe"
    return "not a regular file"


def _why(e: OSError) -> str:
    return "a symbolic link" if e.errno == errno.ELOOP else (e.strerror or str(e))


def empty() -> NDArray[np.float16]:
    import numpy as np

    return np.zeros((0, DIM), dtype="<f2")
