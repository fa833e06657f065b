"""A process's descendants and a process group's members, read from /proc (Linux), and
ending the ones still alive later.

An MCP server is started in its own session and stopped with its process group, but a child
that called `setsid` left that group and would outlive countbot. And the SDK stops the group
only when the server itself does not exit: a server that crashed leaves the rest of its group
running, so what is left of it (`group`) is ended after its transport has closed. Its parent link still leads
to the server while the server runs, so the server's whole tree is read just before it is
stopped, and whatever of it is still alive afterwards is ended (SIGTERM, a short grace,
SIGKILL). Each process is known by (pid, start time), so a pid reused meanwhile by an
unrelated process is never signalled. The SDK keeps the server's process to itself: it is
found as this process's child whose environment holds `MARK` with the value countbot gave it
(`child_marked`). What escaped before (a daemon whose parent already
exited, reparented to init) cannot be found this way; other platforms read nothing here.
"""

from __future__ import annotations

import os
import signal
import time
from collections.abc import Iterable
from typing import NamedTuple

Proc = tuple[int, int]  # (pid, start time in clock ticks since boot)
MARK = "COUNTBOT_MCP_SERVER"  # in a server's environment: which child of countbot it is
GRACE = 0.5  # seconds between SIGTERM and SIGKILL


class _Stat(NamedTuple):
    parent: int
    group: int
    start: int
    state: str


def _stat(pid: int) -> _Stat | None:
    """`pid`'s parent, process group, start time and state, or None when it is gone or
    unreadable."""
    try:
        with open(f"/proc/{pid}/stat", "rb") as f:
            text = f.read().decode("ascii", "replace")
    except OSError:
        return None
    fields = text.rsplit(")", 1)[-1].split()  # after the command name, which may hold spaces
    try:
        return _Stat(int(fields[1]), int(fields[2]), int(fields[19]), fields[0])
    except (IndexError, ValueError):
        return None


def _living() -> list[tuple[int, _Stat]]:
    """Every process that runs (not a zombie), with its stat."""
    try:
        names = os.listdir("/proc")
    except OSError:
        return []
    out: list[tuple[int, _Stat]] = []
    for name in names:
        if name.isdigit():
            st = _stat(int(name))
            if st is not None and st.state != "Z":
                out.append((int(name), st))
    return out


def child_marked(value: str) -> int | None:
    """The pid of this process's living child whose environment holds `MARK=value` (put there
    when another library was asked to start it), or None."""
    needle = f"{MARK}={value}".encode()
    for pid, st in _living():
        if st.parent == os.getpid():
            try:
                with open(f"/proc/{pid}/environ", "rb") as f:
                    if needle in f.read().split(b"\0"):
                        return pid
            except OSError:  # gone meanwhile
                continue
    return None


def identity(pid: int) -> Proc | None:
    """(pid, start time) of a running process, to know it again later; None when it is gone."""
    st = _stat(pid)
    return (pid, st.start) if st is not None and st.state != "Z" else None


def group(leader: Proc) -> list[Proc]:
    """Every living member of the process group `leader` leads (the leader may be gone, its
    members still in the group); none when its pid now leads another group (reused)."""
    living = _living()
    pgid, start = leader
    if any(pid == pgid and st.start != start for pid, st in living):
        return []
    return [(pid, st.start) for pid, st in living if st.group == pgid]


def descendants(pid: int) -> list[Proc]:
    """Every living descendant of `pid` (children, theirs, ...), whatever their session."""
    children: dict[int, list[Proc]] = {}
    for living, st in _living():
        children.setdefault(st.parent, []).append((living, st.start))
    out: list[Proc] = []
    todo = [pid]
    while todo:
        for child in children.get(todo.pop(), []):
            out.append(child)
            todo.append(child[0])
    return out


def _alive(proc: Proc) -> bool:
    st = _stat(proc[0])
    return st is not None and st.start == proc[1] and st.state != "Z"


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
