"""Command output that keeps what matters: over the cap the model sees the head and the tail
(where the error is) with the middle counted; a failing command's last stderr lines are shown on
screen (ask's notices, the REPL's tool preview)."""

from __future__ import annotations

import re
import threading
from pathlib import Path

import fakeserver as fs
from cbenv import make_cb

from countbot_cli.tools.registry import ToolContext
from countbot_cli.tools.shell import run_exec
from countbot_cli.ui.transcript import tool_preview

FAIL = """\
i=1; while [ $i -le 400 ]; do echo "test $i passed"; i=$((i+1)); done
echo "FAILED test_login: expected 200, got 500"
echo "warning: deprecated flag" >&2
echo "Traceback: app.py line 12" >&2
echo "error: 1 test failed" >&2
exit 2
"""


def test_ask_shows_why_a_command_failed_and_the_model_sees_the_end(
    tmp_path: Path, server: fs.FakeServer
) -> None:
    cb = make_cb(
        tmp_path,
        server.base_url,
        tools={"enabled": True, "allow": ["sh fail.sh"], "max_output_chars": 400},
    )
    (cb.work / "fail.sh").write_text(FAIL, encoding="utf-8")
    server.add(fs.tool_calls([("exec", {"command": "sh fail.sh"})]), fs.text("login is broken"))
    proc = cb.invoke("ask", "run the tests")
    assert (proc.returncode, proc.stdout) == (0, "login is broken\n"), proc.stderr
    err = proc.stderr.splitlines()
    at = err.index("countbot: ← exec: command failed with exit code 2")
    assert err[at + 1 : at + 4] == [
        "countbot:   warning: deprecated flag",
        "countbot:   Traceback: app.py line 12",
        "countbot:   error: 1 test failed",
    ]
    sent = [m for m in server.chat_bodies()[1]["messages"] if m["role"] == "tool"][0]["content"]
    assert sent.startswith("COMMAND FAILED (exit code 2)\ntest 1 passed\ntest 2 passed\n")
    assert sent.endswith(
        "FAILED test_login: expected 200, got 500\nSTDERR:\nwarning: deprecated flag\n"
        "Traceback: app.py line 12\nerror: 1 test failed\nExit code: 2"
    )
    note = re.search(r"\n\[… (\d+) lines / ([\d,]+) chars elided …\]\n", sent)
    assert note is not None
    shown = sent.count(" passed\n")
    assert int(note.group(1)) == 400 - shown  # each `passed` line is shown or counted


def test_the_repl_tool_preview_shows_the_stderr_tail_of_a_failure(tmp_path: Path) -> None:
    ctx = ToolContext(workspace=tmp_path)
    script = "echo out; echo 'e1' >&2; printf '\\033[31me2\\n' >&2; exit 1"
    failed = run_exec({"command": script}, ctx, threading.Event())
    assert tool_preview(failed) == ["  ✗ command failed with exit code 1 · 6 lines", "  e1", "  e2"]
    fine = run_exec({"command": "echo ok"}, ctx, threading.Event())
    assert tool_preview(fine) == ["  ✓ · 1 line", "  ok"]
