"""Full-text search over every saved session (`sessions search`, the `search_sessions` tool).

The index is a cache: an SQLite FTS5 database (`search-index.sqlite3`, standard library) in the
sessions folder, one row a session (its title, and the text of its live and archived user and
assistant messages; CJK indexed as bigrams, see search_text). The JSON files stay the source of
truth:

- Every search first reconciles the index with the folder, cheaply: the store's listing
  (`SessionStore.keyed_headers`, which reuses its own index of (inode, mtime_ns, size) keys)
  is compared with the key stored for each indexed session; only new or changed files are read,
  rows of deleted, renamed-away or quarantined files are dropped. A writer in another process
  changes the file's key, so the next search sees it.
- Files are read outside any lock and written in small transactions that re-check the stored
  key, so two processes refreshing at once both end correct (one may redo the other's work).
- A deleted index is built again, a damaged one (not a database, malformed, wrong schema) is
  removed and rebuilt; each says so in one line through `on_notice`.

Results are ranked by bm25 (title weighted over messages); each carries the messages that match
(read from the session file, verbatim) so callers can show snippets or cite them.
"""

from __future__ import annotations

import contextlib
import os
import stat
from collections.abc import Callable, Collection, Iterator, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any, TypeVar

from countbot_cli import fileio
from countbot_cli.config.own_files import SEARCH_INDEX_FILE as INDEX_FILE
from countbot_cli.conversation.sessions.search_text import (
    Terms,
    best_matches,
    index_text,
    parse_query,
)
from countbot_cli.conversation.sessions.session import Session
from countbot_cli.conversation.sessions.store import SessionStore
from countbot_cli.errors import CountbotError, DamagedDataError, StorageError, UsageError
from countbot_cli.fileio import Key
from countbot_cli.jsonsafe import loads_bounded
from countbot_cli.messages import Message

if TYPE_CHECKING:
    import sqlite3  # loaded by the first search, not by every command that builds the tools

_T = TypeVar("_T")

SCHEMA_VERSION = 3  # 2: the workspace a session was started in; 3: what the user said
SAID_FIRST, SAID_LAST = 6, 4  # the user messages kept for search by meaning (`said`) ...
SAID_CHARS = 300  # ... each cut to this many characters: the semantic side's bounded cost
BATCH = 64  # files indexed per transaction
TITLE_WEIGHT = 4.0
ROLES = ("user", "assistant")
_DAMAGE = {"SQLITE_CORRUPT", "SQLITE_NOTADB", "SQLITE_ERROR", "SQLITE_CORRUPT_VTAB"}
_BUSY = {"SQLITE_BUSY", "SQLITE_LOCKED", "SQLITE_BUSY_SNAPSHOT", "SQLITE_BUSY_RECOVERY"}

_SCHEMA = (
    "CREATE TABLE IF NOT EXISTS meta(k TEXT PRIMARY KEY, v INTEGER)",
    "CREATE TABLE IF NOT EXISTS files("
    "rowid INTEGER PRIMARY KEY, sid TEXT UNIQUE NOT NULL, ino INTEGER, mtime INTEGER, size INTEGER,"
    " ws TEXT NOT NULL DEFAULT '')",
    "CREATE VIRTUAL TABLE IF NOT EXISTS docs USING fts5("
    "title, body, tokenize='unicode61 remove_diacritics 2')",
    "CREATE TABLE IF NOT EXISTS said(file INTEGER NOT NULL, text TEXT NOT NULL)",
    "CREATE INDEX IF NOT EXISTS said_file ON said(file)",
)


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
    score: float  # higher is better (minus bm25)
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
        self.path = store.root / INDEX_FILE
        self._notice = on_notice or store.notice
        self.busy_timeout = busy_timeout
        self.reindexed = 0  # files (re)indexed by the last refresh (for tests and benches)
        self._heads: dict[str, tuple[Key, dict[str, Any]]] = {}
        self._said_rebuild = False

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

        def run(con: sqlite3.Connection) -> tuple[list[tuple[str, float]], bool]:
            ranked = self._query(con, terms, limit, exclude, every=True, workspace=workspace)
            if ranked or len(terms.words) == 1:
                return ranked, True
            return self._query(con, terms, limit, exclude, every=False, workspace=workspace), False

        ranked, every = self._with_index(run)
        hits = [self._hit(sid, score, terms, per_session) for sid, score in ranked]
        return Results([h for h in hits if h is not None], terms, every)

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
        """One result with its matching messages; `said` (a text of `said()`) first."""
        return self._hit(sid, score, terms, per_session, said)

    def listed_ids(self) -> list[str]:
        """The ids of every session the last refresh saw (for short ids)."""
        return list(self._heads)

    def refresh(self) -> int:
        """Bring the index up to date with the folder; returns how many files were (re)read."""
        return self._with_index(lambda _con: self.reindexed)

    # ---- the index ----

    def _with_index(self, fn: Callable[[sqlite3.Connection], _T]) -> _T:
        """Open (building or rebuilding as needed), refresh, run `fn`; a damaged index is
        rebuilt once."""
        import sqlite3

        for attempt in (1, 2):
            try:
                with self._connect() as con:
                    self._refresh(con)
                    return fn(con)
            except sqlite3.DatabaseError as e:
                name = getattr(e, "sqlite_errorname", "")
                if name in _BUSY:
                    raise StorageError(
                        "the search index is busy (another countbot is updating it); try again"
                    ) from e
                if attempt == 2 or not (name in _DAMAGE or name.startswith("SQLITE_CORRUPT")):
                    raise StorageError(f"search index {self.path}: {e}") from e
                self._notice(f"the search index {self.path} was damaged ({e}); rebuilding it")
                self._said_rebuild = True
                self._remove()
        raise AssertionError("unreachable")

    @contextlib.contextmanager
    def _connect(self) -> Iterator[sqlite3.Connection]:
        import sqlite3

        self.store.root.mkdir(mode=0o700, parents=True, exist_ok=True)
        with contextlib.suppress(OSError):
            if not stat.S_ISREG(os.lstat(self.path).st_mode):  # a folder, a link, a FIFO there
                raise DamagedDataError(
                    f"search index {self.path} is not a file",
                    hint="move it away; countbot builds the index again",
                )
        with contextlib.suppress(FileExistsError):  # private from the start (SQLite uses umask)
            os.close(os.open(self.path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600))
        con = sqlite3.connect(self.path, timeout=self.busy_timeout, isolation_level=None)
        try:
            con.execute("PRAGMA journal_mode=WAL")
            con.execute("PRAGMA synchronous=NORMAL")
            self._schema(con)
            yield con
        finally:
            con.close()

    def _schema(self, con: sqlite3.Connection) -> None:
        row = _meta(con)
        if row == SCHEMA_VERSION:
            return
        with _txn(con):
            if _meta(con) not in (None, SCHEMA_VERSION):  # an older layout: start again
                for table in ("meta", "files", "docs", "said"):
                    con.execute(f"DROP TABLE IF EXISTS {table}")
            for stmt in _SCHEMA:
                con.execute(stmt)
            con.execute("INSERT OR REPLACE INTO meta VALUES('version', ?)", (SCHEMA_VERSION,))

    def _remove(self) -> None:
        for suffix in ("", "-wal", "-shm", "-journal"):
            with contextlib.suppress(FileNotFoundError):
                os.unlink(f"{self.path}{suffix}")

    def _refresh(self, con: sqlite3.Connection) -> None:
        self.reindexed = 0
        self._heads = listing = self.store.keyed_headers()
        have = {
            sid: (i, m, s) for sid, i, m, s in con.execute("SELECT sid,ino,mtime,size FROM files")
        }
        gone = [sid for sid in have if sid not in listing]
        stale = sorted(sid for sid, (key, _h) in listing.items() if have.get(sid) != key)
        if not have and len(stale) > 1 and not self._said_rebuild:
            self._notice(f"building the search index of {len(stale)} sessions (once)")
        if gone:
            with _txn(con):
                for sid in gone:
                    _drop(con, sid)
        for start in range(0, len(stale), BATCH):
            docs = [_read(self.store, sid) for sid in stale[start : start + BATCH]]
            with _txn(con):
                for sid, doc in zip(stale[start : start + BATCH], docs, strict=True):
                    if doc is not None and fileio.key_of(self.store.path(sid)) != doc.key:
                        continue  # changed again since read: the next refresh reads it
                    self.reindexed += _store_doc(con, sid, doc)

    def _query(
        self,
        con: sqlite3.Connection,
        terms: Terms,
        limit: int,
        exclude: Collection[str],
        *,
        every: bool,
        workspace: str | None = None,
    ) -> list[tuple[str, float]]:
        where, args = ("", ()) if workspace is None else (" AND f.ws = ?", (workspace,))
        rows = con.execute(
            "SELECT f.sid, bm25(docs, ?, 1.0) AS r FROM docs JOIN files f ON f.rowid = docs.rowid"
            f" WHERE docs MATCH ?{where} ORDER BY r LIMIT ?",
            (TITLE_WEIGHT, terms.fts(every=every), *args, limit + len(exclude)),
        ).fetchall()
        return [(sid, -r) for sid, r in rows if sid not in exclude and sid in self._heads][:limit]

    # ---- the matching messages ----

    def _hit(
        self, sid: str, score: float, terms: Terms, per_session: int, said: str = ""
    ) -> Hit | None:
        head = self._heads[sid][1]
        hit = Hit(sid, head["title"], head["created_at"], head["updated_at"], score)
        if per_session <= 0:
            return hit
        try:
            session = self.store.load(sid)
        except CountbotError as e:  # deleted or damaged since the index was refreshed
            self._notice(e.user_message())
            return None
        msgs = [m for m in session.all_messages() if m.role in ROLES]
        archived = {m.id for m in session.archived}
        picked = best_matches((m.content for m in msgs), terms, per_session)
        close = [i for i, m in enumerate(msgs) if said and _said_text(m.content) == said][:1]
        if close and close[0] not in picked:
            picked = sorted([*close, *picked[: per_session - 1]])
        for i in picked:
            m = msgs[i]
            hit.excerpts.append(Excerpt(m.id, m.role, m.created_at, m.content, m.id in archived))
        return hit


@dataclass(frozen=True)
class _Doc:
    key: Key
    title: str
    body: str
    workspace: str = ""
    said: tuple[str, ...] = ()


def _read(store: SessionStore, sid: str) -> _Doc | None:
    """What the index holds of one session file; None when it is gone. A file that does not
    parse is indexed empty under its key (`sessions list` and `load` move it aside)."""
    try:
        data, key = fileio.read_keyed(store.path(sid))
    except OSError:
        return None
    try:
        session = Session.from_dict(loads_bounded(data))
    except ValueError:
        return _Doc(key, "", "")
    everything = session.all_messages()
    title, body = index_text(session.title), _body(everything)
    return _Doc(key, title, body, session.workspace, _said(everything))


def _body(messages: list[Message]) -> str:
    return "\n".join(index_text(m.content) for m in messages if m.role in ROLES and m.content)


def _said(messages: list[Message]) -> tuple[str, ...]:
    texts = [_said_text(m.content) for m in messages if m.role == "user" and m.content.strip()]
    kept = (
        texts if len(texts) <= SAID_FIRST + SAID_LAST else texts[:SAID_FIRST] + texts[-SAID_LAST:]
    )
    return tuple(dict.fromkeys(kept))


def _said_text(content: str) -> str:
    return " ".join(content.split())[:SAID_CHARS]


def _store_doc(con: sqlite3.Connection, sid: str, doc: _Doc | None) -> int:
    """Replace the row of `sid` unless it already holds this version (another process)."""
    row = con.execute("SELECT ino,mtime,size FROM files WHERE sid=?", (sid,)).fetchone()
    if doc is not None and row is not None and tuple(row) == doc.key:
        return 0
    _drop(con, sid)
    if doc is None:
        return 0
    cur = con.execute(
        "INSERT INTO files(sid,ino,mtime,size,ws) VALUES(?,?,?,?,?)", (sid, *doc.key, doc.workspace)
    )
    con.execute(
        "INSERT INTO docs(rowid,title,body) VALUES(?,?,?)", (cur.lastrowid, doc.title, doc.body)
    )
    con.executemany("INSERT INTO said VALUES(?,?)", [(cur.lastrowid, t) for t in doc.said])
    return 1


def _drop(con: sqlite3.Connection, sid: str) -> None:
    row = con.execute("SELECT rowid FROM files WHERE sid=?", (sid,)).fetchone()
    if row is not None:
        con.execute("DELETE FROM docs WHERE rowid=?", (row[0],))
        con.execute("DELETE FROM said WHERE file=?", (row[0],))
        con.execute("DELETE FROM files WHERE rowid=?", (row[0],))


def _meta(con: sqlite3.Connection) -> int | None:
    import sqlite3

    try:
        row = con.execute("SELECT v FROM meta WHERE k='version'").fetchone()
    except sqlite3.OperationalError as e:
        if "no such table" in str(e):
            return None
        raise
    return int(row[0]) if row is not None else 0


@contextlib.contextmanager
def _txn(con: sqlite3.Connection) -> Iterator[None]:
    con.execute("BEGIN IMMEDIATE")
    try:
        yield
    except BaseException:
        con.execute("ROLLBACK")
        raise
    con.execute("COMMIT")


def index_path(sessions_dir: Path) -> Path:
    return Path(sessions_dir) / INDEX_FILE
