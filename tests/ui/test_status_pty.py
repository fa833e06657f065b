"""One NO_COLOR policy for every status writer (ui/status.py): under `NO_COLOR=1`, on a
pseudo-terminal, `ask`'s status line, the REPL's spinner and a running command's live tail are
drawn the same way (dim: dim is not a colour), and nothing countbot draws itself is coloured
(the approval prompt keeps its bold, drops its colours)."""

from __future__ import annotations

import io
import re
import sys
from pathlib import Path

import fakeserver as fs
import pexpect
import pytest
from cbenv import CB, make_cb
from terminal import expect, spawn

pytestmark = pytest.mark.skipif(sys.platform == "win32", reason="needs a POSIX pty")

SLOW = "for i in 1 2 3; do echo tail-line-$i; sleep 0.3; done"
COLOUR = re.compile(r"\x1b\[(?:[0-9;]*;)?(?:3[0-9]|4[0-9]|9[0-7]|10[0-7])(?:;[0-9;]*)?m")


def _spawn(cb: CB, *args: str) -> tuple[pexpect.spawn, io.StringIO]:
    """countbot ARGS on a pty under NO_COLOR, and what it writes to the terminal."""
    child = spawn(cb, *args, env={"NO_COLOR": "1"}, cols=120)
    log = io.StringIO()
    child.logfile_read = log
    return child, log


def _style_of(raw: str, text: str) -> str:
    """The SGR codes that start the line where `text` is first drawn (a glyph or a prefix of
    a few characters may sit between them and `text`)."""
    found = re.search(r"((?:\x1b\[[0-9;]*m)*)[^\x1b\r\n]{0,6}" + re.escape(text), raw)
    assert found, f"{text!r} never drawn"
    return found.group(1)


def test_under_no_color_the_status_line_spinner_and_live_tail_agree(tmp_path: Path) -> None:
    with fs.FakeServer() as server:
        cb = make_cb(tmp_path, server.base_url, tools={"enabled": True})
        server.add(
            fs.tool_calls([("exec", {"command": SLOW})], first_delay=0.5), fs.text("All done.")
        )
        child, ask_log = _spawn(cb, "ask", "run the slow one")
        try:
            expect(child, "(default: no) ")
            child.sendline("y")
            expect(child, "│ tail-line-2")
            child.expect(pexpect.EOF)
        finally:
            child.close(force=True)
        assert child.exitstatus == 0

        server.add(fs.text("Hi from the REPL.", first_delay=0.5))
        child, repl_log = _spawn(cb)
        try:
            expect(child, "tools ask")  # the bottom toolbar: the prompt is ready
            child.send("hello\r")
            expect(child, "Hi from the REPL.")
            expect(child, "tools ask")
            child.sendcontrol("d")
            child.expect(pexpect.EOF)
        finally:
            child.close(force=True)

    ask_raw, repl_raw = ask_log.getvalue(), repl_log.getvalue()
    status = _style_of(ask_raw, "waiting for")  # ask's status line
    tail = _style_of(ask_raw, "│ tail-line-1")  # the live tail
    spinner = _style_of(repl_raw, "waiting for")  # the REPL's spinner
    assert status == tail == spinner == "\x1b[2m"
    assert "\x1b[1m" in ask_raw  # the approval prompt's bold stays
    assert COLOUR.findall(ask_raw) == [] and COLOUR.findall(repl_raw) == []
