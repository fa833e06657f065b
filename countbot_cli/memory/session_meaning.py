"""Session search by words and by meaning: `sessions search`, `/search`, the `/resume` picker
and the `search_sessions` tool.

`SessionSearch` (conversation/sessions/search.py) finds sessions by their words (SQLite FTS5,
BM25: a rare word weighs more). With the `recall` extra, `MeaningSearch` also scores what the user
said in each session (`SessionSearch.said`: at most ten messages a session, 300 characters
each, so the cost stays bounded however long the sessions are) against the question, as recall
scores memory lines (the cosine less the one with small talk; vectors cached by content,
memory/vectors.py: `sessions search` waits for new messages to be embedded, a search inside a
conversation takes what is ready within `memory.recall_wait`), and takes sessions in recall's order
(memory/rank.py): the first places to the sessions best by words, the rest by meaning. A
session joins by meaning only when it is closer to the question than to small talk. Only a
sentence is searched by meaning (`is_sentence`: a word or two is looked up as typed); without
the extra it is `SessionSearch` alone. The `/resume` picker filters as you type, by words.
"""

from __future__ import annotations

from collections.abc import Callable, Collection, Sequence
from itertools import islice

from countbot_cli.conversation.sessions.search import Results, SessionSearch
from countbot_cli.conversation.sessions.store import SessionStore
from countbot_cli.memory import rank
from countbot_cli.memory.embed import QUESTION_WAIT, START_TIMEOUT, available
from countbot_cli.memory.meaning import SMALL_TALK, scores
from countbot_cli.memory.vectors import LineVectors, search_vectors_path
from countbot_cli.words import CJK_RUN


def is_sentence(text: str) -> bool:
    """A question or a sentence (three words or more, or four CJK characters in a row): searched
    by meaning too. A word or two ("kumquat", "redis port") is searched by its words only."""
    return len(text.split()) >= 3 or any(len(run) >= 4 for run in CJK_RUN.re.findall(text))


class MeaningSearch:
    """The search of one sessions folder, by words and (with the extra) by meaning."""

    def __init__(
        self,
        store: SessionStore,
        *,
        on_notice: Callable[[str], None] | None = None,
        semantic: bool | None = None,
        wait: float | None = QUESTION_WAIT,
    ) -> None:
        """`wait`: seconds a search waits for messages to be embedded (None: for all of them,
        saying how far it got)."""
        self.words = SessionSearch(store, on_notice=on_notice)
        self.notice = on_notice or store.notice
        use = available() if semantic is None else semantic
        self.vectors: LineVectors | None = None
        if use:
            path = search_vectors_path(store.root)
            self.vectors = LineVectors(
                path, self.notice, what="session messages", purpose="search", fixed=SMALL_TALK
            )
        self.wait = wait

    def listed_ids(self) -> list[str]:
        return self.words.listed_ids()

    def search(
        self,
        words: str | Sequence[str],
        *,
        limit: int = 10,
        exclude: Collection[str] = (),
        per_session: int = 3,
        workspace: str | None = None,
    ) -> Results:
        """Best sessions first (see the module), each with its matching messages."""
        found = self.words.search(
            words, limit=limit * 2, exclude=exclude, per_session=0, workspace=workspace
        )
        text = words if isinstance(words, str) else " ".join(words)
        meant = self._meant(text, workspace, exclude, limit * 2) if is_sentence(text) else None
        if meant is None:
            return self.words.search(
                words, limit=limit, exclude=exclude, per_session=per_session, workspace=workspace
            )
        words_order = [h.id for h in found.hits]
        meaning_order = [sid for sid, _said in meant]
        best = list(islice(rank.candidates(meaning_order, words_order, rank.WORD_PLACES), limit))
        said = dict(meant)
        hits = [  # the score is the place: higher is better, as by words alone
            self.words.hit(sid, 1.0 / (1 + k), found.terms, per_session, said.get(sid, ""))
            for k, sid in enumerate(best)
        ]
        return Results([h for h in hits if h is not None], found.terms, found.every_word)

    def _meant(
        self, text: str, workspace: str | None, exclude: Collection[str], limit: int
    ) -> list[tuple[str, str]] | None:
        """(session id, its closest message) best first, by meaning; None without the extra."""
        vectors = self.vectors
        if vectors is None:
            return None
        said = self.words.said(workspace, exclude)
        meaning = vectors.meaning([t for _, t in said], text, self.wait)
        small_talk = (
            vectors.queries(SMALL_TALK, self.wait or START_TIMEOUT) if meaning is not None else None
        )
        if meaning is None or small_talk is None:
            return None
        score_of = scores(meaning.question, small_talk, meaning.lines)
        score_of[~meaning.has] = -1.0  # not embedded yet: found by its words only
        best: dict[str, tuple[float, str]] = {}
        for (sid, t), score in zip(said, score_of.tolist(), strict=True):
            if score > max(0.0, best.get(sid, (0.0, ""))[0]):  # closer to it than to small talk
                best[sid] = (score, t)
        ranked = sorted(best, key=lambda sid: -best[sid][0])[:limit]
        return [(sid, best[sid][1]) for sid in ranked]
