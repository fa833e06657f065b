"""`countbot memory pin/unpin/mute/unmute N` and the instructions file (AGENTS.md/COUNTBOT.md),
as a user runs them, read from the requests the loopback server received: pinned lines and a
trusted instructions file in the system prompt, muted lines never recalled, MEMORY.md's format
untouched."""

from __future__ import annotations

from pathlib import Path

import fakeserver as fs
from cbenv import CB, make_cb

from countbot_cli.memory.marks import marks_path
from countbot_cli.memory.store import MemoryStore

REDIS = (
    "Production redis runs version 7.2 on port 6380",
    "The staging redis uses port 6390",
    "Never flush the redis cache on Fridays",
)


def _ask(cb: CB, server: fs.FakeServer, text: str) -> tuple[str, str, str]:
    """(system prompt, current message as sent, stderr) of one `ask`."""
    server.add(fs.text("ok"))
    proc = cb.invoke("ask", text)
    assert proc.returncode == 0, proc.stderr
    msgs = server.chat_bodies()[-1]["messages"]
    return msgs[0]["content"], msgs[-1]["content"], proc.stderr


def _lines(cb: CB) -> dict[str, int]:
    """content -> entry number (as `memory show` numbers them)."""
    return {e.content: n for n, e in MemoryStore(cb.memory_file).numbered()}


def test_pinned_lines_are_in_the_head_and_muted_ones_never_recalled(tmp_path: Path) -> None:
    with fs.FakeServer() as server:
        cb = make_cb(tmp_path, server.base_url, memory={"inject": "relevant", "auto_memory": False})
        for text in REDIS:
            assert cb.invoke("memory", "add", text).returncode == 0
        before = cb.memory_file.read_bytes()
        line = _lines(cb)
        proc = cb.invoke("memory", "pin", str(line[REDIS[0]]))
        assert proc.returncode == 0, proc.stderr
        assert proc.stdout.startswith(f"Pinned (sent with every request): entry {line[REDIS[0]]}")
        assert cb.invoke("memory", "mute", str(line[REDIS[1]])).returncode == 0
        assert cb.memory_file.read_bytes() == before  # the marks live beside it
        assert marks_path(cb.memory_file).is_file()

        system, current, _ = _ask(cb, server, "which redis port?")
        assert REDIS[0] in system and "## Long-term Memory" in system
        assert REDIS[0] not in current  # not twice
        assert REDIS[1] not in current and REDIS[1] not in system  # muted
        assert REDIS[2] in current and REDIS[2] not in system  # recalled: the volatile tail
        # another question, same head
        system2, current2, _ = _ask(cb, server, "is flushing the redis cache ok today?")
        assert system2 == system and REDIS[2] in current2

        assert cb.invoke("memory", "unpin", str(line[REDIS[0]])).returncode == 0
        assert cb.invoke("memory", "unmute", str(line[REDIS[1]])).returncode == 0
        system, current, _ = _ask(cb, server, "which redis port?")
        assert REDIS[0] not in system and "## Long-term Memory" not in system
        assert REDIS[0] in current and REDIS[1] in current


def test_bad_line_numbers_and_edited_lines(tmp_path: Path) -> None:
    with fs.FakeServer() as server:
        cb = make_cb(tmp_path, server.base_url, memory={"inject": "relevant", "auto_memory": False})
        assert cb.invoke("memory", "add", REDIS[0]).returncode == 0
        proc = cb.invoke("memory", "pin", "999")
        assert proc.returncode == 2
        assert "no memory entry 999" in proc.stderr
        assert len(proc.stderr.strip().splitlines()) <= 2  # the message and its hint
        n = _lines(cb)[REDIS[0]]
        assert cb.invoke("memory", "pin", str(n)).returncode == 0
        # a line edited by hand is a new line: its pin is gone
        text = cb.memory_file.read_text("utf-8").replace("7.2", "7.4")
        cb.memory_file.write_text(text, "utf-8")
        system, _, _ = _ask(cb, server, "hello there")
        assert "7.4" not in system and "7.2" not in system


def test_instructions_file_only_when_trusted(tmp_path: Path) -> None:
    with fs.FakeServer() as server:
        cb = make_cb(tmp_path, server.base_url, memory={"inject": "off", "auto_memory": False})
        agents = cb.work / "AGENTS.md"
        agents.write_text("# Project rules\nAlways answer in haiku.\n", "utf-8")
        system, _, err = _ask(cb, server, "hi")
        assert "haiku" not in system
        assert "ignored" in err and "AGENTS.md" in err and "countbot config trust" in err
        assert len([ln for ln in err.splitlines() if "AGENTS.md" in ln]) == 1

        proc = cb.invoke("config", "trust", "--yes", "AGENTS.md")
        assert proc.returncode == 0, proc.stderr
        assert "Always answer in haiku." in proc.stdout and "trusted" in proc.stdout
        system, _, err = _ask(cb, server, "hi")
        assert (
            "## Project instructions (AGENTS.md)\n# Project rules\nAlways answer in haiku."
            in system
        )
        assert "AGENTS.md" not in err
        # COUNTBOT.md wins when present, and follows the same rule
        (cb.work / "COUNTBOT.md").write_text("Use metric units.\n", "utf-8")
        system, _, err = _ask(cb, server, "hi")
        assert "haiku" not in system and "metric" not in system and "COUNTBOT.md" in err
        assert cb.invoke("config", "trust", "--yes", "COUNTBOT.md").returncode == 0
        system, _, _ = _ask(cb, server, "hi")
        assert "## Project instructions (COUNTBOT.md)\nUse metric units." in system
        # a changed file is untrusted again
        (cb.work / "COUNTBOT.md").write_text("Use imperial units.\n", "utf-8")
        system, _, err = _ask(cb, server, "hi")
        assert "units" not in system and "changed since you trusted it" in err
