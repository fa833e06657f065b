"""The `countbot` command's exit (`__main__.entry`): once the command is done
it leaves without the interpreter's teardown, after the atexit handlers ran and the standard
streams were flushed, with the command's exit status; with a non-daemon thread still running it
takes the normal exit, which waits for that thread. Checked in a child interpreter by what it
leaves behind: an object's finaliser (teardown) and an atexit handler, each writing a line."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

CHILD = """
import atexit, os, sys, threading, time
from countbot_cli import __main__ as entry_point
fd = os.open(sys.argv[1], os.O_WRONLY | os.O_CREAT | os.O_APPEND)
def note(what, write=os.write, fd=fd):
    write(fd, (what + "\\n").encode())
class Witness:  # its finaliser runs when the interpreter tears the module down
    def __del__(self, note=note):
        note("teardown")
witness = Witness()
atexit.register(note, "atexit")
mode = sys.argv[2]
if mode == "thread":
    threading.Thread(target=lambda: (time.sleep(0.2), note("thread")), daemon=False).start()
sys.argv = ["countbot", *sys.argv[3:]]
if mode == "main":  # the control: main() and the interpreter's own exit
    entry_point.main()
entry_point.entry()
"""


def child(
    tmp_path: Path, thread: str, *args: str
) -> tuple[subprocess.CompletedProcess[str], list[str]]:
    log = tmp_path / "log"
    proc = subprocess.run(
        [sys.executable, "-c", CHILD, str(log), thread, *args],
        capture_output=True,
        text=True,
        timeout=60,
    )
    return proc, log.read_text().splitlines() if log.exists() else []


def test_the_command_leaves_after_its_atexit_handlers_without_the_teardown(tmp_path: Path) -> None:
    proc, log = child(tmp_path, "none", "--version")
    assert proc.returncode == 0
    assert proc.stdout.startswith("countbot ")  # a pipe: block-buffered, flushed before leaving
    assert log == ["atexit"]  # the handlers ran; the module teardown did not


def test_the_witness_sees_the_teardown_of_a_normal_exit(tmp_path: Path) -> None:
    proc, log = child(tmp_path, "main", "--version")
    assert proc.returncode == 0 and log == ["atexit", "teardown"]


def test_the_exit_status_is_the_commands(tmp_path: Path) -> None:
    proc, log = child(tmp_path, "none", "ask", "--no-such-flag", "x")
    assert proc.returncode == 2 and "--no-such-flag" in proc.stderr
    assert log == ["atexit"]


def test_a_running_non_daemon_thread_gets_the_normal_exit(tmp_path: Path) -> None:
    proc, log = child(tmp_path, "thread", "--version")
    assert proc.returncode == 0 and proc.stdout.startswith("countbot ")
    assert log[:2] == ["thread", "atexit"]  # waited for, then the handlers
