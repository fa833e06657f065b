"""Sessions and memory in a folder a file-sync tool shares: countbot writes nothing derived
there (the search index, the listing cache, vectors, token and window caches, locks live in the
cache folder), moves what an older countbot left there, and catches up with files a sync
changed behind its back. Driven as a user runs it: `countbot` on a loopback server."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import textwrap
from pathlib import Path

import fakeserver as fs
import pytest
from cbenv import CB, QUIET_MEMORY, make_cb

from countbot_cli.config.own_files import RATIOS_FILE, SEARCH_INDEX_FILE
from countbot_cli.conversation.sessions import search_index
from countbot_cli.conversation.sessions.session import new_session


def ask(cb: CB, server: fs.FakeServer, *args: str, answer: str = "ok") -> str:
    """`countbot ask ARGS` answered with `answer`; returns the session id it saved to."""
    server.add(fs.text(answer))
    return cb.ask_saved(*args)


def search(cb: CB, words: str) -> tuple[set[str], str]:
    """The ids `sessions search` finds for `words`, and what it said on stderr."""
    proc = cb.invoke("sessions", "search", "--json", words)
    assert proc.returncode == 0, proc.stderr
    return {h["id"] for h in json.loads(proc.stdout)}, proc.stderr


def only_data(cb: CB) -> None:
    """The synced folders hold the user's data and nothing countbot derives from it."""
    assert {p.name for p in cb.work.iterdir()} <= {"MEMORY.md", "config.yaml", "sessions"}
    names = [p.name for p in cb.sessions_dir.iterdir()]
    assert names and all(n.endswith(".json") and n != "index.json" for n in names), names


@pytest.mark.slow
def test_nothing_derived_is_written_into_the_synced_folders(tmp_path: Path) -> None:
    with fs.FakeServer() as server:
        cb = make_cb(tmp_path, server.base_url, memory={"inject": "relevant", "auto_memory": False})
        assert cb.invoke("memory", "add", "plays the cello on Tuesdays").returncode == 0
        sid = ask(cb, server, "which instrument do I play?", answer="The cello.")
        assert "cello" in server.chat_bodies()[-1]["messages"][-1]["content"]  # recalled
        ask(cb, server, "-s", sid, "and on which day?", answer="Tuesdays.")
        assert search(cb, "instrument")[0] == {sid}
        assert cb.invoke("sessions", "list").returncode == 0
        only_data(cb)
    derived = {p.name for p in cb.derived(cb.sessions_dir, "x").parent.iterdir()}
    assert {SEARCH_INDEX_FILE, "index.json", f"{sid}.json.lock"} <= derived
    assert {p.name for p in cb.derived(cb.work, "x").parent.iterdir()} >= {
        "MEMORY.vectors.bin",
        "MEMORY.md.lock",
    }


def test_what_an_older_countbot_left_in_the_folders_is_moved_not_lost(tmp_path: Path) -> None:
    with fs.FakeServer() as server:
        cb = make_cb(tmp_path, server.base_url, **QUIET_MEMORY)
        sid = ask(cb, server, "where do the quokkas live?", answer="On Rottnest Island.")
        index = search_index.index_path(cb.sessions_dir)  # this process: the run's cache
        assert index == cb.derived(cb.sessions_dir, SEARCH_INDEX_FILE)
        assert search(cb, "quokkas")[0] == {sid}
        # as an older countbot kept them: the index beside the sessions, caches beside the data
        for name in (SEARCH_INDEX_FILE, "index.json"):
            shutil.move(cb.derived(cb.sessions_dir, name), cb.sessions_dir / name)
        ratios = {"test-model": 1.37}
        (cb.work / RATIOS_FILE).write_text(json.dumps(ratios), encoding="utf-8")
        (cb.sessions_dir / f"{sid}.json.lock").write_text("")
        # a new process (each looks once for what an older countbot left)
        proc = cb.run("sessions", "search", "--json", "Rottnest")
        assert [h["id"] for h in json.loads(proc.stdout)] == [sid]
        assert "building the search index" not in proc.stderr  # moved, not built again
        server.add(fs.text("ok"))
        assert cb.run("ask", "-s", sid, "thanks").returncode == 0
        only_data(cb)
    assert json.loads(cb.derived(cb.work, RATIOS_FILE).read_text()) == ratios  # kept
    assert cb.derived(cb.sessions_dir, SEARCH_INDEX_FILE).is_file()


def test_the_index_catches_up_with_sessions_a_sync_changed(tmp_path: Path) -> None:
    """Another machine's sessions arrive, one file is replaced by its longer version, one is
    deleted there: the next search reads just those, finds what they say now, and writes
    nothing into the folder."""
    with fs.FakeServer() as server:
        here = make_cb(tmp_path / "here", server.base_url, **QUIET_MEMORY)
        there = make_cb(tmp_path / "there", server.base_url, **QUIET_MEMORY)
        kept = ask(here, server, "the wombat digs a burrow")
        gone = ask(here, server, "the wombat eats grass")
        grown = ask(here, server, "the wombat sleeps by day")
        assert search(here, "wombat")[0] == {kept, gone, grown}
        arrived = ask(there, server, "the wombat visits from afar")
        shutil.copy2(here.sessions_dir / f"{grown}.json", there.sessions_dir)
        ask(there, server, "-s", grown, "it dreams of eucalyptus")
        # the sync: new and changed files copied in (a new inode each), a deletion carried out
        for sid in (arrived, grown):
            shutil.copy2(there.sessions_dir / f"{sid}.json", here.sessions_dir / f".{sid}.part")
            os.replace(here.sessions_dir / f".{sid}.part", here.sessions_dir / f"{sid}.json")
        (here.sessions_dir / f"{gone}.json").unlink()
        assert search(here, "wombat")[0] == {kept, grown, arrived}
        assert search(here, "eucalyptus")[0] == {grown}
        listed = json.loads(here.invoke("sessions", "list", "--json").stdout)
        assert {s["id"]: s["message_count"] for s in listed}[grown] == 4
        only_data(here)


LOCK_HOLDER = textwrap.dedent(
    """
    import fcntl, sys, time
    files = [open(p, "a+") for p in sys.argv[1:]]
    for f in files:
        fcntl.flock(f, fcntl.LOCK_EX)
        f.write("laptop 4242\\n")
        f.flush()
    print("held", flush=True)
    sys.stdin.read()
    """
)


def test_a_lock_synced_from_another_machine_is_never_waited_on(tmp_path: Path) -> None:
    """Lock files beside the data (another machine's, or an older countbot's), even held,
    are not countbot's locks: a turn goes through at once and they are cleared away."""
    with fs.FakeServer() as server:
        cb = make_cb(tmp_path, server.base_url, **QUIET_MEMORY)
        sid = ask(cb, server, "first")
        locks = [cb.sessions_dir / f"{sid}.json.lock", cb.work / "MEMORY.md.lock"]
        holder = subprocess.Popen(
            [sys.executable, "-c", LOCK_HOLDER, *map(str, locks)],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            text=True,
        )
        try:
            assert holder.stdout is not None and holder.stdout.readline() == "held\n"
            server.add(fs.text("noted"), fs.text("User keeps bees"))
            proc = cb.run("ask", "-s", sid, "--remember", "I keep bees", timeout=30)
            assert proc.returncode == 0, proc.stderr
            assert "busy" not in proc.stderr
        finally:
            holder.communicate("", timeout=10)
        assert len(json.loads((cb.sessions_dir / f"{sid}.json").read_text())["messages"]) == 4
        assert "User keeps bees" in cb.memory_file.read_text(encoding="utf-8")
        assert not any(p.exists() for p in locks)


@pytest.mark.slow  # waits out the store's lock timeout (10 s)
def test_the_lock_names_its_holder(tmp_path: Path) -> None:
    """countbot's own lock (in the cache folder) is waited on, and a process that gives up
    says whose it is."""
    cb = make_cb(tmp_path, "http://127.0.0.1:9")
    s = new_session(provider="p", model="m", title="t")
    cb.sessions_dir.mkdir()
    (cb.sessions_dir / f"{s.id}.json").write_text(json.dumps(s.to_dict()))
    lock = cb.derived(cb.sessions_dir, f"{s.id}.json.lock")
    lock.parent.mkdir(parents=True, exist_ok=True)
    holder = subprocess.Popen(
        [sys.executable, "-c", LOCK_HOLDER, str(lock)],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        text=True,
    )
    try:
        assert holder.stdout is not None and holder.stdout.readline() == "held\n"
        proc = cb.run("sessions", "rename", s.id, "new title", timeout=60)
    finally:
        holder.communicate("", timeout=10)
    assert proc.returncode == 1
    assert f"session {s.id} is busy in another countbot process (pid 4242 on laptop)" in (
        proc.stderr
    )


def test_a_cache_folder_that_cannot_be_written_keeps_them_in_the_data_folder(
    tmp_path: Path,
) -> None:
    """No cache folder to write (here a file stands where it would be made): saves, locks,
    search and the token ratios work as before, beside the data."""
    blocked = tmp_path / "not-a-folder"
    blocked.write_text("")
    with fs.FakeServer() as server:
        cb = make_cb(tmp_path, server.base_url, **QUIET_MEMORY)
        cb.env["XDG_CACHE_HOME"] = str(blocked)
        server.add(fs.text("ok"), fs.text("ok"))
        assert cb.run("ask", "the numbat eats termites").returncode == 0
        assert cb.run("ask", "-c", "and ants").returncode == 0
        proc = cb.run("sessions", "search", "--json", "numbat")
        assert proc.returncode == 0, proc.stderr
        assert len(json.loads(proc.stdout)) == 1
    names = {p.name for p in cb.sessions_dir.iterdir()}
    assert {SEARCH_INDEX_FILE, "index.json"} <= names


def test_config_show_says_which_folders_to_sync_and_which_are_this_machines(
    tmp_path: Path,
) -> None:
    with fs.FakeServer() as server:
        cb = make_cb(tmp_path, server.base_url, **QUIET_MEMORY)
        sid = ask(cb, server, "the echidna lays eggs")
        assert search(cb, "echidna")[0] == {sid}
    proc = cb.invoke("config", "show")
    assert proc.returncode == 0, proc.stderr
    rows = [line[2:] for line in proc.stdout.splitlines() if line.startswith("# ")]
    sync = rows.index(f"sync:       {cb.sessions_dir} (sessions; conflict copies are merged)")
    assert rows[sync + 1].startswith(f"            {cb.memory_file} (memory")
    local = rows[sync + 2]
    assert local.startswith("local:") and "search index" in local
    index = Path(local.split()[1]) / SEARCH_INDEX_FILE
    assert index.is_file() and index == cb.derived(cb.sessions_dir, SEARCH_INDEX_FILE)
