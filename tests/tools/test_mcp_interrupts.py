"""Ctrl-C, SIGTERM and SIGHUP while MCP servers start (the first turn that offers tools, `mcp
list`, `/mcp`): the turn is interrupted as one waiting for the model's first token is (the
question kept, marked interrupted; `ask` exits 130, the chat goes on at its prompt), nothing
is sent to the model, the servers that were starting are stopped, and the chat starts them
again when tools are next needed. Once, waiting for a server took Ctrl-C for the server's
failure: the server was marked failed for good and the model was asked anyway (exit 0).
"""

from __future__ import annotations

import os
import signal
from pathlib import Path

import fakeserver as fs
import pexpect
import pytest
from cbenv import CB
from mcp_env import TIME_TOOL, mcp_cb, pid_of, silent_once_server, silent_server, tool_names
from processes import alive, wait_gone
from terminal import expect, plain, spawn

HANG_BOUND = 20  # seconds: countbot stops long before a silent server would have started
PROMPT = "tools ask"  # the end of the chat's bottom toolbar: the prompt is up


def saved_turns(cb: CB) -> list[tuple[str, str, str | None]]:
    msgs = cb.only_session()["messages"]
    return [(m["role"], m["content"], m.get("status")) for m in msgs]


@pytest.mark.parametrize("signame", ["SIGINT", "SIGTERM"])
def test_a_signal_while_a_server_starts_ends_ask_with_130_before_the_model_is_asked(
    tmp_path: Path, server: fs.FakeServer, signame: str
) -> None:
    """Ctrl-C as before the first token: exit 130, the question kept, marked interrupted.
    SIGTERM (errors.Terminated) the same, said as a termination, never as the user's Ctrl-C."""
    pidfile = tmp_path / "slow.pid"
    cb = mcp_cb(tmp_path, server, slow=silent_server(pidfile))
    server.default = fs.text("Hello.")
    proc = cb.popen("ask", "what time is it?")
    pid = pid_of(pidfile)  # the server was started and countbot waits for its answer
    proc.send_signal(getattr(signal, signame))
    assert proc.wait(HANG_BOUND) == 130
    stderr = proc.stderr.read() if proc.stderr else ""
    assert server.chat_bodies() == []
    assert "failed to start" not in stderr, stderr
    if signame == "SIGTERM":
        assert "countbot: interrupted" in stderr and "by the user" not in stderr, stderr
    wait_gone(pid)
    assert saved_turns(cb) == [("user", "what time is it?", "interrupted")]


def test_countbot_killed_while_a_server_starts_leaves_the_question_saved(
    tmp_path: Path, server: fs.FakeServer
) -> None:
    """The question is saved before the turn's set-up (recall, MCP servers starting), not only
    before the model starts: `kill -9` while a server starts keeps it, marked interrupted."""
    pidfile = tmp_path / "slow.pid"
    cb = mcp_cb(tmp_path, server, slow=silent_server(pidfile))
    proc = cb.popen("ask", "what time is it?")
    pid = pid_of(pidfile)  # the server was started and countbot waits for its answer
    try:
        proc.send_signal(signal.SIGKILL)
        assert proc.wait(HANG_BOUND) == -signal.SIGKILL
        assert saved_turns(cb) == [("user", "what time is it?", "interrupted")]
    finally:
        if alive(pid):  # nothing was left to stop it
            os.kill(pid, signal.SIGKILL)


def test_ctrl_c_while_mcp_list_starts_the_servers_exits_130_and_stops_them(
    tmp_path: Path, server: fs.FakeServer
) -> None:
    pidfile = tmp_path / "slow.pid"
    cb = mcp_cb(tmp_path, server, slow=silent_server(pidfile))
    proc = cb.popen("mcp", "list")
    pid = pid_of(pidfile)
    proc.send_signal(signal.SIGINT)
    assert proc.wait(HANG_BOUND) == 130
    out = proc.stdout.read() if proc.stdout else ""
    assert "failed to start" not in out, out  # nothing listed as the server's own failure
    assert not alive(pid)  # stopped before countbot ended


def _chat_interrupted_while_the_server_starts(
    tmp_path: Path, server: fs.FakeServer, typed: str
) -> tuple[CB, pexpect.spawn, Path]:
    """The chat, `typed` at its prompt, Ctrl-C while the server it starts is silent, and the
    prompt back; the pid file of the server's later starts."""
    first, then = tmp_path / "first.pid", tmp_path / "then.pid"
    cb = mcp_cb(tmp_path, server, time=silent_once_server(first, then))
    child = spawn(cb, timeout=HANG_BOUND)
    try:
        expect(child, PROMPT)
        child.send(typed + "\r")
        pid = pid_of(first)  # the server was started and countbot waits for its answer
        child.sendintr()
        expect(child, "interrupted")
        expect(child, PROMPT)  # the chat goes on
        assert "failed to start" not in plain(child.before)
        wait_gone(pid)
    except BaseException:
        child.close(force=True)
        raise
    return cb, child, then


def test_ctrl_c_while_a_server_starts_keeps_the_question_and_the_next_turn_starts_it_again(
    tmp_path: Path, server: fs.FakeServer
) -> None:
    cb, child, then = _chat_interrupted_while_the_server_starts(
        tmp_path, server, "what time is it?"
    )
    try:
        assert server.chat_bodies() == []
        assert saved_turns(cb) == [("user", "what time is it?", "interrupted")]
        server.add(fs.text("It is noon."))
        child.send("/retry\r")
        expect(child, "It is noon.")
        expect(child, PROMPT)
        assert TIME_TOOL in tool_names(server.chat_bodies()[0])  # started again, and offered
        pid = pid_of(then)
        child.sendcontrol("d")
        child.expect(pexpect.EOF)
    finally:
        child.close(force=True)
    assert saved_turns(cb) == [
        ("user", "what time is it?", None),
        ("assistant", "It is noon.", None),
    ]
    wait_gone(pid)


def test_ctrl_c_while_slash_mcp_starts_the_servers_leaves_them_to_start_again(
    tmp_path: Path, server: fs.FakeServer
) -> None:
    cb, child, then = _chat_interrupted_while_the_server_starts(tmp_path, server, "/mcp")
    try:
        child.send("/mcp\r")
        expect(child, "time  running")
        expect(child, TIME_TOOL)
        expect(child, PROMPT)
        pid = pid_of(then)
        child.sendcontrol("d")
        child.expect(pexpect.EOF)
    finally:
        child.close(force=True)
    assert cb.session_files() == []  # no turn: nothing saved
    wait_gone(pid)
