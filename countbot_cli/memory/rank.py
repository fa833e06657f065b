"""The order recall and session search take things in: by meaning, with places kept for words.

Both rank what they hold (memory lines, past sessions) by the question's score against each
one's vector (memory/embed.py: the two encoders' cosines as one number). The first place
(`WORD_PLACES`) goes to what holds the question's rarest words: each word weighs its inverse
document frequency, so a word on every line adds almost nothing and never pushes out the one
line holding a rare name or identifier. What has no vector yet (a cold or partial vector cache,
or no `recall` extra) can come in only by its words, so the places kept for words grow with
its share (`word_places`). Invariant: these are functions of their arguments alone — no file,
model or clock — so `ask`, the REPL, session search and the benchmarks rank alike.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Iterator, Sequence
from itertools import chain
from typing import TYPE_CHECKING, TypeVar

if TYPE_CHECKING:
    import numpy as np
    from numpy.typing import NDArray

    from countbot_cli.memory.search import Index

# Places kept ahead of meaning for what holds the question's rarest words: one, so a rare name
# or identifier is never lost to meaning, and a question sharing only common words with the
# memory costs meaning one place (of recall's 20 lines, of a search's 5 or 10 sessions).
WORD_PLACES = 1
T = TypeVar("T")


def idf_scores(index: Index, words: Iterable[str], n: int) -> dict[int, float]:
    """Entry index -> the summed inverse document frequency, log(1 + n / lines holding it), of
    the question's words it holds (matched as words: `Index.word_hits`)."""
    out: dict[int, float] = {}
    for word in words:
        hits = index.word_hits(word.casefold())
        if hits:
            weight = math.log(1.0 + n / len(hits))
            for i in hits:
                out[i] = out.get(i, 0.0) + weight
    return out


def by_words(scores: dict[int, float], age: Sequence[int]) -> list[int]:
    """The entries holding a word, best first; the newest first among equals (`age`: each
    entry's place in age order, oldest 0)."""
    return sorted(scores, key=lambda i: (-scores[i], -age[i]))


def by_meaning(
    scores: Sequence[float] | NDArray[np.float32],
    embedded: Sequence[bool] | NDArray[np.bool_] | None,
) -> list[int]:
    """The entries that have a vector (all when `embedded` is None), best score first; the
    first in place first among equals. `scores`: any sequence of numbers (a numpy array, or
    the array recall gets from the encoder process: numpy is not needed to rank)."""
    values = scores.tolist() if not isinstance(scores, Sequence) else list(scores)
    order = sorted(range(len(values)), key=values.__getitem__, reverse=True)
    if embedded is not None:
        has = embedded.tolist() if not isinstance(embedded, Sequence) else list(embedded)
        order = [i for i in order if has[i]]
    return order


def word_places(limit: int, unembedded: int, total: int) -> int:
    """How many of `limit` places go first to words: WORD_PLACES, plus the share of the rest
    that the entries without a vector make of all (every place when none has one)."""
    if total <= 0:
        return min(limit, WORD_PLACES)
    rest = max(0, limit - WORD_PLACES)
    return min(limit, WORD_PLACES + math.ceil(rest * unembedded / total))


def candidates(meaning: Sequence[T], words: Sequence[T], places: int) -> Iterator[T]:
    """The order to take entries (memory lines, sessions) in: the first `places` by words, then
    by meaning, then the rest by words; each entry once."""
    seen: set[T] = set()
    for i in chain(words[:places], meaning, words[places:]):
        if i not in seen:
            seen.add(i)
            yield i
