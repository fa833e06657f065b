"""Is a process still running, and waiting for it to end: for the tests that check a child
(a shell, an MCP server, the local model) does not outlive what started it. Linux's /proc
tells a zombie (ended, not yet reaped) from a running process."""

from __future__ import annotations

import fcntl
import os
import sys
import termios
from pathlib import Path

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
