"""The chat's rough edges, in a real pseudo-terminal against the loopback server: what
`/context` offers for a pinned memory line."""

from __future__ import annotations

import json
import sys
from pathlib import Path

import fakeserver as fs
import pexpect
import pytest
from cbenv import make_cb
from terminal import TOOLBAR_END, expect, spawn

pytestmark = pytest.mark.skipif(sys.platform == "win32", reason="needs a POSIX pty")

NO_UPKEEP = {"overflow_summary": False, "session_summary": False, "auto_memory": False}


def test_context_offers_unpin_for_a_pinned_line_and_unpin_works(tmp_path: Path) -> None:
    with fs.FakeServer() as server:
        cb = make_cb(tmp_path, server.base_url, memory=NO_UPKEEP)
        assert cb.run("memory", "add", "The user drinks oolong tea").returncode == 0
        assert cb.run("memory", "add", "The user keeps bees on the roof").returncode == 0
        assert cb.run("memory", "pin", "2").returncode == 0
        server.add(fs.text("Noted."))
        child = spawn(cb)
        try:
            expect(child, TOOLBAR_END)
            child.send("hello\r")
            expect(child, "Noted.")
            expect(child, TOOLBAR_END)
            child.send("/context\r")
            expect(child, "pinned memory:")
            child.expect(r"your message")
            row = child.before.splitlines()[0]
            assert "bees on the roof" in row, row
            assert row.rstrip().endswith("(countbot memory unpin 2)"), row
            expect(child, TOOLBAR_END)
            child.sendcontrol("d")
            child.expect(pexpect.EOF)
        finally:
            child.close(force=True)
        # the offered command does what it says: the line is no longer pinned
        done = cb.run("memory", "unpin", "2")
        assert done.returncode == 0 and "Unpinned: entry 2" in done.stdout, done.stdout
        shown = json.loads(cb.run("memory", "show", "--json").stdout)
        assert [(e["number"], e["pinned"]) for e in shown] == [(1, False), (2, False)]
