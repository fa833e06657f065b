"""How close a line is in meaning to a question: one number a line, from their vectors.

A vector is `[USE unit vector | e5 unit vector]` (memory/encoder_spec.py), so a dot product is
the sum of the two cosines; `weighted` makes it their weighted mean. The score of a line is its
weighted cosine with the question less its cosine with small talk (SMALL_TALK's mean): a line
close to every message ranks by what it shares with this one. Recall and session search score
in countbot's process, recall also in the encoder process that outlives an `ask`
(memory/encoder_rank.py); both call `scores` here, so the two give the same numbers to the bit.
numpy is imported by the functions, not with the module: an `ask` whose recall is scored in
the encoder process never loads it.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING

from countbot_cli.memory.encoder_spec import DIM, USE_DIM

if TYPE_CHECKING:
    import numpy as np
    from numpy.typing import NDArray

E5_WEIGHT = 2.0  # e5's cosines spread about half as wide as USE's, so it weighs twice
# Messages about nothing in particular. How close a line is to them (the dot product with
# their mean vector) is how close it is to any message; its score has that subtracted, so a
# line that is near everything does not come back for "hi" or "explain quicksort".
SMALL_TALK = (
    "hi",
    "thanks",
    "ok",
    "hello, how are you?",
    "can you help me with something?",
    "what do you think?",
    "tell me a joke",
    "你好",
    "谢谢",
    "好的",
)
GATHER = 256  # rows of a cache copied into a question's matrix at a time


def weighted(m: NDArray[np.float32], *, in_place: bool = False) -> NDArray[np.float32]:
    """Vectors whose dot product is `(cos_use + E5_WEIGHT * cos_e5) / (1 + E5_WEIGHT)`;
    `in_place`: `m` itself scaled (a matrix made for one question: no copy of it)."""
    out = m if in_place else m.copy()
    out[..., :USE_DIM] *= (1.0 / (1.0 + E5_WEIGHT)) ** 0.5
    out[..., USE_DIM:] *= (E5_WEIGHT / (1.0 + E5_WEIGHT)) ** 0.5
    return out


def gather(
    store: NDArray[np.float16], rows: Sequence[int], at: NDArray[np.intp], n: int
) -> NDArray[np.float32]:
    """An (n, DIM) float32 matrix with `store[rows[k]]` at row `at[k]`, zeros elsewhere; copied a
    step at a time (GATHER rows), so no float16 copy of the whole cache is made."""
    import numpy as np

    lines = np.zeros((n, DIM), dtype=np.float32)
    for s in range(0, len(at), GATHER):
        lines[at[s : s + GATHER]] = store[list(rows[s : s + GATHER])]
    return lines


def scores(
    question: NDArray[np.float32], small_talk: NDArray[np.float32], lines: NDArray[np.float32]
) -> NDArray[np.float32]:
    """Each line's score (see the module); `lines` is scaled in place."""
    probe = weighted(question - small_talk.mean(axis=0))
    return weighted(lines, in_place=True) @ probe
