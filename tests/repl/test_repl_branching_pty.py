"""`/resume`'s session picker on a real terminal (pexpect): drawn under the prompt, filtered
as you type (titles, then what was said), Enter resumes the marked session."""

from __future__ import annotations

import sys
from pathlib import Path

import pexpect
import pytest
from cbenv import make_cb
from terminal import TOOLBAR_END, expect, spawn

from countbot_cli.conversation.sessions.session import new_session
from countbot_cli.conversation.sessions.store import SessionStore
from countbot_cli.messages import Message

pytestmark = pytest.mark.skipif(sys.platform == "win32", reason="needs a POSIX pty")


def test_resume_picker_on_a_terminal_filters_and_resumes(tmp_path: Path) -> None:
    cb = make_cb(tmp_path, "http://127.0.0.1:9/v1")
    store = SessionStore(cb.sessions_dir)
    for title, said in (("Tea notes", "oolong"), ("Coffee beans", "arabica"), ("Misc", "zanzibar")):
        s = new_session(provider="test", model="test-model", title=title)
        s.messages = [
            Message(role="user", content=f"tell me about {said} please"),
            Message(role="assistant", content="sure"),
        ]
        store.create(s)
    child = spawn(cb)
    try:
        expect(child, TOOLBAR_END)
        child.send("/resume\r")
        expect(child, "type to filter")
        expect(child, "Coffee beans")
        child.send("zanz")
        expect(child, "tell me about zanzibar please")  # the matching line, under its session
        child.send("\r")
        expect(child, "Resumed “Misc”")
        expect(child, TOOLBAR_END)
        child.sendcontrol("d")
        child.expect(pexpect.EOF)
    finally:
        child.close(force=True)
    assert child.exitstatus == 0
    assert len(store.list()) == 3  # resuming wrote nothing


def _two_sessions(store: SessionStore) -> None:
    for title in ("Tea notes", "Coffee beans"):
        s = new_session(provider="test", model="test-model", title=title)
        s.messages = [
            Message(role="user", content=f"about {title.lower()}"),
            Message(role="assistant", content="sure"),
        ]
        store.create(s)


@pytest.mark.parametrize(
    "args", [("sessions", "resume"), ("--pick",), ("-c", "--pick"), ("chat", "--pick")]
)
def test_resume_without_an_id_opens_the_picker_on_a_terminal(
    tmp_path: Path, args: tuple[str, ...]
) -> None:
    cb = make_cb(tmp_path, "http://127.0.0.1:9/v1")
    store = SessionStore(cb.sessions_dir)
    _two_sessions(store)
    child = spawn(cb, *args)
    try:
        expect(child, "type to filter")
        child.send("tea")
        expect(child, "Tea notes")
        child.send("\r")
        expect(child, "about tea notes")  # the chat opened on it, its last exchange shown
        expect(child, TOOLBAR_END)
        child.sendcontrol("d")
        child.expect(pexpect.EOF)
    finally:
        child.close(force=True)
    assert child.exitstatus == 0


def test_the_picker_needs_a_terminal(tmp_path: Path) -> None:
    cb = make_cb(tmp_path, "http://127.0.0.1:9/v1")
    _two_sessions(SessionStore(cb.sessions_dir))
    for args in (["sessions", "resume"], ["chat", "--pick"], ["--pick"]):
        proc = cb.run(*args)
        assert proc.returncode == 2, (args, proc.stderr)
        assert "needs a terminal" in proc.stderr
