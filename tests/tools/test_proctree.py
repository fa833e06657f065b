"""tools/proctree.py: descendants across sessions, a group without its leader, and a reused pid
never signalled."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from countbot_cli.tools import proctree

pytestmark = pytest.mark.skipif(not Path("/proc/self/stat").exists(), reason="needs /proc")


def test_descendants_include_a_child_in_its_own_session_and_end_checks_the_start_time() -> None:
    code = "import subprocess, sys; p = subprocess.Popen(['sleep', '60'], start_new_session=True); print(p.pid, flush=True); sys.stdin.read()"
    parent = subprocess.Popen(
        [sys.executable, "-c", code], stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True
    )
    try:
        assert parent.stdout is not None
        child = int(parent.stdout.readline())
        found = proctree.descendants(parent.pid)
        assert [pid for pid, _ in found] == [child]
        pid, started = found[0]
        assert proctree.end([(pid, started + 1)]) == []  # another process under that pid: spared
        os.kill(child, 0)  # still alive
        assert proctree.end(found) == found
        assert proctree.descendants(parent.pid) == []
    finally:
        parent.kill()
        parent.wait()


def test_a_group_outlives_its_leader_and_a_reused_leader_pid_spares_it() -> None:
    code = (
        "import subprocess, sys; p = subprocess.Popen(['sleep', '60']); print(p.pid, flush=True);"
        " sys.stdin.read()"  # the leader stays until told to go
    )
    leader = subprocess.Popen(
        [sys.executable, "-c", code],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        text=True,
        start_new_session=True,
    )
    assert leader.stdin is not None and leader.stdout is not None
    me = proctree.identity(leader.pid)
    child = int(leader.stdout.readline())
    try:
        assert me is not None and [pid for pid, _ in proctree.group(me)] == [leader.pid, child]
        leader.stdin.close()
        leader.wait()  # the leader has exited: its child is still in its group
        assert [pid for pid, _ in proctree.group(me)] == [child]
        own = proctree.identity(os.getpid())  # a pid now another process: not its group
        assert own is not None and proctree.group((os.getpid(), own[1] + 1)) == []
        found = proctree.group(me)
        assert proctree.end(found) == found and proctree.group(me) == []
    finally:
        if proctree.identity(child) is not None:
            os.kill(child, 9)
