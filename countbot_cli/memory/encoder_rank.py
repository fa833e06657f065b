"""Recall's scores computed in the encoder process: countbot sends a question and the keys of
its memory lines, the process answers one score a line (memory/meaning.py's `scores`).

A warm `ask` then reads no vector file and imports no numpy: the process keeps each vector
file it was asked about, reads only what was appended since (memory/vector_file.py, bounded as
countbot bounds it: twice the lines asked for plus SLACK records) and embeds the question
itself. It never writes a file. When a line or a small-talk text has no vector in the file yet,
or the file cannot be read, it answers how many are missing and countbot scores in its own
process, embedding them (memory/vectors.py). Invariant: for the same file, lines and question
the scores are those countbot computes itself, to the bit.
"""

from __future__ import annotations

import base64
from pathlib import Path
from typing import TYPE_CHECKING, Any, Protocol

from countbot_cli.memory.vector_file import KEY_BYTES, SLACK, Damaged, VectorFile, add_rows

if TYPE_CHECKING:
    import numpy as np
    from numpy.typing import NDArray

MAX_FILES = 8  # vector files kept read (one a memory an `ask` recalled from)


class Embeds(Protocol):
    def vectors(self, texts: list[str], query: bool) -> NDArray[np.float32]: ...


class _Kept:
    """One vector file as read so far: each key's row in `store`."""

    def __init__(self, path: str) -> None:
        self.file = VectorFile(Path(path))
        self.rows: dict[bytes, int] = {}
        self.store: NDArray[np.float16] | None = None

    def sync(self, limit: int) -> None:
        """Take in what the file gained; start over when it is another file or none (Damaged
        and OSError go to the caller)."""
        chunk = self.file.read_new(max(0, limit - len(self.rows)))
        if chunk is None:
            self.rows, self.store = {}, None
            return
        if chunk.fresh:
            self.rows, self.store = {}, None
        new = [i for i, k in enumerate(chunk.keys) if k not in self.rows]
        if new:  # the first of a key's records is its vector, as countbot reads it
            keys = [chunk.keys[i] for i in new]
            vectors = chunk.vectors if len(new) == len(chunk.keys) else chunk.vectors[new]
            self.store = add_rows(self.store, self.rows, keys, vectors)


class Ranker:
    """The vector files asked about, and the scores of one request."""

    def __init__(self) -> None:
        self._kept: dict[str, _Kept] = {}

    def rank(self, encoders: Embeds, request: dict[str, Any]) -> dict[str, Any]:
        """`{"scores": BASE64}` (float32, little-endian, one a key) or `{"missing": N}`."""
        import numpy as np

        from countbot_cli.memory.meaning import gather, scores

        path = str(request["file"])
        keys = _keys(request["keys"])
        fixed = _keys(request["fixed"])
        kept = self._kept.pop(path, None) or _Kept(path)
        try:
            kept.sync(2 * len(keys) + SLACK)
        except (Damaged, OSError):
            return {"missing": len(keys) + len(fixed)}  # countbot reads it and says why
        self._kept[path] = kept  # the newest last; the oldest goes
        while len(self._kept) > MAX_FILES:
            self._kept.pop(next(iter(self._kept)))
        rows = kept.rows
        missing = sum(1 for k in keys if k not in rows) + sum(1 for k in fixed if k not in rows)
        if missing or kept.store is None or not fixed:
            return {"missing": max(missing, 1)}
        question = encoders.vectors([str(request["question"])], True)
        small_talk = kept.store[[rows[k] for k in fixed]].astype(np.float32)
        at = np.arange(len(keys))
        lines = gather(kept.store, [rows[k] for k in keys], at, len(keys))
        out = scores(question[0], small_talk, lines).astype("<f4")
        return {"scores": base64.b64encode(out.tobytes()).decode()}


def _keys(data: object) -> list[bytes]:
    raw = base64.b64decode(str(data), validate=True)
    if len(raw) % KEY_BYTES:
        raise ValueError("keys of the wrong size")
    return [raw[i : i + KEY_BYTES] for i in range(0, len(raw), KEY_BYTES)]
