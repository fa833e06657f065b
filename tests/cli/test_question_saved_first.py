"""The question is saved before the model starts: countbot killed with SIGKILL
right after Enter, while a loopback server has the request and never answers, leaves the
question in the session file, marked interrupted; the next turn (/retry) replaces it."""

from __future__ import annotations

import signal
import sys
from pathlib import Path

import fakeserver as fs
import pexpect
import pytest
from cbenv import make_cb
from terminal import TOOLBAR_END, expect, spawn

HANG_BOUND = 30.0  # seconds to wait for countbot's request (a hang bound, not a timing)


def test_sigkill_of_ask_after_the_request_left_keeps_the_question(tmp_path: Path) -> None:
    with fs.FakeServer() as server:
        cb = make_cb(tmp_path, server.base_url)
        server.add(fs.hang(60, send_headers=False))  # silent: no byte of an answer
        proc = cb.popen("ask", "What is the capital of France?")
        try:
            server.wait_chats(1, HANG_BOUND)
        finally:
            proc.send_signal(signal.SIGKILL)
            proc.wait(HANG_BOUND)
        assert proc.returncode == -signal.SIGKILL
        msgs = cb.only_session()["messages"]
        assert [(m["role"], m["content"], m.get("status")) for m in msgs] == [
            ("user", "What is the capital of France?", "interrupted")
        ]
        # asked again in that session, the answer replaces the interrupted attempt's status
        server.add(fs.text("Paris."))
        again = cb.run("ask", "-c", "And of Italy?")
        assert again.returncode == 0, again.stderr
        msgs = cb.only_session()["messages"]
        assert [m["content"] for m in msgs] == [
            "What is the capital of France?",
            "And of Italy?",
            "Paris.",
        ]
        assert [m.get("status") for m in msgs] == ["interrupted", None, None]


@pytest.mark.skipif(sys.platform == "win32", reason="needs a POSIX pty")
def test_sigkill_of_the_repl_right_after_enter_keeps_the_question(tmp_path: Path) -> None:
    with fs.FakeServer() as server:
        cb = make_cb(tmp_path, server.base_url)
        server.add(fs.hang(60, send_headers=False))
        child = spawn(cb)
        try:
            expect(child, TOOLBAR_END, HANG_BOUND)  # the prompt is up
            child.send("remember this question\r")
            server.wait_chats(1, HANG_BOUND)
        finally:
            child.kill(signal.SIGKILL)
            child.close()
        msgs = cb.only_session()["messages"]
        assert [(m["role"], m["content"], m.get("status")) for m in msgs] == [
            ("user", "remember this question", "interrupted")
        ]
        # /retry in a new REPL asks it again, in place of the interrupted attempt
        server.add(fs.text("Answered now."))
        child = spawn(cb, "-c")
        try:
            expect(child, TOOLBAR_END, HANG_BOUND)
            child.send("/retry\r")
            expect(child, "Answered now.", HANG_BOUND)
            expect(child, TOOLBAR_END, HANG_BOUND)  # the next prompt is up: the turn is saved
            child.sendcontrol("d")
            child.expect(pexpect.EOF, timeout=HANG_BOUND)
        finally:
            child.close(force=True)
        msgs = cb.only_session()["messages"]
        assert [(m["content"], m.get("status")) for m in msgs] == [
            ("remember this question", None),
            ("Answered now.", None),
        ]
