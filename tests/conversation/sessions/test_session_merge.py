"""A session continued on two machines while apart: the conflict copy a sync tool made of its
file (each tool's name for it) or git's conflict marks in it are merged message by message,
nothing lost, nothing twice, each turn whole; histories that cannot be put in one order are kept
as a fork; the copy is moved aside with one line. Driven as the user meets it: `countbot`."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import fakeserver as fs
import pytest
from cbenv import CB, QUIET_MEMORY, make_cb

SHAPES = {
    "Syncthing": "{id}.sync-conflict-20250306-101502-7QKZ3AB.json",
    "Dropbox": "{id} (conflicted copy 2025-03-06).json",
    "Dropbox, named": "{id} (Ana's MacBook's conflicted copy 2025-03-06 (1)).json",
    "Nextcloud": "{id} (conflicted copy ana 2025-03-06 101502).json",
    "Nextcloud, older": "{id}_conflict-20250306-101502.json",
    "iCloud": "{id} 2.json",
}


def ask(cb: CB, server: fs.FakeServer, *args: str) -> str:
    server.add(fs.text(f"answer to {args[-1]}"))
    return cb.ask_saved(*args)


def transcript(cb: CB, sid: str) -> tuple[list[str], str]:
    proc = cb.invoke("sessions", "show", "--json", sid)
    assert proc.returncode == 0, proc.stderr
    doc = json.loads(proc.stdout)
    return [m["content"] for m in [*doc["archived"], *doc["messages"]]], proc.stderr


def apart(tmp_path: Path, server: fs.FakeServer) -> tuple[CB, CB, str]:
    """One session started here, synced there, then continued on both while apart."""
    here = make_cb(tmp_path / "here", server.base_url, **QUIET_MEMORY)
    there = make_cb(tmp_path / "there", server.base_url, **QUIET_MEMORY)
    sid = ask(here, server, "where do quokkas live?")
    there.sessions_dir.mkdir()
    shutil.copy2(here.sessions_dir / f"{sid}.json", there.sessions_dir)
    ask(here, server, "-s", sid, "what do they eat?")
    ask(there, server, "-s", sid, "how big are they?")
    ask(there, server, "-s", sid, "are they friendly?")
    return here, there, sid


WHOLE = [
    "where do quokkas live?",
    "answer to where do quokkas live?",
    "what do they eat?",
    "answer to what do they eat?",
    "how big are they?",
    "answer to how big are they?",
    "are they friendly?",
    "answer to are they friendly?",
]


def turns_whole(contents: list[str]) -> bool:
    return all(contents[i + 1] == f"answer to {contents[i]}" for i in range(0, len(contents), 2))


@pytest.mark.parametrize("tool", SHAPES)
def test_each_tools_conflict_copy_of_a_session_is_merged(tmp_path: Path, tool: str) -> None:
    with fs.FakeServer() as server:
        here, there, sid = apart(tmp_path, server)
        copy = here.sessions_dir / SHAPES[tool].format(id=sid)
        shutil.copy2(there.sessions_dir / f"{sid}.json", copy)
        contents, said = transcript(here, sid)
        assert sorted(contents) == sorted(WHOLE) and turns_whole(contents)
        assert contents[:2] == WHOLE[:2]  # what both had first
        (line,) = said.splitlines()
        assert f"merged 4 messages from a {tool.split(',')[0]} conflict copy" in line
        assert not copy.exists()
        (aside,) = here.sessions_dir.glob(f"{glob_safe(copy.name)}.merged-*")
        assert aside.read_bytes() == (there.sessions_dir / f"{sid}.json").read_bytes()
        listed = json.loads(here.invoke("sessions", "list", "--json").stdout)
        assert [(s["id"], s["message_count"]) for s in listed] == [(sid, 8)]  # no second session
        ask(here, server, "-s", sid, "thanks!")  # the next turn carries on from the merged one
        sent = [m["content"] for m in server.chat_bodies()[-1]["messages"][1:-1]]
        assert sorted(sent) == sorted(WHOLE)


def glob_safe(name: str) -> str:
    return name.replace("[", "[[]")


def test_the_turns_of_both_machines_come_in_the_order_they_were_asked(tmp_path: Path) -> None:
    with fs.FakeServer() as server:
        here, there, sid = apart(tmp_path, server)
        doc = json.loads((there.sessions_dir / f"{sid}.json").read_text())
        stamps = ["2030-01-01T10:00:00Z", "2030-01-01T10:00:01Z"]  # asked before ...
        stamps += ["2030-01-01T12:00:00Z", "2030-01-01T12:00:01Z"]  # ... and after here's turn
        for m, at in zip(doc["messages"][2:], stamps, strict=True):
            m["created_at"] = at
        here_doc = json.loads((here.sessions_dir / f"{sid}.json").read_text())
        for m, at in zip(here_doc["messages"][2:], ["2030-01-01T11:00:00Z"] * 2, strict=True):
            m["created_at"] = at
        (here.sessions_dir / f"{sid}.json").write_text(json.dumps(here_doc))
        copy = here.sessions_dir / SHAPES["Syncthing"].format(id=sid)
        copy.write_text(json.dumps(doc))
        contents, _ = transcript(here, sid)
        assert contents == [*WHOLE[:2], *WHOLE[4:6], *WHOLE[2:4], *WHOLE[6:]]


def test_a_git_merge_conflict_in_a_session_file_keeps_both_sides(tmp_path: Path) -> None:
    with fs.FakeServer() as server:
        here, there, sid = apart(tmp_path, server)
        ours = (here.sessions_dir / f"{sid}.json").read_text()
        theirs = (there.sessions_dir / f"{sid}.json").read_text()
        marked = f"<<<<<<< HEAD\n{ours}\n=======\n{theirs}\n>>>>>>> laptop\n"
        (here.sessions_dir / f"{sid}.json").write_text(marked)
        found = json.loads(here.invoke("sessions", "search", "--json", "friendly").stdout)
        assert [h["id"] for h in found] == [sid]
        contents, said = transcript(here, sid)
        assert sorted(contents) == sorted(WHOLE) and turns_whole(contents)
        assert list(here.sessions_dir.glob("*.corrupt-*")) == []  # resolved, not quarantined


@pytest.mark.parametrize("how", ["nothing shared", "shared in another order"])
def test_histories_that_cannot_be_ordered_are_kept_as_a_fork(tmp_path: Path, how: str) -> None:
    with fs.FakeServer() as server:
        here, there, sid = apart(tmp_path, server)
        doc = json.loads((there.sessions_dir / f"{sid}.json").read_text())
        first, rest = doc["messages"][:2], doc["messages"][2:]
        doc["messages"] = rest if how == "nothing shared" else [*first[::-1], *rest]
        (here.sessions_dir / SHAPES["Dropbox"].format(id=sid)).write_text(json.dumps(doc))
        before = (here.sessions_dir / f"{sid}.json").read_bytes()
        proc = here.invoke("sessions", "list", "--json")
        (fork,) = [s for s in json.loads(proc.stdout) if s["id"] != sid]
        (line,) = proc.stderr.splitlines()
        assert "cannot be put in one order" in line and f"kept as session {fork['id']}" in line
        assert fork["title"].endswith("(from another machine)")
        assert fork["message_count"] == len(doc["messages"])
        assert (here.sessions_dir / f"{sid}.json").read_bytes() == before  # left as it was
        contents, _ = transcript(here, fork["id"])
        assert contents == [m["content"] for m in doc["messages"]]
        assert list(here.sessions_dir.glob(f"{sid} (conflicted copy 2025-03-06).json.merged-*"))


def test_a_session_deleted_here_comes_back_from_its_copy(tmp_path: Path) -> None:
    with fs.FakeServer() as server:
        here, there, sid = apart(tmp_path, server)
        (here.sessions_dir / f"{sid}.json").unlink()
        shutil.copy2(there.sessions_dir / f"{sid}.json", here.sessions_dir / f"{sid} 2.json")
        contents, said = transcript(here, sid)
        assert contents == [*WHOLE[:2], *WHOLE[4:]]
        assert "came back from its iCloud conflict copy" in said
