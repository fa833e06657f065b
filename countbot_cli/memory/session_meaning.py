"""Session search by words and by meaning: `sessions search`, `/search`, the `/resume` picker
and the `search_sessions` tool.

`SessionSearch` (conversation/sessions/search.py) finds sessions by their words (SQLite FTS5; a question
by its content words). With the `recall` extra, `MeaningSearch` also compares the question's
vector with the vectors of what the user said in each session (`SessionSearch.said`: at most
ten messages a session, 300 characters each, so the cost stays bounded however long the
sessions are), cached by content in `sessions/search-vectors.bin` (memory/vectors.py: only
new messages are embedded). The two rankings are fused by rank (reciprocal rank fusion), so a
session that holds the question's words stays near the top and one that only means the same
("which instrument do I play" / "I have cello lessons on Tuesdays", or the same question in
Chinese) joins it. Only a sentence is searched by meaning (`is_sentence`: a word or two is
looked up as typed), and a session joins by meaning only when it is closer to the question
than to small talk (MIN_MEANING). Without the extra it is `SessionSearch` alone. The `/resume`
picker filters as you type and stays with words.
"""

from __future__ import annotations

from collections.abc import Callable, Collection, Sequence

from countbot_cli.config.derived import derived_file
from countbot_cli.config.own_files import SEARCH_VECTORS_FILE
from countbot_cli.conversation.sessions.search import Results, SessionSearch
from countbot_cli.conversation.sessions.store import SessionStore
from countbot_cli.memory.embed import Embedder, available, import_numpy, shared
from countbot_cli.memory.vectors import VectorCache
from countbot_cli.words import CJK_RUN

RANK_K = 5.0  # reciprocal rank fusion: 1 / (RANK_K + rank)
MIN_MEANING = 0.05  # a session's best message, scored as recall scores lines (centred cosine)
EVERY_WORD_WEIGHT = 1.2  # the weight of a rank by words when sessions hold every word ...
LEXICAL_WEIGHT = 0.5  # ... and when they hold only some (a question's words: by meaning first)


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
    ) -> None:
        self.words = SessionSearch(store, on_notice=on_notice)
        self.notice = on_notice or store.notice
        use = available() if semantic is None else semantic
        self.embedder: Embedder | None = shared() if use else None
        self._cache: VectorCache | None = None

    def listed_ids(self) -> list[str]:
        return self.words.listed_ids()

    def refresh(self) -> int:
        return self.words.refresh()

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
        fused: dict[str, float] = {}
        weight = EVERY_WORD_WEIGHT if found.every_word else LEXICAL_WEIGHT
        for rank, h in enumerate(found.hits):
            fused[h.id] = weight / (RANK_K + rank)
        for rank, (sid, _said) in enumerate(meant):
            fused[sid] = fused.get(sid, 0.0) + 1.0 / (RANK_K + rank)
        said = dict(meant)
        best = sorted(fused, key=lambda sid: -fused[sid])[:limit]
        hits = [
            self.words.hit(sid, fused[sid], found.terms, per_session, said.get(sid, ""))
            for sid in best
        ]
        return Results([h for h in hits if h is not None], found.terms, found.every_word)

    def _meant(
        self, text: str, workspace: str | None, exclude: Collection[str], limit: int
    ) -> list[tuple[str, str]] | None:
        """(session id, its closest message) best first, by meaning; None without the extra."""
        embedder = self.embedder
        if embedder is None:
            return None
        import_numpy()
        try:
            said = self.words.said(workspace, exclude)
            if self._cache is None:
                path = derived_file(self.words.store.root, SEARCH_VECTORS_FILE)
                self._cache = VectorCache(path, embedder, self.notice, "session messages")
            vectors = self._cache.matrix([t for _, t in said])
            scores = vectors @ (embedder.query(text) - embedder.small_talk())
        except (RuntimeError, OSError, ValueError) as e:
            self.notice(f"search by meaning is off ({e}); searching by words")
            self.embedder = None
            return None
        finally:
            while embedder.notices:  # what loading had to say (a damaged model cache)
                self.notice(embedder.notices.pop(0))
        best: dict[str, tuple[float, str]] = {}
        for (sid, t), score in zip(said, scores.tolist(), strict=True):
            if score >= MIN_MEANING and score > best.get(sid, (-1.0, ""))[0]:
                best[sid] = (score, t)
        ranked = sorted(best, key=lambda sid: -best[sid][0])[:limit]
        return [(sid, best[sid][1]) for sid in ranked]
