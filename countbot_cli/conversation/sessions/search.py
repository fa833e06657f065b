"""Full-text search over every saved session (`sessions search`, the `search_sessions` tool).

The index (search_index.py) is a cache of the sessions, in the cache folder: each search first
reconciles it with the sessions folder, reading only files changed behind the store's back and
dropping rows of files gone, in small transactions that re-check each file's key, so two
processes refreshing at once both end correct. A lost index is built again (resumable, with
progress), a damaged one rebuilt; each says so through `on_notice`. Ranking is search_rank.py;
results carry the matching messages verbatim. docs/design/storage.md says more.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Collection, Iterator, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, TypeVar

from countbot_cli.conversation.sessions import search_index, search_saves
from countbot_cli.conversation.sessions.search_index import (
    SAID_FIRST,
    SAID_LAST,
    SCHEMA_VERSION,
    TITLE,
    said_text,
)
from countbot_cli.conversation.sessions.search_rank import rank
from countbot_cli.conversation.sessions.search_text import (
    Terms,
    best_matches,
    parse_query,
)
from countbot_cli.conversation.sessions.store import SessionStore
from countbot_cli.errors import StorageError, UsageError
from countbot_cli.fileio import Key

if TYPE_CHECKING:
    import sqlite3  # loaded by the first search, not by every command that builds the tools

__all__ = ["SCHEMA_VERSION", "Excerpt", "Hit", "Results", "SessionSearch"]

_T = TypeVar("_T")

EXCERPT_CHUNKS = 16  # matching chunks of one session read at most for its excerpts
_DAMAGE = {"SQLITE_CORRUPT", "SQLITE_NOTADB", "SQLITE_ERROR", "SQLITE_CORRUPT_VTAB"}
_BUSY = {"SQLITE_BUSY", "SQLITE_LOCKED", "SQLITE_BUSY_SNAPSHOT", "SQLITE_BUSY_RECOVERY"}


@dataclass(frozen=True)
class Excerpt:
    """One matching message, verbatim."""

    message_id: str
    role: str
    created_at: str
    content: str
    archived: bool


@dataclass
class Hit:
    id: str
    title: str
    created_at: str
    updated_at: str
    score: float  # higher is better
    excerpts: list[Excerpt] = field(default_factory=list)


@dataclass
class Results:
    hits: list[Hit]
    terms: Terms
    every_word: bool  # False: no session held every word; these hold some of them


class SessionSearch:
    """The search index of one sessions folder."""

    def __init__(
        self,
        store: SessionStore,
        *,
        on_notice: Callable[[str], None] | None = None,
        busy_timeout: float = 10.0,
    ) -> None:
        self.store = store
        self.path = search_index.index_path(store.root)
        self._notice = on_notice or store.notice
        self.busy_timeout = busy_timeout
        self._heads: dict[str, tuple[Key, dict[str, Any]]] = {}
        self._rebuilding = False  # after a "damaged" notice: no second line for the build
        self._matched: dict[str, frozenset[int]] = {}  # the last search's chunks holding a word

    def search(
        self,
        words: str | Sequence[str],
        *,
        limit: int = 10,
        exclude: Collection[str] = (),
        per_session: int = 3,
        workspace: str | None = None,
    ) -> Results:
        """Sessions matching every word (else any word), best first, with matching messages;
        only those started in `workspace` when it is given (None: every session)."""
        if limit < 1:
            raise UsageError("-n must be at least 1")
        terms = parse_query(words)

        def run(con: sqlite3.Connection) -> Results:
            ranked, every = rank(con, terms, limit, exclude, workspace, self._heads)
            self._matched = {r.sid: r.chunks for r in ranked}
            hits = [self._hit(con, r.sid, r.score, terms, per_session) for r in ranked]
            return Results([h for h in hits if h is not None], terms, every)

        return self._with_index(run)

    def said(
        self, workspace: str | None = None, exclude: Collection[str] = ()
    ) -> list[tuple[str, str]]:
        """(session id, text) of what the user said in each session (a bounded part: the
        first SAID_FIRST and last SAID_LAST messages, SAID_CHARS each), for search by meaning."""
        where, args = ("", ()) if workspace is None else (" WHERE f.ws = ?", (workspace,))
        rows = self._with_index(
            lambda con: con.execute(
                f"SELECT f.sid, s.text FROM said s JOIN files f ON f.rowid = s.file{where}", args
            ).fetchall()
        )
        return [(sid, t) for sid, t in rows if sid not in exclude and sid in self._heads]

    def hit(
        self, sid: str, score: float, terms: Terms, per_session: int, said: str = ""
    ) -> Hit | None:
        """One result with its matching messages; `said` (a text of `said()`) first. Reads the
        index as the last search or `said()` left it (no refresh); the messages come from the
        chunks the last search found holding a word, else from the session's first chunks."""
        import sqlite3

        try:
            with search_index.connect(self.path, self.busy_timeout, self._damaged) as con:
                return self._hit(con, sid, score, terms, per_session, said)
        except (sqlite3.Error, search_index.StaleIndex) as e:
            raise StorageError(f"search index {self.path}: {e}") from e

    def listed_ids(self) -> list[str]:
        """The ids of every session the last refresh saw (for short ids)."""
        return list(self._heads)

    # ---- the index ----

    def _with_index(self, fn: Callable[[sqlite3.Connection], _T]) -> _T:
        """Open (building or rebuilding as needed), refresh, run `fn`; a damaged index is
        rebuilt once."""
        import sqlite3

        for attempt in (1, 2):
            try:
                with search_index.connect(self.path, self.busy_timeout, self._damaged) as con:
                    self._refresh(con)
                    return fn(con)
            except search_index.StaleIndex:
                if attempt == 2:
                    raise StorageError(f"search index {self.path} keeps going stale") from None
                self._notice(f"the search index {self.path} was made by other rules; rebuilding it")
            except sqlite3.DatabaseError as e:
                name = getattr(e, "sqlite_errorname", "")
                if name in _BUSY:
                    raise StorageError(
                        "the search index is busy (another countbot is updating it); try again"
                    ) from e
                if attempt == 2 or not (name in _DAMAGE or name.startswith("SQLITE_CORRUPT")):
                    raise StorageError(f"search index {self.path}: {e}") from e
                self._notice(f"the search index {self.path} was damaged ({e}); rebuilding it")
            self._rebuilding = True
            search_saves.release(self.store.root)
            search_index.remove(self.path)
        raise AssertionError("unreachable")

    def _damaged(self, text: str) -> None:
        """A damaged index moved aside (search_index.open_index): said, and built quietly."""
        self._rebuilding = True
        self._notice(text)

    def _refresh(self, con: sqlite3.Connection) -> None:
        self._heads = self.store.keyed_headers()
        keys = {sid: key for sid, (key, _h) in self._heads.items()}
        search_index.refresh(con, self.store, keys, self._notice, quiet=self._rebuilding)

    # ---- the matching messages ----

    def _hit(
        self,
        con: sqlite3.Connection,
        sid: str,
        score: float,
        terms: Terms,
        per_session: int,
        said: str = "",
    ) -> Hit | None:
        head = self._heads[sid][1]
        row = con.execute("SELECT rowid, chunks FROM files WHERE sid = ?", (sid,)).fetchone()
        if row is None:  # gone since the index was refreshed
            return None
        hit = Hit(sid, head["title"], head["created_at"], head["updated_at"], score)
        if per_session <= 0:
            return hit
        held = self._matched.get(sid)
        ns = sorted(held - {TITLE})[:EXCERPT_CHUNKS] if held is not None else range(EXCERPT_CHUNKS)
        zs = con.execute(
            "SELECT n, z FROM chunks WHERE file = ? AND n IN (SELECT value FROM json_each(?))"
            " ORDER BY n",
            (row[0], json.dumps(list(ns))),
        ).fetchall()
        seen: list[tuple[tuple[int, int], list[Any]]] = []
        picked = [seen[i] for i in best_matches(_contents(zs, seen), terms, per_session)]
        close = _close(con, row, said) if said else None
        if close is not None and all(m[0] != close[0] for m in picked):
            picked = sorted([close, *picked[: per_session - 1]], key=lambda m: m[0])
        for _at, (mid, role, created, archived, content) in picked:
            hit.excerpts.append(Excerpt(mid, role, created, content, bool(archived)))
        return hit


def _contents(
    zs: list[tuple[int, bytes]], seen: list[tuple[tuple[int, int], list[Any]]]
) -> Iterator[str]:
    """The messages of the chunks `zs`, in order, each kept in `seen` as it is read."""
    for n, z in zs:
        for i, m in enumerate(search_index.unpack(z)):
            seen.append(((n, i), m))
            yield m[4]


def _close(
    con: sqlite3.Connection, row: tuple[int, int], said: str
) -> tuple[tuple[int, int], list[Any]] | None:
    """The user message whose `said_text` is `said`: in the first or last chunks, where
    `said()` takes what the user said (a chunk holds one message or more, so the first
    SAID_FIRST user messages are in the first 2 * SAID_FIRST chunks)."""
    file, chunks = row
    ns = sorted(
        {*range(min(chunks, 2 * SAID_FIRST)), *range(max(0, chunks - 2 * SAID_LAST), chunks)}
    )
    for n, z in con.execute(
        "SELECT n, z FROM chunks WHERE file = ? AND n IN (SELECT value FROM json_each(?))",
        (file, json.dumps(ns)),
    ).fetchall():
        for i, m in enumerate(search_index.unpack(z)):
            if m[1] == "user" and said_text(m[4]) == said:
                return (n, i), m
    return None
