"""When one MEMORY.md line says again, or says otherwise, what another says.

The one rule for it, read by `memory tidy` (which proposes dropping, merging or superseding
lines) and by recall (which sends a line with the newer lines that replace it, marks it
`(older)` or leaves it out). It compares the lines' words (`words`: lower case, no stop words,
CJK runs as bigrams, numbers kept): the same words is a copy, one line's words inside the
other's a merge into the fuller one, mostly the same words with different numbers or values
(`port 6380` / `port 6390`), or a newer line that says it changed ("now", "moved", 改为 …), a
supersession. Only lines sharing two words that are not everywhere are compared
(`related_words`). Invariant: the rule reads the two lines' words and dates, nothing else — no
vectors, no question — so what recall calls an update is what tidy would propose.
"""

from __future__ import annotations

import re
from collections.abc import Collection
from typing import NamedTuple

from countbot_cli.memory.quality import words_of
from countbot_cli.memory.search import Entry, Index
from countbot_cli.textsafe import CJK_CHARS, LazyPattern

MERGE_SHARE = 0.8  # word overlap (Jaccard) of a merge, numbers equal
SUPERSEDE_SHARE = 0.6  # word overlap of a supersession, numbers or values differing
CHANGE_SHARE = 0.35  # ... enough when the newer line says it changed
MAX_DF_SHARE = 0.5  # a word in more than half the entries links nothing
MAX_DF = 40  # ... nor one in more than this many (it would cost its square in pairs)
_NUMBER = re.compile(r"\d+(?:[.:]\d+)*")
_CJK_RUN = LazyPattern(f"[{CJK_CHARS}]+")
_CHANGED = LazyPattern(
    r"\b(?:now|moved|changed|switched|no longer|instead|anymore|renamed|replaced|updated)\b"
    r"|现在|改为|改成|搬到|换成|不再|已经改"
)
_STOP = frozenset(
    ("a", "an", "the", "and", "or", "of", "to", "in", "on", "at", "for", "with", "by", "from")
    + ("is", "are", "was", "were", "be", "it", "its", "this", "that", "has", "have")
    + ("user", "users", "s", "uses", "use")
)


class Relation(NamedTuple):
    kind: str  # drop | merge | supersede
    keep: Entry  # the line that stays: the newer (drop, supersede) or the fuller (merge)
    other: Entry
    why: str


def words(content: str) -> set[str]:
    """The comparison words of a line: lower case, no punctuation or stop words, CJK runs as
    bigrams, numbers kept."""
    plain = words_of(content)
    out = {w for w in _CJK_RUN.re.sub(" ", plain).split() if w not in _STOP}
    for run in _CJK_RUN.re.findall(plain):
        out.update(run[i : i + 2] for i in range(max(1, len(run) - 1)))
    return out


def newer_of(a: Entry, b: Entry) -> tuple[Entry, Entry]:
    """(newer, older) by date, then by place in the file."""
    return (a, b) if (a.date, a.line_no) >= (b.date, b.line_no) else (b, a)


def related_words(n_entries: int) -> int:
    """A word held by more entries than this links none of them (see MAX_DF_SHARE, MAX_DF)."""
    return max(2, min(MAX_DF, int(n_entries * MAX_DF_SHARE)))


def relation(a: Entry, b: Entry, wa: set[str], wb: set[str]) -> Relation | None:
    """How two entries relate by the rules, if they do (`wa`, `wb`: their `words`)."""
    new, old = newer_of(a, b)
    if words_of(a.content) == words_of(b.content):
        return Relation("drop", new, old, "the same words again")
    nums_a, nums_b = set(_NUMBER.findall(a.content)), set(_NUMBER.findall(b.content))
    plain_a, plain_b = wa - nums_a, wb - nums_b
    share = _share(plain_a, plain_b)
    full, part = (a, b) if len(wa) >= len(wb) else (b, a)
    inside = (wb <= wa) if full is a else (wa <= wb)  # all of the shorter's words, numbers too
    if inside or (share >= MERGE_SHARE and nums_a == nums_b):
        return Relation("merge", full, part, "its words are in the fuller line")
    changed = bool(_CHANGED.re.search(new.content.casefold()))
    differ = nums_a != nums_b and nums_a and nums_b
    if (share >= SUPERSEDE_SHARE and (differ or changed)) or (changed and share >= CHANGE_SHARE):
        return Relation("supersede", new, old, "the newer line says otherwise")
    return None


def _share(a: set[str], b: set[str]) -> float:
    return len(a & b) / len(a | b) if a and b else 0.0


class Replacements:
    """The newer lines that replace a line of one snapshot (for recall): each a copy of it, a
    fuller line holding all it says, or a supersession (`relation`), looked for among the lines
    holding two of its words that are not everywhere (`Index.hits`)."""

    def __init__(self, entries: list[Entry], index: Index) -> None:
        self.entries = entries
        self.index = index
        self.cap = related_words(len(entries))
        self._words: dict[int, set[str]] = {}
        self._found: dict[int, list[int]] = {}
        self._hits: dict[str, list[int]] = {}  # a word's lines (up to cap + 1), found once

    def of(self, i: int, among: Collection[int] | None = None) -> list[int]:
        """Indices of the newer entries replacing entry `i`, oldest first."""
        found = self._found.get(i)
        if found is None:
            found = self._found[i] = self._find(i)
        return found if among is None else [j for j in found if j in among]

    def _bag(self, i: int) -> set[str]:
        bag = self._words.get(i)
        if bag is None:
            bag = self._words[i] = words(self.entries[i].content)
        return bag

    def _find(self, i: int) -> list[int]:
        me = self.entries[i]
        shared: dict[int, int] = {}
        for w in self._bag(i):
            # as a substring: a superset, `relation` decides; a word on more than `cap` lines
            # links none, so its hits are counted no further
            hits = self._hits.get(w)
            if hits is None:
                hits = self._hits[w] = self.index.hits(w, self.cap)
            if len(hits) <= self.cap:
                for j in hits:
                    shared[j] = shared.get(j, 0) + 1
        out = []
        for j, n in shared.items():
            other = self.entries[j]
            if n < 2 or j == i or newer_of(other, me)[0] is not other:
                continue
            r = relation(other, me, self._bag(j), self._bag(i))  # of equal words, the newer
            if r is not None and r.keep is other:
                out.append(j)
        return sorted(out, key=lambda j: (self.entries[j].date, j))
