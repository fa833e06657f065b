"""MEMORY.md changed on two machines while apart: the conflict copy a sync tool made (each
tool's name for it) or git's conflict marks are merged into MEMORY.md by content and date,
nothing lost, nothing twice, pins and mutes kept, the copy moved aside with one line. Driven
as the user meets it: the next `countbot` command that reads the memory."""

from __future__ import annotations

import json
from pathlib import Path

import fakeserver as fs
import pytest
from cbenv import CB, QUIET_MEMORY, make_cb

BASE = [
    "# countbot long-term memory",
    "",
    "2025-03-01|user|plays the cello on Tuesdays",
    "2025-03-02|user|lives in Lyon",
]
HERE = [*BASE, "2025-03-04|auto-memory|is learning Italian"]  # written on this machine
THERE = [
    *BASE,
    "2025-03-03|tool|prefers green tea",  # written on the other machine
    "2025-03-05|user|lives  in   Lyon",  # the same entry again (spacing aside): not twice
    "2025-03-06|user|has a cat called Miso",
]
MERGED = [
    "plays the cello on Tuesdays",
    "lives in Lyon",
    "prefers green tea",
    "is learning Italian",
    "has a cat called Miso",
]

SHAPES = {  # what each tool calls the other machine's version of MEMORY.md
    "Syncthing": "MEMORY.sync-conflict-20250306-101502-7QKZ3AB.md",
    "Dropbox": "MEMORY (conflicted copy 2025-03-06).md",
    "Dropbox, named": "MEMORY (Ana's MacBook's conflicted copy 2025-03-06).md",
    "Nextcloud": "MEMORY (conflicted copy 2025-03-06 101502).md",
    "Nextcloud, older": "MEMORY_conflict-20250306-101502.md",
    "iCloud": "MEMORY 2.md",
}


def write(path: Path, lines: list[str]) -> None:
    path.write_text("\n".join(lines) + "\n", encoding="utf-8")


def shown(cb: CB) -> tuple[list[dict[str, object]], str]:
    proc = cb.invoke("memory", "show", "--json")
    assert proc.returncode == 0, proc.stderr
    return json.loads(proc.stdout), proc.stderr


@pytest.mark.parametrize("tool", SHAPES)
def test_each_tools_conflict_copy_is_merged_and_moved_aside(tmp_path: Path, tool: str) -> None:
    cb = make_cb(tmp_path, "http://127.0.0.1:9")
    write(cb.memory_file, HERE)
    copy = cb.work / SHAPES[tool]
    write(copy, THERE)
    others = ["MEMORY 1.md", "MEMORY-old.md", "notes.sync-conflict-20250306-101502-7QKZ3AB.md"]
    for name in others:  # not copies of MEMORY.md: left alone
        write(cb.work / name, ["2025-03-08|user|not merged"])
    entries, said = shown(cb)
    assert [e["content"] for e in entries] == MERGED  # by date, each once
    assert [e["date"] for e in entries][1] == "2025-03-02"  # this machine's line kept as it was
    (line,) = said.splitlines()
    assert f"merged 2 entries from {copy.name} (a {tool.split(',')[0]} conflict copy)" in line
    assert not copy.exists()
    (aside,) = cb.work.glob(f"{SHAPES[tool]}.merged-*")
    assert aside.read_text(encoding="utf-8").splitlines() == THERE  # moved aside, whole
    assert aside.name in line
    assert all((cb.work / name).exists() for name in others)
    again, said = shown(cb)
    assert again == entries and said == ""  # merged once


def test_a_git_merge_conflict_in_memory_is_resolved_keeping_both_sides(tmp_path: Path) -> None:
    cb = make_cb(tmp_path, "http://127.0.0.1:9")
    write(
        cb.memory_file,
        [
            *BASE,
            "<<<<<<< HEAD",
            *HERE[len(BASE) :],
            "||||||| merged common ancestors",
            "=======",
            *THERE[len(BASE) :],
            ">>>>>>> laptop",
            "2025-03-09|user|plays chess online",
        ],
    )
    entries, said = shown(cb)
    assert [e["content"] for e in entries] == [*MERGED, "plays chess online"]
    assert "<<<<<<<" not in cb.memory_file.read_text(encoding="utf-8")
    (line,) = said.splitlines()
    assert "git conflict in MEMORY.md" in line and "2 entries from theirs" in line


def test_pins_and_mutes_of_both_machines_are_kept(tmp_path: Path) -> None:
    """Each machine pinned and muted lines while apart: MEMORY.md and MEMORY.marks.json both
    got conflict copies. After the merge every pin and mute holds, also the other machine's pin
    of a line this machine keeps under another date."""
    here = make_cb(tmp_path / "here", "http://127.0.0.1:9")
    there = make_cb(tmp_path / "there", "http://127.0.0.1:9")
    write(here.memory_file, HERE)
    write(there.memory_file, [*THERE, "2025-03-07|user|is learning Italian"])
    for cb, cmd in ((here, ("pin", "1")), (there, ("pin", "3")), (there, ("mute", "5"))):
        assert cb.invoke("memory", *cmd).returncode == 0  # cello; green tea; Miso
    assert there.invoke("memory", "pin", "6").returncode == 0  # Italian, its own date
    stamp = "sync-conflict-20250307-090000-7QKZ3AB"
    for name in ("MEMORY.md", "MEMORY.marks.json"):
        stem, ext = name.rsplit(".", 1)
        (here.work / f"{stem}.{stamp}.{ext}").write_bytes((there.work / name).read_bytes())
    entries, said = shown(here)
    assert [e["content"] for e in entries] == MERGED
    flags = {e["content"]: (e["pinned"], e["muted"]) for e in entries}
    assert flags["plays the cello on Tuesdays"] == (True, False)
    assert flags["is learning Italian"] == (True, False)  # the pin moved to this line
    assert flags["prefers green tea"] == (True, False)
    assert flags["has a cat called Miso"] == (False, True)
    assert flags["lives in Lyon"] == (False, False)
    assert len(said.splitlines()) == 1  # the marks' copy merged silently with it
    assert sorted(p.name.split(".merged-")[0] for p in here.work.glob("*.merged-*")) == sorted(
        f"{n.rsplit('.', 1)[0]}.{stamp}.{n.rsplit('.', 1)[1]}"
        for n in ("MEMORY.md", "MEMORY.marks.json")
    )


def test_a_line_memory_tidy_retired_is_not_brought_back(tmp_path: Path) -> None:
    cb = make_cb(tmp_path, "http://127.0.0.1:9")
    write(
        cb.memory_file, [BASE[0], "2025-03-02|user|lives in Lyon", "2025-04-01|user|lives in Turin"]
    )
    retired = {"line": "2025-03-01|user|plays the cello on Tuesdays", "reason": "drop"}
    (cb.work / "MEMORY.archive.jsonl").write_text(json.dumps(retired) + "\n", encoding="utf-8")
    write(cb.work / SHAPES["Syncthing"], THERE)
    entries, _ = shown(cb)
    assert "plays the cello on Tuesdays" not in [e["content"] for e in entries]
    assert "has a cat called Miso" in [e["content"] for e in entries]


def test_a_turn_reads_the_merged_memory(tmp_path: Path) -> None:
    """`ask` is where a user meets it first: the merge is said on stderr and the lines
    from the other machine are recalled."""
    with fs.FakeServer() as server:
        cfg = {**QUIET_MEMORY["memory"], "inject": "recent"}
        cb = make_cb(tmp_path, server.base_url, memory=cfg)
        write(cb.memory_file, HERE)
        write(cb.work / SHAPES["Dropbox"], THERE)
        server.add(fs.text("Miso."))
        proc = cb.invoke("ask", "what is my cat called?")
        assert proc.returncode == 0, proc.stderr
        assert "has a cat called Miso" in json.dumps(server.chat_bodies()[-1]["messages"])
        assert "conflict copy" in proc.stderr
