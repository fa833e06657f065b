"""The session search index (conversation/sessions/search_index.py): put there by every save,
a cold build that reports progress, stops on Ctrl-C or a crash and goes on where it stopped."""

from __future__ import annotations

import json
import sqlite3
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest
from search_reads import reindexed

from countbot_cli.conversation.sessions import search_index
from countbot_cli.conversation.sessions.search import SessionSearch
from countbot_cli.conversation.sessions.session import new_session
from countbot_cli.conversation.sessions.store import SessionStore
from countbot_cli.messages import Message

N_SESSIONS = 40


def indexed_ids(root: Path, word: str) -> list[str]:
    """The sessions the index file itself says hold `word` (no SessionSearch, no refresh)."""
    con = sqlite3.connect(search_index.index_path(root))
    try:
        rows = con.execute(
            "SELECT DISTINCT f.sid FROM docs JOIN chunks c ON c.rowid = docs.rowid"
            " JOIN files f ON f.rowid = c.file WHERE docs MATCH ? ORDER BY f.sid",
            (f'"{word}"',),
        ).fetchall()
    finally:
        con.close()
    return [sid for (sid,) in rows]


def chunk_rowids(root: Path, sid: str) -> dict[int, int]:
    con = sqlite3.connect(search_index.index_path(root))
    try:
        rows = con.execute(
            "SELECT c.n, c.rowid FROM chunks c JOIN files f ON f.rowid = c.file WHERE f.sid = ?",
            (sid,),
        ).fetchall()
    finally:
        con.close()
    return dict(rows)


def test_a_save_puts_the_session_in_the_index_without_a_search(tmp_path: Path) -> None:
    root = tmp_path / "s"
    store = SessionStore(root)
    s = new_session(provider="p", model="m", title="Garden")
    s.messages = [Message(role="user", content="where do wombats sleep?")]
    store.create(s)
    assert indexed_ids(root, "wombats") == [s.id]
    store.update(s.id, lambda x: x.messages.append(Message(role="assistant", content="burrows")))
    assert indexed_ids(root, "burrows") == [s.id]
    store.rename(s.id, "Marsupials")
    assert indexed_ids(root, "marsupials") == [s.id] and indexed_ids(root, "garden") == []
    search = SessionSearch(store)
    assert reindexed(search) == 0  # the search had nothing to read
    assert [h.id for h in search.search("burrows").hits] == [s.id]
    store.delete(s.id)
    assert indexed_ids(root, "wombats") == []


def test_a_new_turn_replaces_only_the_last_chunk(tmp_path: Path) -> None:
    root = tmp_path / "s"
    store = SessionStore(root)
    s = new_session(provider="p", model="m", title="Long")
    s.messages = [
        Message(role=("user", "assistant")[i % 2], content=f"message {i} about lemurs")
        for i in range(3 * search_index.CHUNK_MESSAGES + 5)
    ]
    store.create(s)
    before = chunk_rowids(root, s.id)
    assert sorted(before) == [search_index.TITLE, 0, 1, 2, 3]
    store.update(s.id, lambda x: x.messages.append(Message(role="user", content="and tapirs")))
    after = chunk_rowids(root, s.id)
    assert [n for n in before if before[n] != after[n]] == [3]  # title, 0, 1, 2 untouched
    assert indexed_ids(root, "tapirs") == [s.id]


def write_sessions(root: Path, n: int) -> list[str]:
    """`n` session files written as another program would (no store, so not indexed)."""
    root.mkdir(parents=True)
    made = []
    for k in range(n):
        s = new_session(provider="p", model="m", title=f"chat {k}")
        s.id = f"s{k:03d}"
        s.messages = [
            Message(role="user", content=f"shared okapi question token{k:03d}"),
            Message(role="assistant", content="an answer"),
        ]
        (root / f"{s.id}.json").write_text(json.dumps(s.to_dict()))
        made.append(s.id)
    return made


def every_session_once(root: Path, made: list[str]) -> None:
    """Each session is found by its own word, alone, and the common word finds each once."""
    search = SessionSearch(SessionStore(root))
    hits = search.search("okapi", limit=10 * len(made)).hits
    assert sorted(h.id for h in hits) == made  # none missing, none twice
    for k, sid in enumerate(made):
        assert [h.id for h in search.search(f"token{k:03d}").hits] == [sid]
    con = sqlite3.connect(search_index.index_path(root))
    try:
        con.execute("INSERT INTO docs(docs) VALUES('integrity-check')")
        n_files, n_ids = con.execute("SELECT count(*), count(DISTINCT sid) FROM files").fetchone()
    finally:
        con.close()
    assert n_files == n_ids == len(made)


KILLER = textwrap.dedent(
    """
    import os, signal, sys
    from countbot_cli.conversation.sessions import search_index
    from countbot_cli.conversation.sessions.search import SessionSearch
    from countbot_cli.conversation.sessions.store import SessionStore
    search_index.BATCH = 8
    real_put, count = search_index.put, [0]
    def put(*args, **kwargs):
        count[0] += 1
        if count[0] == int(sys.argv[2]):
            os.kill(os.getpid(), signal.SIGKILL)  # mid-transaction, as a crash or `kill -9`
        return real_put(*args, **kwargs)
    search_index.put = put
    SessionSearch(SessionStore(sys.argv[1])).search('anything')
    """
)


def test_a_build_killed_midway_goes_on_where_it_stopped(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    root = tmp_path / "s"
    made = write_sessions(root, N_SESSIONS)
    killed = subprocess.run([sys.executable, "-c", KILLER, str(root), "21"], check=False)
    assert killed.returncode == -9  # killed in its third batch: two batches of 8 committed
    monkeypatch.setattr(search_index, "BATCH", 8)
    notes: list[str] = []
    search = SessionSearch(SessionStore(root), on_notice=notes.append)
    assert reindexed(search) == N_SESSIONS - 16  # only the sessions not yet indexed are read
    assert notes == []  # fewer than LOUD_BUILD sessions to read, not a fresh build: quiet
    every_session_once(root, made)


def test_a_big_build_reports_progress_and_ctrl_c_leaves_it_resumable(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    root = tmp_path / "s"
    made = write_sessions(root, N_SESSIONS)
    monkeypatch.setattr(search_index, "BATCH", 4)
    monkeypatch.setattr(search_index, "LOUD_BUILD", 20)
    notes: list[str] = []

    def notice(line: str) -> None:
        notes.append(line)
        if line.startswith("indexed 12 of"):
            raise KeyboardInterrupt  # the user presses Ctrl-C while the build reports

    with pytest.raises(KeyboardInterrupt):
        SessionSearch(SessionStore(root), on_notice=notice).search("okapi")
    assert notes == [
        f"building the search index of {N_SESSIONS} sessions (once; Ctrl-C stops, the next"
        " search goes on)",
        f"indexed 4 of {N_SESSIONS} sessions",
        f"indexed 8 of {N_SESSIONS} sessions",
        f"indexed 12 of {N_SESSIONS} sessions",
        f"stopped after 12 of {N_SESSIONS} sessions",
    ]
    notes.clear()
    assert reindexed(SessionSearch(SessionStore(root), on_notice=notes.append)) == N_SESSIONS - 12
    assert (
        notes[0]
        == f"updating the search index: {N_SESSIONS - 12} sessions (once; Ctrl-C stops, the next search goes on)"
    )
    every_session_once(root, made)


def test_text_indexed_under_other_rules_is_rebuilt(tmp_path: Path) -> None:
    root = tmp_path / "s"
    store = SessionStore(root)
    s = new_session(provider="p", model="m", title="Rules")
    s.messages = [Message(role="user", content="the numbat eats termites")]
    store.create(s)
    con = sqlite3.connect(search_index.index_path(root))
    con.execute("UPDATE chunks SET crc = crc + 1")  # as if search_text's rules had changed
    con.commit()
    con.close()
    data = json.loads(store.path(s.id).read_text())  # changed by another program: re-indexed
    data["messages"][0]["content"] = "the numbat eats ants"
    store.path(s.id).write_text(json.dumps(data))
    notes: list[str] = []
    hits = SessionSearch(store, on_notice=notes.append).search("numbat").hits
    assert [h.excerpts[0].content for h in hits] == ["the numbat eats ants"]
    assert len(notes) == 1 and "made by other rules; rebuilding it" in notes[0]
    assert indexed_ids(root, "termites") == []


def test_an_older_index_is_replaced_and_its_space_given_back(tmp_path: Path) -> None:
    root = tmp_path / "s"
    made = write_sessions(root, 3)
    con = sqlite3.connect(search_index.index_path(root))  # schema 3 kept the text: big
    con.execute("CREATE TABLE meta(k TEXT PRIMARY KEY, v INTEGER)")
    con.execute("INSERT INTO meta VALUES('version', 3)")
    con.execute("CREATE VIRTUAL TABLE docs USING fts5(title, body)")
    con.executemany("INSERT INTO docs VALUES(?, ?)", [("t", f"word{i} " * 400) for i in range(500)])
    con.commit()
    con.close()
    big = (search_index.index_path(root)).stat().st_size
    assert reindexed(SessionSearch(SessionStore(root))) == 3
    assert (search_index.index_path(root)).stat().st_size < big / 10
    every_session_once(root, made)


def test_a_saves_cut_reusing_the_last_one_equals_a_fresh_cut() -> None:
    s = new_session(provider="p", model="m", title="Cut")
    sizes = [10, 7000, 40, 9000, 3, 16_500, 20] * 12  # runs end by count and by characters
    s.messages = [
        Message(role=("user", "assistant")[i % 2], content="x" * n) for i, n in enumerate(sizes)
    ]
    known = search_index.chunks_of(s)

    def same_as_fresh() -> None:
        nonlocal known
        again = search_index.chunks_of(s, known)
        assert [(c.n, c.hash) for c in again] == [(c.n, c.hash) for c in search_index.chunks_of(s)]
        known = again

    s.messages.append(Message(role="user", content="one more"))  # the last run grows
    same_as_fresh()
    s.messages.extend(Message(role="user", content="y" * 600) for _ in range(40))  # new runs
    same_as_fresh()
    s.messages[5].content = "edited in the middle"  # every later cut may move
    same_as_fresh()
    s.archived, s.messages = s.messages[:30], s.messages[30:]  # archived: same order, new flags
    same_as_fresh()
    del s.messages[-3:]  # /undo, /retry
    same_as_fresh()
