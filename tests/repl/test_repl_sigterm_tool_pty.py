"""SIGTERM while a tool runs in the chat: the command is stopped, the turn is
saved (the text that came with the call marked interrupted, the call's record "interrupted"),
then countbot ends with 130, as it does mid-answer. The tool round keeps the signal as raised
(`RoundResult.interrupt`) instead of turning it into a plain Ctrl-C that left the chat running."""

from __future__ import annotations

import json
import time
from pathlib import Path

import fakeserver as fs
import pexpect
from cbenv import CB
from terminal import expect, spawn, terminated
from tools_env import tools_cb

LONG = "echo started-1; sleep 60; echo never-shown"


def running(tmp_path: Path, server: fs.FakeServer, command: str) -> tuple[CB, pexpect.spawn]:
    """The chat with the model's call of `command` approved and running (its first line shown
    in the live tail)."""
    cb = tools_cb(tmp_path, server)
    server.add(fs.tool_calls([("exec", {"command": command})], content="Running it."))
    child = spawn(cb)
    try:
        expect(child, "tools ask")  # the bottom toolbar: the prompt is ready
        child.send("run the long one\r")
        expect(child, "(default: no) ")
        child.send("y\r")
        expect(child, "│ started-1")
    except BaseException:
        child.close(force=True)
        raise
    return cb, child


def test_sigterm_while_a_tool_runs_saves_the_turn_then_ends_the_chat(
    tmp_path: Path, server: fs.FakeServer
) -> None:
    cb, child = running(tmp_path, server, LONG)
    assert "never-shown" not in terminated(child)
    [path] = cb.session_files()
    saved = json.loads(path.read_text(encoding="utf-8"))
    turn = [(m["role"], m["content"], m.get("status")) for m in saved["messages"]]
    assert turn == [
        ("user", "run the long one", None),
        ("assistant", "Running it.", "interrupted"),
    ]
    [record] = saved["tool_conversations"]
    assert (record["tool"], record["outcome"]) == ("exec", "interrupted")
    assert record["message_id"] == saved["messages"][1]["id"]
    assert len(server.chat_bodies()) == 1  # no request after the stopped round


def test_sigterm_while_a_stopped_tool_is_given_its_time_still_ends_the_chat(
    tmp_path: Path, server: fs.FakeServer
) -> None:
    """Ctrl-C stops the command, which ignores SIGTERM: the turn gives it the shell tool's grace
    to go. A SIGTERM meanwhile was swallowed with the Ctrl-C presses that cannot cut that wait
    short, and the chat went on at its prompt; now it ends the chat once the command is gone."""
    _, child = running(tmp_path, server, f"trap '' TERM INT; {LONG}")
    child.sendintr()  # Ctrl-C: the group gets SIGTERM (ignored), SIGKILL 0.5 s later
    time.sleep(0.15)
    assert "never-shown" not in terminated(child)
    assert len(server.chat_bodies()) == 1  # no request after the stopped round
