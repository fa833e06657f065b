"""Is a process still running, and waiting for it to end: for the tests that check a child
(a shell, an MCP server, the local model) does not outlive what started it. Linux's /proc
tells a zombie (ended, not yet reaped) from a running process. `run_measured` runs a command
under an address-space cap and reports its exit code, wall time and peak RSS (peak_rss.py)."""

from __future__ import annotations

import fcntl
import os
import signal
import subprocess
import sys
import tempfile
import termios
import time
from collections.abc import Sequence
from pathlib import Path
from typing import NamedTuple

from waits import wait_until


def alive(pid: int) -> bool:
    """Whether `pid` runs (a zombie does not)."""
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        pass  # someone else's process: it exists
    try:
        state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
    except (FileNotFoundError, ProcessLookupError, IndexError):
        return False
    return state not in ("Z", "X")


def wait_gone(*pids: int, within: float = 5.0) -> None:
    """Wait until none of `pids` runs; fails the test naming those still running after
    `within` seconds (a hang bound)."""
    wait_until(lambda: not any(alive(p) for p in pids), f"{pids} to end", within)


def unread_input(pid: int) -> int:
    """How many bytes wait unread in the pipes `pid` reads from (a request sent to a server
    that has not read it, e.g. one stopped with SIGSTOP)."""
    total = 0
    for link in Path(f"/proc/{pid}/fd").iterdir():
        try:
            if not os.readlink(link).startswith("pipe:") or os.lstat(link).st_mode & 0o200:
                continue
            fd = os.open(link, os.O_RDONLY | os.O_NONBLOCK)
        except OSError:
            continue  # closed meanwhile
        try:
            count = fcntl.ioctl(fd, termios.FIONREAD, b"\0\0\0\0")
            total += int.from_bytes(count, sys.byteorder)
        finally:
            os.close(fd)
    return total


class Measured(NamedTuple):
    returncode: int
    stdout: str
    stderr: str
    seconds: float
    peak_mib: float  # the process's own peak resident memory


PEAK_RSS = Path(__file__).resolve().parent / "peak_rss.py"


def run_measured(
    argv: Sequence[str],
    *,
    env: dict[str, str],
    cwd: Path,
    timeout: float,
    cap_mib: int = 1024,
) -> Measured:
    """Run `argv` (stdin closed) with its address space capped at `cap_mib` MiB, so a runaway
    read fails fast instead of taking the machine's memory (peak_rss.py); fails the test naming
    the command when it has not ended after `timeout` seconds (a hang bound; its process group
    is killed)."""
    with tempfile.TemporaryDirectory() as folder:
        report = Path(folder) / "peak"
        start = time.monotonic()
        proc = subprocess.Popen(
            [sys.executable, str(PEAK_RSS), str(cap_mib << 20), str(report), *argv],
            stdin=subprocess.DEVNULL,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            env=env,
            cwd=cwd,
            start_new_session=True,
        )
        try:
            out, err = proc.communicate(timeout=timeout)
        except subprocess.TimeoutExpired:
            os.killpg(proc.pid, signal.SIGKILL)
            proc.communicate()
            raise AssertionError(f"waited {timeout} s for {' '.join(argv[1:3])} to end") from None
        seconds = time.monotonic() - start
        return Measured(
            proc.returncode,
            out.decode("utf-8", "replace"),
            err.decode("utf-8", "replace"),
            seconds,
            int(report.read_text(encoding="utf-8")) / 1024,  # KiB on Linux
        )


def children(pid: int) -> list[int]:
    """The processes `pid` started, from any of its threads (a child a thread started is listed
    under that thread)."""
    out: list[int] = []
    for task in Path(f"/proc/{pid}/task").iterdir():
        try:
            out += [int(c) for c in (task / "children").read_text().split()]
        except OSError:
            pass  # the thread ended meanwhile
    return out
