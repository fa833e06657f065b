"""Which sessions a query finds, and in what order (for conversation/sessions/search.py).

Each query word is looked up on its own in the index, most recently written chunks first and
at most `CANDIDATES` of them, the rarest word first, so a search costs the same at 50 or 50,000
sessions and a session holding every word is never lost to the bound. A session's score is BM25
over chunks, plus `TITLE_WEIGHT` when its title holds the word; a long CJK word is looked up as
its bigrams and checked in the chunks found. docs/design/storage.md says more.
"""

from __future__ import annotations

import math
from collections.abc import Collection
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from countbot_cli.conversation.sessions import search_index
from countbot_cli.conversation.sessions.search_text import Terms, fold, fts_term, is_phrase

if TYPE_CHECKING:
    import sqlite3

CANDIDATES = 2_000  # chunks a word brings at most (the most recently written)
TITLE_WEIGHT = 4.0
K1, B = 1.2, 0.75


@dataclass
class Found:
    """The chunks holding one word: file rowid -> chunk numbers (TITLE for the title)."""

    word: str
    chunks: int  # chunks holding it in the whole index
    files: dict[int, set[int]] = field(default_factory=dict)
    complete: bool = True  # every chunk holding it is in `files` (not cut at CANDIDATES)


@dataclass(frozen=True)
class Ranked:
    sid: str
    score: float
    chunks: frozenset[int]  # the chunks known to hold a word (TITLE for the title)


def rank(
    con: sqlite3.Connection,
    terms: Terms,
    limit: int,
    exclude: Collection[str],
    workspace: str | None,
    listed: Collection[str],
) -> tuple[list[Ranked], bool]:
    """The `limit` best sessions holding every word (True), else some of them (False)."""
    found = sorted((_found(con, w, workspace) for w in terms.words), key=lambda f: f.chunks)
    every = _every(con, found)
    if every or len(found) == 1:
        return _best(con, found, set(every), limit, exclude, listed), True
    some = {file for f in found for file in f.files}
    return _best(con, found, some, limit, exclude, listed), False


def _found(con: sqlite3.Connection, word: str, workspace: str | None) -> Found:
    """The most recent CANDIDATES chunks holding `word`; how many hold it in all is counted
    when that is all of them, else estimated from their share of the chunks written since the
    oldest of them: one evaluation of the word's FTS5 expression either way (a prefix query
    merges the lists of every word it matches: evaluating it costs as much as counting it)."""
    where, args = ("", ()) if workspace is None else (" AND f.ws = ?", (workspace,))
    rows = con.execute(
        "SELECT c.file, c.n, c.rowid FROM docs JOIN chunks c ON c.rowid = docs.rowid"
        f" JOIN files f ON f.rowid = c.file WHERE docs MATCH ?{where}"
        " ORDER BY docs.rowid DESC LIMIT ?",
        (fts_term(word), *args, CANDIDATES + 1),
    ).fetchall()
    complete = len(rows) <= CANDIDATES
    rows = rows[:CANDIDATES]
    count = len(rows)
    if not complete:
        sql = "SELECT count(*) FROM chunks WHERE rowid >= ?"
        span = max(1, con.execute(sql, (rows[-1][2],)).fetchone()[0])
        count = max(count, round(count / span * _n_chunks(con)))
    if is_phrase(word):
        rows = [r for r in rows if _holds(con, r[2], word)]
    found = Found(word, count, complete=complete)
    for file, n, _rowid in rows:
        found.files.setdefault(file, set()).add(n)
    return found


def _n_chunks(con: sqlite3.Connection) -> int:
    return int(con.execute("SELECT count(*) FROM chunks").fetchone()[0])


def _holds(con: sqlite3.Connection, rowid: int, word: str) -> bool:
    """Whether the chunk `rowid` holds the CJK `word` itself (not only its bigrams apart)."""
    (z,) = con.execute("SELECT z FROM chunks WHERE rowid = ?", (rowid,)).fetchone()
    payload: Any = search_index.unpack(z)
    texts = [payload] if isinstance(payload, str) else [m[4] for m in payload]
    return any(word in fold(t) for t in texts)


def _every(con: sqlite3.Connection, found: list[Found]) -> list[int]:
    """The files holding every word: those of the rarest, kept while each other word is found
    in them (looked up in their chunks when the word's own list was cut)."""
    files = set(found[0].files)
    for f in found[1:]:
        missing = files - set(f.files)
        if missing and not f.complete:
            _look_in(con, f, missing)
        files &= set(f.files)
    return sorted(files)


def _look_in(con: sqlite3.Connection, f: Found, files: Collection[int]) -> None:
    """Add to `f` the chunks of `files` that hold its word: every chunk holding it (one
    evaluation, rowids only) against the chunks of those files."""
    holding = {
        r for (r,) in con.execute("SELECT rowid FROM docs WHERE docs MATCH ?", (fts_term(f.word),))
    }
    for rowid, file, n in con.execute(
        "SELECT rowid, file, n FROM chunks WHERE file IN (SELECT value FROM json_each(?))",
        (_json_ints(files),),
    ).fetchall():
        if rowid in holding and (not is_phrase(f.word) or _holds(con, rowid, f.word)):
            f.files.setdefault(file, set()).add(n)


def _best(
    con: sqlite3.Connection,
    found: list[Found],
    files: set[int],
    limit: int,
    exclude: Collection[str],
    listed: Collection[str],
) -> list[Ranked]:
    if not files:
        return []
    n_chunks = _n_chunks(con)
    n_files = int(con.execute("SELECT count(*) FROM files").fetchone()[0])
    avg = max(1.0, (n_chunks - n_files) / max(1, n_files))
    facts = {
        file: (sid, chunks)
        for file, sid, chunks in con.execute(
            "SELECT rowid, sid, chunks FROM files WHERE rowid IN (SELECT value FROM json_each(?))",
            (_json_ints(files),),
        )
        if sid in listed and sid not in exclude
    }
    scored: list[tuple[float, int, Ranked]] = []
    for file, (sid, chunks) in facts.items():
        score = sum(_score(f, file, chunks, avg, n_chunks) for f in found)
        held = frozenset(n for f in found for n in f.files.get(file, ()))
        scored.append((score, file, Ranked(sid, score, held)))
    scored.sort(key=lambda r: (-r[0], -r[1]))  # equal scores: the later written first
    return [r for _s, _f, r in scored[:limit]]


def _score(f: Found, file: int, chunks: int, avg: float, n_chunks: int) -> float:
    ns = f.files.get(file)
    if not ns:
        return 0.0
    idf = math.log(1.0 + (n_chunks - f.chunks + 0.5) / (f.chunks + 0.5))
    tf = len(ns - {search_index.TITLE})
    body = tf * (K1 + 1) / (tf + K1 * (1 - B + B * max(chunks, 1) / avg)) if tf else 0.0
    return idf * (body + (TITLE_WEIGHT if search_index.TITLE in ns else 0.0))


def _json_ints(values: Collection[int]) -> str:
    return "[" + ",".join(str(int(v)) for v in values) + "]"
