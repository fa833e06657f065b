from __future__ import annotations

import fcntl
import json
import multiprocessing
import os
import random
import signal
import stat
import threading
import time
from collections.abc import Callable
from pathlib import Path

import pytest

from countbot_cli import fileio
from countbot_cli.config.derived import lock_file
from countbot_cli.conversation.sessions.listing import INDEX_NAME, index_file
from countbot_cli.conversation.sessions.session import SCHEMA_VERSION, Session, new_session
from countbot_cli.conversation.sessions.store import SessionStore
from countbot_cli.errors import SessionLockedError, StorageError, UsageError
from countbot_cli.messages import Message


@pytest.fixture
def notices() -> list[str]:
    return []


@pytest.fixture
def root(tmp_path: Path) -> Path:
    return tmp_path / "sessions"


@pytest.fixture
def store(root: Path, notices: list[str]) -> SessionStore:
    return SessionStore(root, lock_timeout=2.0, on_notice=notices.append)


def make(store: SessionStore, title: str = "t", n: int = 2, sid: str | None = None) -> Session:
    s = new_session(provider="openai", model="gpt-4o-mini", title=title)
    if sid:
        s.id = sid
    s.messages = [
        Message(role="user" if i % 2 == 0 else "assistant", content=f"{title} {i}")
        for i in range(n)
    ]
    store.create(s)
    return s


def append(text: str) -> Callable[[Session], int]:
    def fn(s: Session) -> int:
        s.messages.append(Message(role="user", content=text))
        return len(s.messages)

    return fn


def leftovers(root: Path) -> list[str]:
    return sorted(p.name for p in root.iterdir() if p.name.endswith(".tmp"))


# ---- basics ----


def test_create_and_load_round_trip(store: SessionStore) -> None:
    s = make(store, "hello", n=3)
    assert store.load(s.id) == s
    assert store.path(s.id).is_file()


def test_files_are_private(store: SessionStore, root: Path) -> None:
    s = make(store)
    store.update(s.id, append("x"))
    assert stat.S_IMODE(root.stat().st_mode) == 0o700
    assert [p.name for p in root.iterdir()] == [f"{s.id}.json"]  # nothing derived beside it
    index = index_file(root)
    for path in (
        store.path(s.id),
        lock_file(store.path(s.id)),
        index,
        index.parent / "index.json.lock",
    ):
        assert stat.S_IMODE(path.stat().st_mode) == 0o600, path


def test_an_existing_loose_folder_is_made_private(tmp_path: Path) -> None:
    root = tmp_path / "sessions"
    root.mkdir(mode=0o755)
    os.chmod(root, 0o755)
    make(SessionStore(root))
    assert stat.S_IMODE(root.stat().st_mode) == 0o700


def test_create_refuses_to_overwrite(store: SessionStore) -> None:
    s = make(store, "first")
    s.title = "second"
    with pytest.raises(StorageError, match="already exists"):
        store.create(s)
    assert store.load(s.id).title == "first"


def test_reading_does_not_create_the_folder(store: SessionStore, root: Path) -> None:
    assert store.list() == []
    with pytest.raises(UsageError):
        store.resolve("latest")
    with pytest.raises(UsageError):
        store.load("abc")
    assert not root.exists()


def test_update_returns_fn_result_and_touches(store: SessionStore) -> None:
    s = make(store)
    old = store.load(s.id)
    old_updated = "2000-01-01T00:00:00Z"
    store.update(s.id, lambda x: setattr(x, "updated_at", old_updated), touch=False)
    assert store.load(s.id).updated_at == old_updated
    assert store.update(s.id, append("more")) == 3
    loaded = store.load(s.id)
    assert loaded.updated_at > old_updated
    assert [m.content for m in loaded.messages] == [m.content for m in old.messages] + ["more"]


def test_rename_and_summary_do_not_touch(store: SessionStore) -> None:
    s = make(store)
    store.update(s.id, lambda x: setattr(x, "updated_at", "2000-01-01T00:00:00Z"), touch=False)
    store.rename(s.id, "  New\n title ")
    store.set_summary(s.id, "  facts  ")
    loaded = store.load(s.id)
    assert (loaded.title, loaded.summary, loaded.updated_at) == (
        "New title",
        "facts",
        "2000-01-01T00:00:00Z",
    )
    store.set_summary(s.id, "")
    assert store.load(s.id).summary == ""
    with pytest.raises(UsageError, match="empty"):
        store.rename(s.id, " \n ")


def test_fn_that_raises_writes_nothing(store: SessionStore) -> None:
    s = make(store)
    before = store.path(s.id).read_bytes()

    def boom(x: Session) -> None:
        x.messages.clear()
        raise RuntimeError("boom")

    with pytest.raises(RuntimeError):
        store.update(s.id, boom)
    assert store.path(s.id).read_bytes() == before
    assert len(store.load(s.id).messages) == 2
    store.update(s.id, append("after"))  # the store is still consistent afterwards
    assert len(store.load(s.id).messages) == 3


def test_fn_must_not_change_the_id(store: SessionStore) -> None:
    s = make(store)
    with pytest.raises(ValueError, match="id"):
        store.update(s.id, lambda x: setattr(x, "id", "other"))


def test_load_returns_objects_the_store_does_not_keep(store: SessionStore) -> None:
    s = make(store)
    loaded = store.load(s.id)
    loaded.messages.append(Message(role="user", content="not saved"))
    loaded.messages[0].content = "changed in memory only"
    store.update(s.id, append("saved"))
    contents = [m.content for m in store.load(s.id).messages]
    assert contents == ["t 0", "t 1", "saved"]


def test_saved_bytes_are_the_session_as_json(store: SessionStore) -> None:
    s = make(store, n=700)  # several encoding chunks
    for i in range(3):
        store.update(s.id, append(f"turn {i} ✓ \u2028 \x00"))
    store.update(s.id, lambda x: setattr(x.messages[5], "status", "failed"))  # an early chunk
    on_disk = json.loads(store.path(s.id).read_bytes())
    fresh = SessionStore(store.root).load(s.id)
    assert on_disk == fresh.to_dict()
    assert fresh.messages[5].status == "failed"
    assert fresh.messages[-1].content == "turn 2 ✓ \u2028 \x00"


def test_update_sees_changes_made_by_another_store(store: SessionStore, root: Path) -> None:
    s = make(store)
    store.update(s.id, append("mine 1"))  # this store now remembers the file
    SessionStore(root).update(s.id, append("theirs"))
    store.update(s.id, append("mine 2"))
    assert [m.content for m in store.load(s.id).messages][-3:] == ["mine 1", "theirs", "mine 2"]


# ---- atomic writes ----


def test_no_temp_files_are_left(store: SessionStore, root: Path) -> None:
    s = make(store)
    for i in range(20):
        store.update(s.id, append(str(i)))
    store.list()
    assert leftovers(root) == []


def test_a_failed_replace_keeps_the_old_file(
    store: SessionStore, root: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    s = make(store)
    before = store.path(s.id).read_bytes()

    def fail(src: object, dst: object) -> None:
        raise OSError(28, "No space left on device")

    monkeypatch.setattr(fileio.os, "replace", fail)
    with pytest.raises(StorageError, match="No space left"):
        store.update(s.id, append("lost?"))
    monkeypatch.undo()
    assert store.path(s.id).read_bytes() == before
    assert leftovers(root) == []
    store.update(s.id, append("next"))
    assert [m.content for m in store.load(s.id).messages][-1] == "next"


def test_old_temp_files_are_cleaned_and_never_listed(store: SessionStore, root: Path) -> None:
    s = make(store)
    old = root / f".{s.id}.json.dead0001.tmp"
    new = root / f".{s.id}.json.live0002.tmp"
    for p in (old, new):
        p.write_text('{"partial')
    hours_ago = time.time() - 7200
    os.utime(old, (hours_ago, hours_ago))
    assert [h["id"] for h in store.list()] == [s.id]
    assert not old.exists() and new.exists()


# ---- resolve, list, delete ----


def test_resolve(store: SessionStore) -> None:
    a = make(store, "a", sid="abc123000001")
    b = make(store, "b", sid="abc124000002")
    make(store, "c", sid="ffe000000003")
    assert store.resolve("abc123000001") == a.id
    assert store.resolve("abc123") == a.id
    assert store.resolve(" ABC124 ") == b.id
    assert store.resolve("ff") == "ffe000000003"
    store.update(a.id, append("newest"))
    assert store.resolve("latest") == a.id
    with pytest.raises(UsageError, match="matches 2 sessions") as info:
        store.resolve("abc")
    assert "abc123000001 (a)" in str(info.value) and "abc124000002 (b)" in str(info.value)
    with pytest.raises(UsageError, match="no session matches 'zzz'") as info2:
        store.resolve("zzz")
    assert info2.value.hint and "sessions list" in info2.value.hint
    for bad in ("", "../etc/passwd", "a/b", "index"):
        with pytest.raises(UsageError):
            store.resolve(bad)


def test_an_exact_id_wins_over_longer_ids(store: SessionStore) -> None:
    make(store, sid="abc")
    make(store, sid="abcd")
    assert store.resolve("abc") == "abc"


def test_list_is_newest_first_with_headers(store: SessionStore) -> None:
    a = make(store, "first", n=4)
    b = make(store, "second", n=1)
    store.update(a.id, lambda s: s.archived.append(Message(role="user", content="old")))
    heads = store.list()
    assert [h["id"] for h in heads] == [a.id, b.id]
    assert heads[0] == {**store.load(a.id).header(), "message_count": 5}
    assert set(heads[1]) == {
        "id",
        "title",
        "created_at",
        "updated_at",
        "provider",
        "model",
        "message_count",
        "gist",
    }


def test_delete(store: SessionStore, root: Path) -> None:
    a = make(store, "a")
    b = make(store, "b")
    keep = root / f"{a.id}.json.corrupt-20260101T000000Z"
    keep.write_text("old damage")
    store.delete(a.id)
    assert [h["id"] for h in store.list()] == [b.id]
    assert not lock_file(store.path(a.id)).exists()
    assert keep.read_text() == "old damage"
    with pytest.raises(UsageError):
        store.resolve(a.id)
    with pytest.raises(UsageError):
        store.delete(a.id)
    with pytest.raises(StorageError, match="no longer exists"):
        store.update(a.id, append("x"))


# ---- locking ----


def _append_worker(root: str, sid: str, tag: str, count: int, go: object) -> None:
    go.wait()  # type: ignore[attr-defined]
    store = SessionStore(Path(root), lock_timeout=30)
    for i in range(count):
        store.update(sid, append(f"{tag}:{i}"))


def test_processes_appending_concurrently_lose_nothing(store: SessionStore, root: Path) -> None:
    s = make(store, n=0)
    ctx = multiprocessing.get_context("fork")
    go = ctx.Event()
    procs = [
        ctx.Process(target=_append_worker, args=(str(root), s.id, f"p{n}", 20, go))
        for n in range(4)
    ]
    for p in procs:
        p.start()
    go.set()
    for p in procs:
        p.join(60)
        assert p.exitcode == 0
    contents = [m.content for m in store.load(s.id).messages]
    assert len(contents) == 80
    for n in range(4):
        mine = [c for c in contents if c.startswith(f"p{n}:")]
        assert mine == [f"p{n}:{i}" for i in range(20)]
    assert store.list()[0]["message_count"] == 80


def test_a_held_lock_times_out_with_a_clear_error(store: SessionStore, root: Path) -> None:
    s = make(store)
    store.lock_timeout = 0.3
    fd = os.open(lock_file(store.path(s.id)), os.O_RDWR)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX)
        with pytest.raises(SessionLockedError, match="busy in another countbot process") as err:
            store.update(s.id, append("x"))
        assert err.value.hint == f"waited 0.3 s for {s.id}.json.lock"  # then gave up
    finally:
        os.close(fd)
    store.update(s.id, append("x"))
    assert len(store.load(s.id).messages) == 3


def test_a_writer_waits_for_a_short_lock(store: SessionStore, root: Path) -> None:
    s = make(store)
    fd = os.open(lock_file(store.path(s.id)), os.O_RDWR)
    fcntl.flock(fd, fcntl.LOCK_EX)
    threading.Timer(0.2, os.close, args=(fd,)).start()
    store.update(s.id, append("after wait"))
    assert store.load(s.id).messages[-1].content == "after wait"


# ---- damaged files ----


def corrupt_files(root: Path, sid: str) -> list[Path]:
    return sorted(root.glob(f"{sid}.json.corrupt-*"))


def test_a_damaged_file_is_quarantined_by_list(
    store: SessionStore, root: Path, notices: list[str]
) -> None:
    good = make(store, "good")
    bad = make(store, "bad")
    store.path(bad.id).write_bytes(b'{"id": "x", "messages": [')
    assert [h["id"] for h in store.list()] == [good.id]
    moved = corrupt_files(root, bad.id)
    assert len(moved) == 1 and moved[0].read_bytes() == b'{"id": "x", "messages": ['
    assert len(notices) == 1 and str(moved[0]) in notices[0] and bad.id in notices[0]
    assert [h["id"] for h in store.list()] == [good.id]
    assert len(notices) == 1
    assert store.load(good.id).title == "good"


def test_load_of_a_damaged_file_raises_naming_both_paths(store: SessionStore, root: Path) -> None:
    s = make(store)
    path = store.path(s.id)
    path.write_bytes(b"\xff\xfe not json")
    with pytest.raises(StorageError) as info:
        store.load(s.id)
    moved = corrupt_files(root, s.id)
    assert len(moved) == 1
    assert str(path) in str(info.value) and str(moved[0]) in str(info.value)
    with pytest.raises(UsageError):
        store.resolve(s.id)


@pytest.mark.parametrize(
    "content",
    [
        b"[1, 2]",
        b'{"id": "x", "messages": [{"role": "wizard"}]}',
        b'{"id": "x", "messages": 5}',
        b"[" * 100_000,
        b"",
    ],
)
def test_bad_shapes_are_quarantined_too(store: SessionStore, root: Path, content: bytes) -> None:
    s = make(store)
    store.path(s.id).write_bytes(content)
    with pytest.raises(StorageError, match="damaged"):
        store.load(s.id)
    assert corrupt_files(root, s.id)[0].read_bytes() == content


def test_update_of_a_damaged_file_quarantines_without_calling_fn(
    store: SessionStore, root: Path
) -> None:
    s = make(store)
    store.path(s.id).write_text("garbage")
    called = []
    with pytest.raises(StorageError, match="damaged"):
        store.update(s.id, lambda x: called.append(x))
    assert called == [] and len(corrupt_files(root, s.id)) == 1


def test_quarantine_never_overwrites(store: SessionStore, root: Path) -> None:
    s = make(store)
    for n in range(3):
        store.path(s.id).write_text(f"damage {n}")
        with pytest.raises(StorageError):
            store.load(s.id)
    moved = corrupt_files(root, s.id)
    assert sorted(p.read_text() for p in moved) == ["damage 0", "damage 1", "damage 2"]


def test_a_newer_schema_is_not_quarantined(
    store: SessionStore, root: Path, notices: list[str]
) -> None:
    s = make(store)
    other = make(store, "other")
    d = s.to_dict()
    d["schema_version"] = SCHEMA_VERSION + 1
    store.path(s.id).write_text(json.dumps(d))
    with pytest.raises(StorageError, match="newer countbot") as info:
        store.load(s.id)
    assert info.value.hint and "upgrade" in info.value.hint
    assert [h["id"] for h in store.list()] == [other.id]
    assert "newer countbot" in notices[0]
    assert corrupt_files(root, s.id) == [] and store.path(s.id).exists()


# ---- the index ----


def test_list_uses_the_index_without_reading_unchanged_files(store: SessionStore) -> None:
    s = make(store, "indexed title")
    store.list()
    path = store.path(s.id)
    st = path.stat()
    data = path.read_bytes()
    with open(path, "r+b") as f:  # same inode, same size, same mtime: only the index knows
        f.write(data.replace(b"indexed title", b"changed title"))
    os.utime(path, ns=(st.st_atime_ns, st.st_mtime_ns))
    assert store.list()[0]["title"] == "indexed title"


def test_index_is_rebuilt_when_deleted_or_damaged(store: SessionStore, root: Path) -> None:
    made = {make(store, f"s{i}").id for i in range(5)}
    for damage in (None, b"garbage", b'{"version": 99, "sessions": {}}', b'{"version": 1}'):
        if damage is None:
            index_file(root).unlink()
        else:
            index_file(root).write_bytes(damage)
        assert {h["id"] for h in SessionStore(root).list()} == made
        index = json.loads(index_file(root).read_bytes())
        assert set(index["sessions"]) == made


def test_bad_index_rows_are_ignored(store: SessionStore, root: Path) -> None:
    s = make(store, "real")
    store.list()
    index = json.loads(index_file(root).read_bytes())
    index["sessions"][s.id] = ["bad row"]
    index["sessions"]["../evil"] = [1, 2, 3, "evil", "c", "u", "p", "m", 1]
    index_file(root).write_text(json.dumps(index))
    assert [(h["id"], h["title"]) for h in SessionStore(root).list()] == [(s.id, "real")]


def test_stale_index_entries_are_refreshed(store: SessionStore, root: Path) -> None:
    a = make(store, "a", n=2)
    b = make(store, "b")
    store.list()
    d = store.load(a.id).to_dict()
    d["title"] = "edited elsewhere"
    d["messages"] = d["messages"][:1]
    store.path(a.id).write_text(json.dumps(d))  # in place, behind the store's back
    store.path(b.id).unlink()
    c = new_session(provider="p", model="m", title="dropped in")
    (root / f"{c.id}.json").write_text(json.dumps(c.to_dict()))
    heads = {h["id"]: h for h in store.list()}
    assert set(heads) == {a.id, c.id}
    assert (heads[a.id]["title"], heads[a.id]["message_count"]) == ("edited elsewhere", 1)
    index = json.loads(index_file(root).read_bytes())["sessions"]
    assert set(index) == {a.id, c.id} and index[a.id][3] == "edited elsewhere"


def test_a_busy_index_does_not_block_saves(store: SessionStore, root: Path) -> None:
    s = make(store)
    fd = os.open(index_file(root).with_name(INDEX_NAME + ".lock"), os.O_RDWR)
    fcntl.flock(fd, fcntl.LOCK_EX)
    try:
        store.lock_timeout = 0.2
        store.update(s.id, append("saved anyway"))
    finally:
        os.close(fd)
    assert store.list()[0]["message_count"] == 3


def test_listing_many_sessions_reads_only_what_changed(
    store: SessionStore, monkeypatch: pytest.MonkeyPatch
) -> None:
    ids = [make(store, f"s{i}", n=1).id for i in range(300)]
    assert len(store.list()) == 300
    reads: list[str] = []
    real = fileio.read_keyed

    def counting(path: Path) -> tuple[bytes, fileio.Key]:
        reads.append(path.name)
        return real(path)

    monkeypatch.setattr(fileio, "read_keyed", counting)
    fresh = SessionStore(store.root)
    assert len(fresh.list()) == 300 and reads == []
    store.update(ids[7], append("changed"))
    SessionStore(store.root).path(ids[9]).write_text(json.dumps(store.load(ids[9]).to_dict()))
    reads.clear()
    heads = {h["id"]: h for h in fresh.list()}
    assert heads[ids[7]]["message_count"] == 2 and reads == [f"{ids[9]}.json"]


# ---- killing a writer at random moments ----


def _kill_writer(root: Path, sid: str, start: int, wfd: int) -> None:
    store = SessionStore(root, lock_timeout=30)
    rnd = random.Random(os.getpid())
    i = start
    while True:
        text = f"m{i} " + "x" * rnd.randint(100, 6000)
        store.update(sid, lambda s, t=text, n=i: s.messages.append(Message("user", t, id=f"m{n}")))
        os.write(wfd, f"{i}\n".encode())
        i += 1


@pytest.mark.slow
@pytest.mark.skipif(not hasattr(os, "fork"), reason="needs fork")
def test_killing_a_writer_never_loses_a_finished_update(root: Path, notices: list[str]) -> None:
    store = SessionStore(root, on_notice=notices.append)
    s = new_session(provider="p", model="m", title="kill test")
    store.create(s)
    confirmed: list[int] = []
    nxt = 0
    rnd = random.Random(1234)
    for _round in range(220):
        rfd, wfd = os.pipe()
        pid = os.fork()
        if pid == 0:  # pragma: no cover - the child
            try:
                os.close(rfd)
                _kill_writer(root, s.id, nxt, wfd)
            finally:
                os._exit(0)
        os.close(wfd)
        time.sleep(rnd.uniform(0.0, 0.06))
        os.kill(pid, signal.SIGKILL)
        os.waitpid(pid, 0)
        with os.fdopen(rfd, "rb") as r:
            confirmed += [int(x) for x in r.read().split()]
        loaded = store.load(s.id)  # parses, or this raises
        numbers = [int(m.id[1:]) for m in loaded.messages]
        assert numbers == sorted(set(numbers)), "order kept, nothing twice"
        assert set(confirmed) <= set(numbers), "a confirmed update is missing"
        assert len(set(numbers) - set(confirmed)) <= 1
        confirmed = numbers  # at most one unconfirmed update finished before the kill
        nxt = (numbers[-1] + 1) if numbers else nxt
        assert store.list()[0]["message_count"] == len(numbers)
    assert nxt > 50 and notices == []
    assert [h["id"] for h in store.list()] == [s.id]
