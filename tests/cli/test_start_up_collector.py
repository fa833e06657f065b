"""The garbage collector while countbot starts (`__main__`, issue 25 point 2): off from the
start of `main`, so the objects start-up makes are not scanned over and over, and back on
START_UP_SECONDS later for whatever runs longer; a collector the caller turned off stays off."""

from __future__ import annotations

import gc
import subprocess
import sys

import pytest

from countbot_cli import __main__ as entry_point

CHILD = """
import gc, sys
from countbot_cli import __main__ as entry_point
entry_point.START_UP_SECONDS = 0.2
try:
    entry_point.main(["--help"])
except SystemExit:
    pass
print("after --help:", gc.isenabled(), file=sys.stderr)
for t in [t for t in __import__("threading").enumerate() if t.daemon]:
    t.join(10)  # a hang bound: the timer's 0.2 s
print("later:", gc.isenabled(), file=sys.stderr)
"""


def test_main_starts_with_the_collector_off_and_turns_it_on_later() -> None:
    proc = subprocess.run(
        [sys.executable, "-c", CHILD], capture_output=True, text=True, timeout=60, check=True
    )
    assert "Usage" in proc.stdout
    assert proc.stderr.splitlines() == ["after --help: False", "later: True"]


def test_a_collector_the_caller_turned_off_stays_off(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(entry_point, "START_UP_SECONDS", 0.01)
    gc.disable()
    try:
        entry_point.collector_off_while_starting().join(10)
        assert not gc.isenabled()
    finally:
        gc.enable()
