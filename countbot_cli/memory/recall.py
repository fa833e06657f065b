"""Which MEMORY.md lines go with a user message (`memory.inject: relevant`), and how.

`pick` chooses: candidates in memory/rank.py's order (by meaning, the first places kept for the
lines holding the message's rarest words), taken while they fit the budget (`memory.recall_lines`
lines within `memory.recall_tokens` tokens; what the whole lines leave goes to the best line too
long for it, cut to its start), each with the newer lines that replace it (memory/versions.py:
the rule `memory tidy` proposes by). A line replaced by a line the user
wrote (`memory add`) or approved (`memory tidy`) is left out, its replacement sent instead; one
replaced only by an automatic line is sent marked `(older)`. The lines go oldest first, each
with its date, so the model sees which is newest. `Recall` feeds it: the message's vector and
the lines' (MEMORY.vectors.bin, memory/vectors.py), by words alone until the models load or
without the `recall` extra. Invariant: `pick` reads only what it is given, so what `ask` sends
is what an in-process evaluation of the same memory and message picks.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any, NamedTuple

from countbot_cli.conversation.token_estimate import estimate_tokens
from countbot_cli.memory import rank, sources
from countbot_cli.memory.embed import QUESTION_WAIT, available
from countbot_cli.memory.meaning import SMALL_TALK, scores
from countbot_cli.memory.search import Entry, Snapshot, query_words
from countbot_cli.memory.vectors import LineVectors, remove_old_model_cache, vectors_path

if TYPE_CHECKING:
    import numpy as np
    from numpy.typing import NDArray

    from countbot_cli.memory.store import MemoryStore

USER_SOURCE = "user"  # a line the user wrote (`memory add`): it may retire an older line
TIDY_SOURCE = "tidy"  # ... or approved: a line `memory tidy` merged (its sources record)


class Budget(NamedTuple):
    """What recall may send with one message (`memory.recall_lines`, `memory.recall_tokens`)."""

    lines: int
    tokens: int


class Picked(NamedTuple):
    entry: Entry  # as sent: its content cut to its start (`cut`) when it did not fit whole
    older: bool  # a newer automatic line sent with it replaces it


class Meaning(NamedTuple):
    """Each line's score against the message (higher: closer in meaning); `embedded`: which
    lines have a vector (None: all of them)."""

    scores: Sequence[float] | NDArray[np.float32]  # the encoder process sends an array
    embedded: Sequence[bool] | NDArray[np.bool_] | None = None


def line_tokens(text: str) -> int:
    """The tokens a recalled line costs as sent (`- ` before it, a newline after), estimated
    (conversation/token_estimate.py): counting them exactly would load the tokenizer in every
    `ask` that recalls, for a budget that is a bound of the order of a thousand tokens."""
    return estimate_tokens(text) + 2


def label(entry: Entry, older: bool = False) -> str:
    """How a recalled line is sent: `date: content`, or `date (older): content`."""
    return f"{entry.date}{' (older)' if older else ''}: {entry.content}"


def cut(entry: Entry, older: bool, room: int, cost: Callable[[str], int]) -> Entry | None:
    """`entry` cut to the longest start of its content that, ending in "…", costs at most `room`
    tokens as sent (`cost(label(...))`); None when not even its first character does."""
    text = entry.content

    def fits(n: int) -> bool:
        return cost(label(entry._replace(content=text[:n] + "…"), older)) <= room

    if not text or not fits(1):
        return None
    lo, hi = 1, 2  # fits(lo); hi: the first length found too long, or the whole
    while hi < len(text) and fits(hi):  # doubling: a 1 MB line is measured by its start
        lo, hi = hi, hi * 2
    hi = min(hi, len(text))
    while hi - lo > 1:
        mid = (lo + hi) // 2
        lo, hi = (mid, hi) if fits(mid) else (lo, mid)
    return entry._replace(content=text[:lo].rstrip() + "…")


def newest(
    snap: Snapshot,
    budget: Budget,
    cost: Callable[[str], int],
    skip: Callable[[Entry], bool] = lambda _e: False,
) -> list[Picked]:
    """`memory.inject: recent`: the newest lines (by date, then place in the file) that fit
    the budget, oldest first."""
    index, entries = snap.index(), snap.entries()
    chosen: list[int] = []
    used = 0
    for i in reversed(index.by_age):
        if len(chosen) >= budget.lines:
            break
        tokens = 0 if skip(entries[i]) else cost(label(entries[i]))
        if tokens and used + tokens <= budget.tokens:
            chosen.append(i)
            used += tokens
    return [Picked(entries[i], False) for i in reversed(chosen)]


def written_by_user(entry: Entry) -> bool:
    """Whether a line is the user's own by its source field (`memory add`)."""
    return entry.source == USER_SOURCE


def users_lines(memory_file: Path) -> Callable[[Entry], bool]:
    """Whether a line is the user's own: written by them, or merged by `memory tidy` on their
    yes (its sources record; the sidecar is read once, and only when asked about a line
    another source wrote)."""
    links: list[dict[str, dict[str, Any]]] = []

    def users(entry: Entry) -> bool:
        if written_by_user(entry):
            return True
        if not links:
            links.append(sources.load(memory_file))
        record = links[0].get(sources.line_key(entry.line))
        return record is not None and record.get("source") == TIDY_SOURCE

    return users


def pick(
    snap: Snapshot,
    words: list[str],
    meaning: Meaning | None,
    budget: Budget,
    cost: Callable[[str], int] = line_tokens,
    skip: Callable[[Entry], bool] = lambda _e: False,
    users: Callable[[Entry], bool] = written_by_user,
) -> list[Picked]:
    """The lines to send, oldest first (see the module). `words`: the message's search words
    (`query_words`); `meaning`: None when recall is by words; `cost`: the tokens of a line as
    sent; `skip`: lines never recalled (muted, or pinned: in the system prompt already);
    `users`: whether a line is the user's own (it may retire older lines)."""
    n = len(snap.contents)
    index = snap.index()
    word_order = rank.by_words(rank.idf_scores(index, words, n), index.rank)
    if meaning is None:
        meaning_order, unembedded = [], n
    else:
        meaning_order = rank.by_meaning(meaning.scores, meaning.embedded)
        unembedded = n - len(meaning_order)
    places = rank.word_places(budget.lines, unembedded, n)
    picking = _Picking(snap, budget, cost, skip, users)
    for i in rank.candidates(meaning_order, word_order, places):
        if picking.full():
            break
        picking.take(i)
    for i in picking.too_long:  # what the whole lines left goes to the best of them, cut
        if picking.full() or picking.used >= budget.tokens:
            break
        picking.take(i, last=True)
    return picking.picked()


class _Picking:
    """`pick`'s state: the lines chosen so far, in the order taken, and the tokens they use."""

    def __init__(
        self,
        snap: Snapshot,
        budget: Budget,
        cost: Callable[[str], int],
        skip: Callable[[Entry], bool],
        users: Callable[[Entry], bool],
    ) -> None:
        from countbot_cli.memory.versions import Replacements  # once lines are sent (start-up)

        self.index, self.entries = snap.index(), snap.entries()
        self.replaced = Replacements(self.entries, self.index)
        self.budget, self.cost, self.skip, self.users = budget, cost, skip, users
        self.chosen: list[int] = []
        self.seen: set[int] = set()
        self.sent_as: dict[int, Entry] = {}  # the lines sent cut to their start
        self.too_long: list[int] = []  # lines that did not fit whole, in rank order
        self.used = 0

    def full(self) -> bool:
        return len(self.chosen) >= self.budget.lines

    def whole(self, i: int) -> int:
        return self.cost(label(self.entries[i], bool(self.replaced.of(i))))

    def take(self, i: int, last: bool = False) -> None:
        """Line `i` with the newer lines that replace it; one retired by the user's own line
        gives way to it. A line too long for what is left waits (`too_long`) until `last`,
        when it goes cut to its start, leaving room for its newer lines."""
        if i in self.seen or self.full():
            return
        self.seen.add(i)
        if self.skip(self.entries[i]):
            return
        newer = self.replaced.of(i)
        if any(self.users(self.entries[j]) for j in newer):  # retired by the user's own line:
            for j in newer:  # that one goes instead
                self.take(j)
            return
        tokens = self.whole(i)
        if self.used + tokens > self.budget.tokens:
            if not last:  # whole lines first
                self.seen.discard(i)
                self.too_long.append(i)
                return
            follow = [j for j in newer if j not in self.seen and not self.skip(self.entries[j])]
            left = self.budget.lines - len(self.chosen) - 1
            room = self.budget.tokens - self.used - sum(map(self.whole, follow[:left]))
            if (short := cut(self.entries[i], bool(newer), room, self.cost)) is None:
                return
            self.sent_as[i] = short
            tokens = self.cost(label(short, bool(newer)))
        self.chosen.append(i)
        self.used += tokens
        for j in newer:  # a newer line that replaces it goes with it
            self.take(j)

    def picked(self) -> list[Picked]:
        """The chosen lines oldest first, each marked `(older)` when a line replacing it goes."""
        sent = set(self.chosen)
        return [
            Picked(
                self.sent_as.get(i, self.entries[i]), any(j in sent for j in self.replaced.of(i))
            )
            for i in sorted(self.chosen, key=lambda i: (self.index.rank[i], i))
        ]


class Recall:
    """Recall over one memory file; by meaning when the extra is installed and loads."""

    def __init__(
        self,
        memory: MemoryStore,
        *,
        semantic: bool | None = None,
        notice: Callable[[str], None] = lambda _m: None,
        wait: float = QUESTION_WAIT,
        keep: float = 0.0,
    ) -> None:
        """`wait`: seconds a recall waits for its vectors (`memory.recall_wait`); `keep`:
        seconds the encoder process serves later countbots (`memory.recall_keep`)."""
        self.memory = memory
        self.notice = notice
        use = available() if semantic is None else semantic
        self.vectors: LineVectors | None = None
        if use:
            path = vectors_path(memory.path)
            self.vectors = LineVectors(path, lambda m: self.notice(m), fixed=SMALL_TALK)
            self.vectors.embedder.keep = keep
            memory.on_added["recall"] = self._embed_added  # the newest Recall on the store
        remove_old_model_cache(memory.path)
        self.wait = wait

    @property
    def mode(self) -> str:
        """ "semantic" or "lexical" (what `/context` and `config show` report)."""
        vectors = self.vectors
        return "semantic" if vectors is not None and vectors.embedder.error is None else "lexical"

    def start(self) -> None:
        """Start the encoders and embed the lines without a vector in the background when
        there is a memory to recall from (no-op when lexical): the REPL while you type, `ask`
        while the request is prepared."""
        try:
            has_lines = self.memory.path.stat().st_size > 0
        except OSError:
            has_lines = False
        if self.vectors is not None and has_lines:
            self.vectors.embedder.start()  # loading while the memory is read
            if not self.vectors.embedder.attached:  # served: it reads the vectors itself
                self.vectors.start(self.memory.snapshot().contents)

    def wake(self) -> None:
        """A message is being typed: start the encoders if they stopped while idle, so that
        its vector is not waited for."""
        vectors = self.vectors
        if vectors is not None and not vectors.embedder.running and not vectors.embedder.error:
            self.start()

    def relevant(
        self,
        text: str,
        budget: Budget,
        cost: Callable[[str], int],
        skip: Callable[[Entry], bool] = lambda _e: False,
    ) -> list[Picked]:
        """The lines to send with `text` (`pick`), oldest first."""
        snap = self.memory.snapshot()
        if not snap.contents or not text.strip():
            return []
        meaning = self.meaning(snap, text)
        users = users_lines(self.memory.path)
        return pick(snap, query_words(text), meaning, budget, cost, skip, users)

    def meaning(self, snap: Snapshot, text: str) -> Meaning | None:
        """Each line's score for `text`: the cosine of their vectors, less the line's cosine
        with small talk (SMALL_TALK), so a line close to every message ranks by what it shares
        with this one; what is ready within `wait` seconds (`embedded`: which lines have a
        vector). Computed by an encoder process an earlier countbot left serving when it has
        every vector (`LineVectors.ranked`), else here. None when recall is by words."""
        vectors = self.vectors
        if vectors is None:
            return None
        deadline = time.monotonic() + self.wait
        served = vectors.ranked(snap.contents, text, self.wait)
        if served is not None:
            return Meaning(served)
        meaning = vectors.meaning(snap.contents, text, max(deadline - time.monotonic(), 0.0))
        left = max(deadline - time.monotonic(), 0.0)
        small_talk = vectors.queries(SMALL_TALK, left) if meaning is not None else None
        if meaning is None or small_talk is None:
            return None
        return Meaning(
            scores(meaning.question, small_talk, meaning.lines),
            meaning.has if meaning.partial else None,
        )

    def _embed_added(self, _entries: list[Entry]) -> None:
        """Embed lines as they are written (automatic memory, `--remember`, the memory tool),
        in the background, so the next recall has nothing to embed."""
        if self.vectors is not None:
            self.vectors.added(self.memory.snapshot().contents)
