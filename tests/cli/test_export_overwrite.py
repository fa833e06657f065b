"""`sessions export -o FILE` never replaces an existing file unasked: it asks on a terminal,
needs `--force` otherwise (exit 2, the file left as it was)."""

from __future__ import annotations

import sys
from dataclasses import replace
from pathlib import Path

import pexpect
import pytest
from cbenv import CB, COUNTBOT, make_cb

from countbot_cli.conversation.sessions.session import new_session
from countbot_cli.conversation.sessions.store import SessionStore
from countbot_cli.messages import Message


def _one_session(cb: CB) -> str:
    session = replace(new_session(provider="p", model="m", title="Monads"), id="feed00000001")
    session.messages.append(Message(role="user", content="what is a monad?"))
    SessionStore(cb.sessions_dir).create(session)
    return session.id


def test_existing_file_needs_force_without_a_terminal(tmp_path: Path) -> None:
    cb = make_cb(tmp_path, "http://127.0.0.1:9/v1")
    sid = _one_session(cb)
    target = cb.work / "notes.md"
    target.write_text("my notes\n", encoding="utf-8")
    proc = cb.invoke("sessions", "export", sid, "-o", "notes.md")
    assert proc.returncode == 2
    assert "notes.md already exists; not overwriting it" in proc.stderr
    assert "pass --force to replace it" in proc.stderr
    assert target.read_text(encoding="utf-8") == "my notes\n"
    forced = cb.invoke("sessions", "export", sid, "-o", "notes.md", "--force")
    assert forced.returncode == 0, forced.stderr
    assert "what is a monad?" in target.read_text(encoding="utf-8")
    fresh = cb.invoke("sessions", "export", sid, "-o", "new.md")  # a new file needs nothing
    assert fresh.returncode == 0 and (cb.work / "new.md").exists()


@pytest.mark.skipif(sys.platform == "win32", reason="needs a POSIX pty")
def test_a_terminal_is_asked_and_no_keeps_the_file(tmp_path: Path) -> None:
    cb = make_cb(tmp_path, "http://127.0.0.1:9/v1")
    sid = _one_session(cb)
    target = cb.work / "notes.md"
    target.write_text("my notes\n", encoding="utf-8")
    for answer, kept in (("n", True), ("y", False)):
        child = pexpect.spawn(
            COUNTBOT, ["sessions", "export", sid, "-o", "notes.md"], env=cb.env,
            cwd=str(cb.work), encoding="utf-8", timeout=15,
        )  # fmt: skip
        try:
            child.expect_exact("notes.md already exists. Overwrite it? [y/N]")
            child.sendline(answer)
            child.expect(pexpect.EOF)
        finally:
            child.close(force=True)
        assert child.exitstatus == 0
        assert (target.read_text(encoding="utf-8") == "my notes\n") is kept
        if kept:
            assert "Not exported: notes.md is left as it was." in (child.before or "")
