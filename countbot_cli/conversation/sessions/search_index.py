"""The session search index: an SQLite database derived from the sessions folder
(`search-index.sqlite3`, in the cache folder: `index_path`).

A cache of the session files, which stay the source of truth: each session's chunks of messages
kept once, zlib-compressed, under a contentless FTS5 table (`detail=none`) that says which
chunks hold a word, plus what the user said for search by meaning. Re-indexing replaces only
the chunks whose hash changed; a cold build commits in batches with each file's key, so a build
stopped anywhere leaves whole sessions and the next one goes on. A change of the text rules
(`crc`) rebuilds it. The tables and why this shape: docs/design/storage.md.
"""

from __future__ import annotations

import contextlib
import itertools
import json
import os
import zlib
from collections.abc import Callable, Iterable, Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any, Protocol

from countbot_cli import fileio
from countbot_cli.config.derived import derived_file
from countbot_cli.config.own_files import SEARCH_INDEX_FILE
from countbot_cli.conversation.sessions.search_text import index_text
from countbot_cli.conversation.sessions.session import Session
from countbot_cli.errors import DamagedDataError
from countbot_cli.fileio import Key
from countbot_cli.jsonsafe import loads_bounded
from countbot_cli.messages import Message

if TYPE_CHECKING:
    import sqlite3  # loaded by the first save or search, not by every command

SCHEMA_VERSION = 4  # 2: workspace; 3: what the user said; 4: chunks, contentless detail=none
ROLES = ("user", "assistant")
CHUNK_MESSAGES = 32
CHUNK_CHARS = 16_000
TITLE = -1  # chunks.n of a session's title
BATCH = 64  # files indexed per transaction
LOUD_BUILD = 200  # reading this many sessions or more says so, with progress
PROGRESS_STEPS = 10
SAID_FIRST, SAID_LAST = 6, 4  # the user messages kept for search by meaning (`said`) ...
SAID_CHARS = 300  # ... each cut to this many characters: the semantic side's bounded cost
ZLIB_LEVEL = 6
JOURNALS = ("-wal", "-shm", "-journal")  # SQLite's files beside the index

_SCHEMA = (
    "CREATE TABLE IF NOT EXISTS meta(k TEXT PRIMARY KEY, v INTEGER)",
    "CREATE TABLE IF NOT EXISTS files(rowid INTEGER PRIMARY KEY, sid TEXT UNIQUE NOT NULL,"
    " ino INTEGER, mtime INTEGER, size INTEGER, ws TEXT NOT NULL DEFAULT '', chunks INTEGER)",
    # AUTOINCREMENT: a rowid is never reused, so no word of a deleted chunk can attach to another
    "CREATE TABLE IF NOT EXISTS chunks(rowid INTEGER PRIMARY KEY AUTOINCREMENT,"
    " file INTEGER NOT NULL, n INTEGER NOT NULL, hash BLOB NOT NULL, crc INTEGER NOT NULL,"
    " z BLOB NOT NULL)",
    "CREATE UNIQUE INDEX IF NOT EXISTS chunks_file ON chunks(file, n)",
    "CREATE VIRTUAL TABLE IF NOT EXISTS docs USING fts5(text, content='', detail=none,"
    " columnsize=0, tokenize='unicode61 remove_diacritics 2')",
    "CREATE TABLE IF NOT EXISTS said(file INTEGER NOT NULL, text TEXT NOT NULL)",
    "CREATE INDEX IF NOT EXISTS said_file ON said(file)",
)
_TABLES = ("meta", "files", "chunks", "docs", "said")


class SessionFiles(Protocol):
    """The sessions folder as the index reads it (the store; not imported: it calls us)."""

    root: Path

    def path(self, sid: str) -> Path: ...


class StaleIndex(Exception):
    """The index holds text made by other rules than this countbot's: it is built again."""


@dataclass(frozen=True)
class Chunk:
    """A piece of a session as the index holds it."""

    n: int
    hash: bytes  # of `data`
    payload: Any  # the title (str), or [[id, role, created_at, archived, content], ...]
    data: bytes  # the payload as JSON (what `z` compresses)
    full: bool = True  # a run the rule cut (not the session's last, cut by its end)

    def text(self) -> str:
        return chunk_text(self.payload)


# ---- the database ----


def index_path(root: Path) -> Path:
    """Where the index of the sessions folder `root` is: the cache folder, never `root`
    (a folder a file-sync tool may share)."""
    return derived_file(root, SEARCH_INDEX_FILE)


@contextlib.contextmanager
def connect(
    path: Path, busy_timeout: float, notice: Callable[[str], None] | None = None
) -> Iterator[sqlite3.Connection]:
    """The index at `path` (see `open_index`), closed after use."""
    con = open_index(path, busy_timeout, notice=notice)
    try:
        yield con
    finally:
        con.close()


def open_index(
    path: Path,
    busy_timeout: float,
    *,
    any_thread: bool = False,
    notice: Callable[[str], None] | None = None,
) -> sqlite3.Connection:
    """The index at `path`, created private and brought to this schema (an older one is
    dropped: it is a cache). `any_thread`: usable from every thread (the caller locks). A
    folder, a link or a FIFO where the index or its journal belongs (SQLite would wait on a
    FIFO forever) is moved aside, said through `notice`, and the index built again."""
    import sqlite3

    path.parent.mkdir(mode=0o700, parents=True, exist_ok=True)
    for part in (path, *(Path(f"{path}{suffix}") for suffix in JOURNALS)):
        if (kind := fileio.not_a_file(part)) is not None:
            fileio.cache_damaged(part, kind, notice)
        if fileio.not_a_file(part) is not None:  # it could not be moved
            raise DamagedDataError(
                f"search index {part} is {kind}, not a file",
                hint="move it away; countbot builds the index again",
            )
    with contextlib.suppress(FileExistsError):  # private from the start (SQLite uses umask)
        os.close(os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600))
    con = sqlite3.connect(
        path, timeout=busy_timeout, isolation_level=None, check_same_thread=not any_thread
    )
    try:
        con.execute("PRAGMA journal_mode=WAL")
        con.execute("PRAGMA synchronous=NORMAL")
        _schema(con)
    except BaseException:
        con.close()
        raise
    return con


def _schema(con: sqlite3.Connection) -> None:
    if _meta(con) == SCHEMA_VERSION:
        return
    with txn(con):
        older = _meta(con) not in (None, SCHEMA_VERSION)
        if older:  # an older layout: start again
            for table in _TABLES:
                con.execute(f"DROP TABLE IF EXISTS {table}")
        for stmt in _SCHEMA:
            con.execute(stmt)
        con.execute("INSERT OR REPLACE INTO meta VALUES('version', ?)", (SCHEMA_VERSION,))
    if older:
        con.execute("VACUUM")  # the older index's pages given back: the file is the new one's size


def _meta(con: sqlite3.Connection) -> int | None:
    import sqlite3

    try:
        row = con.execute("SELECT v FROM meta WHERE k='version'").fetchone()
    except sqlite3.OperationalError as e:
        if "no such table" in str(e):
            return None
        raise
    return int(row[0]) if row is not None else 0


def remove(path: Path) -> None:
    """Delete the index at `path` and its journal files."""
    for suffix in ("", *JOURNALS):
        with contextlib.suppress(FileNotFoundError):
            os.unlink(f"{path}{suffix}")


@contextlib.contextmanager
def txn(con: sqlite3.Connection) -> Iterator[None]:
    """A write transaction (taken at once: no deadlock between two upgrading readers)."""
    con.execute("BEGIN IMMEDIATE")
    try:
        yield
    except BaseException:
        con.execute("ROLLBACK")
        raise
    con.execute("COMMIT")


# ---- what a session is in the index ----


def chunks_of(session: Session, known: Sequence[Chunk] = ()) -> list[Chunk]:
    """The title chunk, then the session's user and assistant messages (archived first, as
    `all_messages`) cut into runs of CHUNK_MESSAGES or CHUNK_CHARS, whichever comes first.
    A chunk equal to the one at its place in `known` is that one: a save of a long session
    compares its runs whole and cuts and hashes only the ones that changed."""
    archived = len(session.archived)
    rows = [
        (m.id, m.role, m.created_at, int(i < archived), m.content)
        for i, m in enumerate(session.all_messages())
        if m.role in ROLES and m.content
    ]
    out = [_chunk(TITLE, session.title, known)]
    start = 0
    while start < len(rows):
        was = known[len(out)] if len(out) < len(known) else None
        if was is not None and was.full and rows[start : start + len(was.payload)] == was.payload:
            out.append(was)  # a run cut by the rule, unchanged: the same cut follows
            start += len(was.payload)
            continue
        end, full = _cut(rows, start)
        out.append(_chunk(len(out) - 1, rows[start:end], known, full=full))
        start = end
    return out


def _cut(rows: Sequence[tuple[Any, ...]], start: int) -> tuple[int, bool]:
    """Where the run from `start` ends, and whether the rule ended it (not the last row)."""
    chars = 0
    for end in range(start + 1, len(rows) + 1):
        chars += len(rows[end - 1][4])
        if end - start >= CHUNK_MESSAGES or chars >= CHUNK_CHARS:
            return end, True
    return len(rows), False


def _chunk(n: int, payload: Any, known: Sequence[Chunk], *, full: bool = True) -> Chunk:
    if n + 1 < len(known) and known[n + 1].payload == payload:
        return known[n + 1]
    import hashlib

    data = json.dumps(payload, ensure_ascii=False, separators=(",", ":"))
    raw = data.encode("utf-8", "surrogatepass")  # a lone surrogate from a file survives
    return Chunk(n, hashlib.blake2b(raw, digest_size=16).digest(), payload, raw, full)


def chunk_text(payload: Any) -> str:
    """What FTS5 indexes of a chunk (its title, or its messages one a line)."""
    if isinstance(payload, str):
        return index_text(payload)
    return "\n".join(index_text(m[4]) for m in payload)


def unpack(z: bytes) -> Any:
    """The payload of a chunk from its `z`."""
    return loads_bounded(zlib.decompress(z).decode("utf-8", "surrogatepass"))


def said_of(session: Session) -> tuple[str, ...]:
    """What the user said, bounded: the first SAID_FIRST and last SAID_LAST messages (read
    from both ends: a long session's middle is not looked at)."""
    everything = session.all_messages()
    cap = SAID_FIRST + SAID_LAST
    kept = list(itertools.islice(_said_by(everything), cap + 1))
    if len(kept) > cap:
        last = list(itertools.islice(_said_by(reversed(everything)), SAID_LAST))
        kept = kept[:SAID_FIRST] + last[::-1]
    return tuple(dict.fromkeys(said_text(m.content) for m in kept))


def _said_by(messages: Iterable[Message]) -> Iterator[Message]:
    return (m for m in messages if m.role == "user" and m.content.strip())


def said_text(content: str) -> str:
    return " ".join(content.split())[:SAID_CHARS]


# ---- writing one session ----


def put(
    con: sqlite3.Connection,
    sid: str,
    key: Key,
    session: Session | None,
    chunks: list[Chunk] | None = None,
) -> bool:
    """Make the index hold `session` (None: a file that does not parse, indexed empty) as the
    file of `sid` under `key`, cut into `chunks` (by default `chunks_of(session)`); only the
    chunks that changed are replaced. False when it already held that version. Run inside a
    transaction."""
    row = con.execute("SELECT rowid,ino,mtime,size FROM files WHERE sid=?", (sid,)).fetchone()
    if row is not None and tuple(row[1:]) == key:
        return False
    if chunks is None:
        chunks = chunks_of(session) if session is not None else []
    facts = (*key, session.workspace if session is not None else "", max(len(chunks) - 1, 0))
    if row is None:
        cur = con.execute(
            "INSERT INTO files(ino,mtime,size,ws,chunks,sid) VALUES(?,?,?,?,?,?)", (*facts, sid)
        )
        file = int(cur.lastrowid or 0)
    else:
        file = row[0]
        con.execute(
            "UPDATE files SET ino=?,mtime=?,size=?,ws=?,chunks=? WHERE rowid=?", (*facts, file)
        )
    old = {
        n: (rowid, h)
        for rowid, n, h in con.execute("SELECT rowid,n,hash FROM chunks WHERE file=?", (file,))
    }
    for c in chunks:
        have = old.pop(c.n, None)
        if have is not None and have[1] == c.hash:
            continue
        if have is not None:
            _delete_chunk(con, have[0])
        _insert_chunk(con, file, c)
    for rowid, _h in old.values():
        _delete_chunk(con, rowid)
    con.execute("DELETE FROM said WHERE file=?", (file,))
    if session is not None:
        con.executemany("INSERT INTO said VALUES(?,?)", [(file, t) for t in said_of(session)])
    return True


def _insert_chunk(con: sqlite3.Connection, file: int, c: Chunk) -> None:
    text = c.text()
    cur = con.execute(
        "INSERT INTO chunks(file,n,hash,crc,z) VALUES(?,?,?,?,?)",
        (file, c.n, c.hash, _crc(text), zlib.compress(c.data, ZLIB_LEVEL)),
    )
    con.execute("INSERT INTO docs(rowid,text) VALUES(?,?)", (cur.lastrowid, text))


def _delete_chunk(con: sqlite3.Connection, rowid: int) -> None:
    crc, z = con.execute("SELECT crc,z FROM chunks WHERE rowid=?", (rowid,)).fetchone()
    text = chunk_text(unpack(z))
    if _crc(text) != crc:
        raise StaleIndex(f"chunk {rowid} was indexed by other text rules")
    con.execute("INSERT INTO docs(docs,rowid,text) VALUES('delete',?,?)", (rowid, text))
    con.execute("DELETE FROM chunks WHERE rowid=?", (rowid,))


def drop(con: sqlite3.Connection, sid: str) -> None:
    """Remove the session `sid` from the index (inside a transaction)."""
    row = con.execute("SELECT rowid FROM files WHERE sid=?", (sid,)).fetchone()
    if row is None:
        return
    for (rowid,) in con.execute("SELECT rowid FROM chunks WHERE file=?", (row[0],)).fetchall():
        _delete_chunk(con, rowid)
    con.execute("DELETE FROM said WHERE file=?", (row[0],))
    con.execute("DELETE FROM files WHERE rowid=?", (row[0],))


def _crc(text: str) -> int:
    return zlib.crc32(text.encode("utf-8", "surrogatepass"))


# ---- bringing the index up to date with the folder ----


def read_session(store: SessionFiles, sid: str) -> tuple[Key, Session | None] | None:
    """The file of `sid` as the index holds it: its key and session (None when it does not
    parse: `sessions list` and `load` move it aside); None when it is gone."""
    try:
        data, key = fileio.read_keyed(store.path(sid))
    except OSError:
        return None
    try:
        return key, Session.from_dict(loads_bounded(data))
    except ValueError:
        return key, None


def refresh(
    con: sqlite3.Connection,
    store: SessionFiles,
    listing: dict[str, Key],
    notice: Callable[[str], None],
    *,
    quiet: bool = False,
) -> int:
    """Drop the sessions gone from `listing` (id -> file key), read the new and changed
    ones in batches; returns how many were (re)indexed. Says so when it builds the index
    (unless `quiet`: a notice about damage said it), with progress when there are many."""
    have = {sid: (i, m, s) for sid, i, m, s in con.execute("SELECT sid,ino,mtime,size FROM files")}
    gone = [sid for sid in have if sid not in listing]
    if gone:
        with txn(con):
            for sid in gone:
                drop(con, sid)
    stale = sorted(sid for sid, key in listing.items() if have.get(sid) != key)
    progress = _Progress(notice, len(stale), fresh=not have, quiet=quiet)
    indexed = 0
    try:
        for start in range(0, len(stale), BATCH):
            batch = stale[start : start + BATCH]
            docs = [read_session(store, sid) for sid in batch]
            with txn(con):
                for sid, doc in zip(batch, docs, strict=True):
                    indexed += _put_read(con, store, sid, doc)
            progress.done(len(batch))
    except KeyboardInterrupt:
        progress.stopped()
        raise
    return indexed


class _Progress:
    """What a refresh says: a first line when it builds the index (or reads LOUD_BUILD files
    or more), then every tenth of the way when it reads that many."""

    def __init__(self, notice: Callable[[str], None], total: int, *, fresh: bool, quiet: bool):
        self.notice, self.total, self.count = notice, total, 0
        self.loud = total >= LOUD_BUILD
        self.step = max(BATCH, total // PROGRESS_STEPS)
        if (fresh and total > 1 and not quiet) or self.loud:
            what = "building the search index of" if fresh else "updating the search index:"
            tail = "; Ctrl-C stops, the next search goes on" if self.loud else ""
            notice(f"{what} {total:,} sessions (once{tail})")

    def done(self, n: int) -> None:
        before, self.count = self.count, self.count + n
        if self.loud and self.count < self.total and self.count // self.step != before // self.step:
            self.notice(f"indexed {self.count:,} of {self.total:,} sessions")

    def stopped(self) -> None:
        if self.loud:
            self.notice(f"stopped after {self.count:,} of {self.total:,} sessions")


def _put_read(
    con: sqlite3.Connection, store: SessionFiles, sid: str, doc: tuple[Key, Session | None] | None
) -> int:
    if doc is None:
        drop(con, sid)
        return 0
    if fileio.key_of(store.path(sid)) != doc[0]:
        return 0  # changed again since read: the next refresh reads it
    return int(put(con, sid, *doc))
