"""A running command's output streams into a live tail on screen: `countbot
ask` on a pty (MarkdownView), against the loopback server. The tail shows an early line while
the command still runs, and is erased when it ends (the screen, rendered with pyte, keeps the
tool lines and the answer but not the tail)."""

from __future__ import annotations

import io
from pathlib import Path

import fakeserver as fs
import pexpect
import pyte
from terminal import approval_prompt, expect, finish, spawn, spawn_ask
from tools_env import tools_cb
from waits import wait_until

SLOW = (
    "for i in 1 2 3 4 5; do echo tail-line-$i; printf 'err-%s\\033[31m\\n' $i >&2; sleep 0.3; done;"
    " touch finished.flag"
)


def _screen(text: str) -> list[str]:
    screen = pyte.Screen(120, 40)
    pyte.Stream(screen).feed(text)
    return [line.rstrip() for line in screen.display]


def test_command_output_shows_in_a_live_tail_before_the_command_ends(
    tmp_path: Path, server: fs.FakeServer
) -> None:
    cb = tools_cb(tmp_path, server)
    server.add(fs.tool_calls([("exec", {"command": SLOW})]), fs.text("All done."))
    child = spawn_ask(cb, "run the slow one")
    log = io.StringIO()
    child.logfile_read = log
    approval_prompt(child)
    child.sendline("y")
    child.expect("│ tail-line-1")
    assert not (cb.work / "finished.flag").exists()  # seen while the command still runs
    child.expect("│ tail-line-2")
    assert not (cb.work / "finished.flag").exists()
    code, _ = finish(child)
    assert code == 0 and (cb.work / "finished.flag").exists()
    raw = log.getvalue()
    assert "err-1\x1b[31m" not in raw  # the command's escape never reaches the terminal
    assert "│ err-1" in raw
    shown = _screen(raw)
    assert any("All done." in line for line in shown)
    assert any("← exec: ok" in line for line in shown)
    assert not any("│ tail-line" in line or "│ err-" in line for line in shown), shown
    result = server.chat_bodies()[1]["messages"][-1]["content"]
    assert "tail-line-5" in result  # the model still gets the whole output


def test_no_live_tail_without_a_terminal(tmp_path: Path, server: fs.FakeServer) -> None:
    cb = tools_cb(tmp_path, server, allow=["echo *"])
    server.add(fs.tool_calls([("exec", {"command": "echo quiet-run"})]), fs.text("Done."))
    run = cb.run("ask", "go")
    assert run.returncode == 0, run.stderr
    assert "│" not in run.stderr and "\x1b" not in run.stderr


def test_the_repl_shows_the_live_tail_too(tmp_path: Path, server: fs.FakeServer) -> None:
    cb = tools_cb(tmp_path, server)
    server.add(fs.tool_calls([("exec", {"command": SLOW})]), fs.text("Repl done."))
    child = spawn(cb)
    log = io.StringIO()
    child.logfile_read = log
    try:
        expect(child, "tools ask")  # the bottom toolbar: the prompt is ready
        child.send("run the slow one\r")
        expect(child, "(default: no) ")
        child.send("y\r")
        expect(child, "│ tail-line-1")
        assert not (cb.work / "finished.flag").exists()  # seen while the command still runs
        expect(child, "Repl done.")
        assert (cb.work / "finished.flag").exists()
        assert "err-2\x1b[31m" not in log.getvalue()
        expect(child, "tools ask")  # the next prompt is up: Ctrl-D quits
        child.sendcontrol("d")
        child.expect(pexpect.EOF)
    finally:
        child.close(force=True)


def test_progress_gets_the_output_live_and_nothing_after_the_command_returns(
    tmp_path: Path,
) -> None:
    """The command waits for a file the progress callback creates when it sees "first": it
    ends only if its output is reported while it runs (else it times out). A process that left
    the group writes after the command returned: nothing of that is reported."""
    import shutil
    import threading
    import time

    from countbot_cli.tools.shell import run_command

    seen: list[str] = []
    late: list[str] = []
    returned = threading.Event()

    def progress(text: str) -> None:
        (late if returned.is_set() else seen).append(text)
        if "first" in text:
            (tmp_path / "go").touch()

    wait_for = "while [ ! -e {0} ]; do sleep 0.02; done"
    script = f"echo first; {wait_for.format('go')}; echo second"
    straggler = shutil.which("setsid") is not None  # it keeps writing afterwards
    if straggler:
        script += f"; setsid sh -c '{wait_for.format('late')}; echo too-late; touch wrote' &"
    outcome = run_command(
        script, tmp_path, 10, threading.Event(), limit_bytes=10_000, progress=progress
    )
    returned.set()
    assert outcome.returncode == 0 and not outcome.timed_out
    text = "".join(seen)
    assert "first" in text and "second" in text and "too-late" not in text
    if straggler:
        (tmp_path / "late").touch()
        wait_until((tmp_path / "wrote").exists, "the straggler to write")
        time.sleep(0.3)  # a grace period for a reader still attached to the pipe: it must not
        assert late == []
