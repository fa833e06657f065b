"""A process's descendants, read from /proc (Linux), and ending the ones still alive later.

An MCP server is started in its own session and stopped with its process group, but a child
that called `setsid` left that group and would outlive countbot. Its parent link still leads
to the server while the server runs, so the server's whole tree is read just before it is
stopped, and whatever of it is still alive afterwards is ended (SIGTERM, a short grace,
SIGKILL). Each process is known by (pid, start time), so a pid reused meanwhile by an
unrelated process is never signalled. What escaped before (a daemon whose parent already
exited, reparented to init) cannot be found this way; other platforms read nothing here.
"""

from __future__ import annotations

import os
import signal
import time
from collections.abc import Iterable

Proc = tuple[int, int]  # (pid, start time in clock ticks since boot)
GRACE = 0.5  # seconds between SIGTERM and SIGKILL


def _stat(pid: int) -> tuple[int, int, str] | None:
    """(parent pid, start time, state) of `pid`, or None when it is gone or unreadable."""
    try:
        with open(f"/proc/{pid}/stat", "rb") as f:
            text = f.read().decode("ascii", "replace")
    except OSError:
        return None
    fields = text.rsplit(")", 1)[-1].split()  # after the command name, which may hold spaces
    try:
        return int(fields[1]), int(fields[19]), fields[0]
    except (IndexError, ValueError):
        return None


def descendants(pid: int) -> list[Proc]:
    """Every living descendant of `pid` (children, theirs, ...), whatever their session."""
    try:
        names = os.listdir("/proc")
    except OSError:
        return []
    children: dict[int, list[Proc]] = {}
    for name in names:
        if name.isdigit():
            st = _stat(int(name))
            if st is not None and st[2] != "Z":
                children.setdefault(st[0], []).append((int(name), st[1]))
    out: list[Proc] = []
    todo = [pid]
    while todo:
        for child in children.get(todo.pop(), []):
            out.append(child)
            todo.append(child[0])
    return out


def _alive(proc: Proc) -> bool:
    st = _stat(proc[0])
    return st is not None and st[1] == proc[1] and st[2] != "Z"


def end(procs: Iterable[Proc], grace: float = GRACE) -> list[Proc]:
    """SIGTERM the ones still alive (the same start time), SIGKILL what is left after `grace`.
    Returns those that were still alive."""
    left = [p for p in procs if _alive(p)]
    for sig in (signal.SIGTERM, signal.SIGKILL):
        for pid, _ in [p for p in left if _alive(p)]:
            try:
                os.kill(pid, sig)
            except OSError:  # gone meanwhile, or not ours to signal
                pass
        deadline = time.monotonic() + grace
        while sig == signal.SIGTERM and any(_alive(p) for p in left):
            if time.monotonic() > deadline:
                break
            time.sleep(0.02)
    return left
