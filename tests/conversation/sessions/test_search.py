"""Session search (conversation/sessions/search.py): the index follows the folder whatever changes it."""

from __future__ import annotations

import json
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest
from search_reads import reindexed

from countbot_cli.conversation.sessions import search_index, search_rank, search_saves
from countbot_cli.conversation.sessions.search import SCHEMA_VERSION, SessionSearch
from countbot_cli.conversation.sessions.session import Session, new_session
from countbot_cli.conversation.sessions.store import SessionStore
from countbot_cli.messages import Message

WRITER = textwrap.dedent(
    """
    import sys
    from countbot_cli.conversation.sessions.session import new_session
    from countbot_cli.conversation.sessions.store import SessionStore
    from countbot_cli.messages import Message
    root, tag, n = sys.argv[1], sys.argv[2], int(sys.argv[3])
    store = SessionStore(root)
    for k in range(n):
        s = new_session(provider="p", model="m", title=f"{tag} number {k}")
        s.id = f"{tag}{k:03d}"
        s.messages = [
            Message(role="user", content=f"shared pelican question {tag} item{tag}{k}"),
            Message(role="assistant", content="an answer"),
        ]
        store.create(s)
        store.update(s.id, lambda x: x.messages.append(Message(role="user", content=f"more {tag}")))
    """
)


def make(store: SessionStore, title: str, *texts: str, sid: str | None = None) -> Session:
    s = new_session(provider="p", model="m", title=title)
    if sid:
        s.id = sid
    roles = ("user", "assistant")
    s.messages = [Message(role=roles[i % 2], content=t) for i, t in enumerate(texts)]
    store.create(s)
    return s


def ids(search: SessionSearch, *words: str, limit: int = 100) -> set[str]:
    return {h.id for h in search.search(list(words), limit=limit).hits}


def test_two_writing_processes_then_rename_delete_quarantine(tmp_path: Path) -> None:
    root = tmp_path / "sessions"
    notes: list[str] = []
    store = SessionStore(root, on_notice=notes.append)
    search = SessionSearch(store)
    procs = [
        subprocess.Popen([sys.executable, "-c", WRITER, str(root), tag, "15"])
        for tag in ("alpha", "bravo")
    ]
    while any(p.poll() is None for p in procs):  # search while both processes write
        search.search("pelican", limit=100)
    assert [p.returncode for p in procs] == [0, 0]
    found = ids(search, "pelican")
    assert found == {f"{t}{k:03d}" for t in ("alpha", "bravo") for k in range(15)}
    assert ids(search, "itembravo7") == {"bravo007"}
    assert ids(search, "more", "alpha") == {f"alpha{k:03d}" for k in range(15)}

    store.rename("alpha003", "Platypus breeding notes")
    store.delete("bravo004")
    (root / "alpha005.json").write_bytes(b'{"schema_version": 1, "id": "alpha005", "messa')
    subprocess.run(  # another process appends to a session
        [
            sys.executable,
            "-c",
            "import sys;from countbot_cli.conversation.sessions.store import "
            "SessionStore;from countbot_cli.messages import Message;"
            "SessionStore(sys.argv[1]).update('bravo009',lambda s:s.messages.append("
            "Message(role='assistant',content='the wombat burrow')))",
            str(root),
        ],
        check=True,
    )
    found = ids(search, "pelican")
    assert "bravo004" not in found and "alpha005" not in found and len(found) == 28
    assert ids(search, "platypus") == {"alpha003"}
    assert ids(search, "wombat") == {"bravo009"}
    assert any("alpha005" in n and "damaged" in n for n in notes)
    assert list(root.glob("alpha005.json.corrupt-*"))
    assert search.search("pelican").hits[0].excerpts[0].content.startswith("shared pelican")


def test_cjk_and_mixed_language_queries(tmp_path: Path) -> None:
    store = SessionStore(tmp_path / "s")
    uni = make(store, "旅行", "我想去北京大学参观", "北京大学在海淀区")
    apart = make(store, "city", "北京的大学很多")
    redis = make(store, "db", "Redis配置怎么写？", "用 appendonly yes 持久化")
    japan = make(store, "日本", "東京のサーバーが落ちた", "再起動しました")
    english = make(store, "Deploy", "The deployment failed on the café server", "Retry it")
    search = SessionSearch(store)
    assert ids(search, "北京大学") == {uni.id}  # a phrase, not 北京 and 大学 anywhere
    assert ids(search, "北京") == {uni.id, apart.id}
    assert ids(search, "海淀") == {uni.id}
    assert ids(search, "配置") == {redis.id}
    assert ids(search, "redis", "配置") == {redis.id}
    assert ids(search, "Redis配置") == {redis.id}  # mixed scripts in one word
    assert ids(search, "サーバー") == {japan.id}
    assert ids(search, "東京", "再起動") == {japan.id}
    assert ids(search, "淀") == {uni.id}  # one character, last of its run
    assert ids(search, "deploy", "CAFE") == {english.id}  # prefix; case and accents folded
    assert ids(search, "server") == {english.id}
    assert ids(search, "北京", "deploy") == {uni.id, apart.id, english.id}  # some words
    results = search.search("北京 deploy")
    assert not results.every_word
    hit = search.search("海淀").hits[0]
    assert [e.content for e in hit.excerpts] == ["北京大学在海淀区"]


def test_archived_messages_and_titles_are_found_ranked(tmp_path: Path) -> None:
    store = SessionStore(tmp_path / "s")
    s = make(store, "kubernetes notes", "unrelated", "words")
    store.update(s.id, lambda x: x.archived.append(Message(role="user", content="old kubelet log")))
    other = make(store, "misc", "kubernetes came up once")
    make(store, "noise", "nothing about it")
    search = SessionSearch(store)
    hits = search.search("kubernetes").hits
    assert [h.id for h in hits] == [s.id, other.id]  # the title weighs more
    assert hits[0].score > hits[1].score
    arch = search.search("kubelet").hits[0]
    assert arch.id == s.id and arch.excerpts[0].archived
    assert ids(search, "kubernetes", limit=1) == {s.id}
    assert search.search("kubernetes", exclude={s.id}).hits[0].id == other.id


@pytest.mark.parametrize("damage", ["deleted", "garbage", "truncated", "foreign"])
def test_index_deleted_or_damaged_is_rebuilt_with_a_notice(tmp_path: Path, damage: str) -> None:
    root = tmp_path / "s"
    store = SessionStore(root)
    a = make(store, "one", "the quokka smiles")
    b = make(store, "two", "another quokka")
    SessionSearch(store).search("quokka")
    search_saves.release(root)  # as when the process that saved them has ended
    index = search_index.index_path(root)
    if damage == "deleted":
        for p in index.parent.glob(index.name + "*"):
            p.unlink()
    elif damage == "garbage":
        index.write_bytes(b"this is not a database at all" * 200)
    elif damage == "truncated":
        index.write_bytes(index.read_bytes()[:2000])
    else:
        import sqlite3

        for p in index.parent.glob(index.name + "-*"):
            p.unlink()
        index.unlink()
        con = sqlite3.connect(index)
        con.execute("CREATE TABLE meta(k TEXT PRIMARY KEY, v INTEGER)")
        con.execute("INSERT INTO meta VALUES('version', ?)", (SCHEMA_VERSION,))
        con.commit()
        con.close()
    notes: list[str] = []
    search = SessionSearch(store, on_notice=notes.append)
    assert ids(search, "quokka") == {a.id, b.id}
    assert len(notes) == 1, notes
    assert ("building the search index" if damage == "deleted" else "damaged") in notes[0]
    assert ids(search, "quokka") == {a.id, b.id} and len(notes) == 1  # once
    assert (index.stat().st_mode & 0o777) == 0o600


def test_only_files_changed_behind_the_stores_back_are_read(tmp_path: Path) -> None:
    store = SessionStore(tmp_path / "s")
    sessions = [make(store, f"t{k}", f"body {k} echidna") for k in range(5)]
    search = SessionSearch(store)
    assert reindexed(search) == 0  # every save put its session in the index
    store.update(sessions[2].id, lambda s: s.messages.append(Message(role="user", content="x")))
    assert reindexed(search) == 0
    copy = sessions[3].to_dict() | {"id": "copied1"}  # a file copied in, not saved by a store
    (tmp_path / "s" / "copied1.json").write_text(json.dumps(copy))
    assert reindexed(search) == 1
    assert reindexed(search) == 0
    assert ids(search, "echidna") == {s.id for s in sessions} | {"copied1"}


def test_every_word_across_chunks_and_beyond_the_candidate_bound(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(search_rank, "CANDIDATES", 4)
    store = SessionStore(tmp_path / "s")
    filler = [f"filler line {i}" for i in range(2 * search_index.CHUNK_MESSAGES)]
    old = make(store, "old", "the zebra crossing", *filler, "a common remark")
    newer = [make(store, f"new {k}", f"another common remark {k}") for k in range(10)]
    search = SessionSearch(store)
    results = search.search("zebra common")
    assert results.every_word and [h.id for h in results.hits] == [old.id]
    assert [e.content for e in results.hits[0].excerpts] == [
        "the zebra crossing",
        "a common remark",
    ]
    found = ids(search, "common")  # in 11 sessions: ranked among the 4 most recently written
    assert found == {s.id for s in newer[-4:]}
