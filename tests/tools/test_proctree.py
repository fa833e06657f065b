"""tools/proctree.py: descendants across sessions, and a reused pid never signalled."""

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
