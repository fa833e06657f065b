"""The garbage collector while countbot starts (`__main__`): off from the
start of `main`, so the objects start-up makes are not scanned over and over, and back on
START_UP_SECONDS later for whatever runs longer, what start-up made frozen (never scanned
again); a collector the caller turned off stays off."""

from __future__ import annotations

import gc
import subprocess
import sys
import threading

import pytest

from countbot_cli import __main__ as entry_point

CHILD = """
import gc, sys, threading
from countbot_cli import __main__ as entry_point
entry_point.START_UP_SECONDS = float(sys.argv[1])
try:
    entry_point.main(["--help"])
except SystemExit:
    pass
print("after --help:", gc.isenabled(), file=sys.stderr)
for t in [t for t in threading.enumerate() if t.daemon]:
    t.join(float(sys.argv[2]))  # a hang bound
print("later:", gc.isenabled(), file=sys.stderr)
print("frozen:", gc.get_freeze_count() > 1000, file=sys.stderr)
"""


def _child(start_up: float, wait: float) -> list[str]:
    proc = subprocess.run(
        [sys.executable, "-c", CHILD, str(start_up), str(wait)],
        capture_output=True,
        text=True,
        timeout=60,
        check=True,
    )
    assert "Usage" in proc.stdout
    return proc.stderr.splitlines()


def test_main_runs_with_the_collector_off() -> None:
    assert _child(3600, 0.01) == ["after --help: False", "later: False", "frozen: False"]


def test_the_collector_comes_back_on_after_start_up_over_new_objects_only() -> None:
    assert _child(0, 30)[-2:] == ["later: True", "frozen: True"]  # start-up's are not scanned


def test_a_collector_the_caller_turned_off_stays_off(monkeypatch: pytest.MonkeyPatch) -> None:
    for timer in threading.enumerate():  # an earlier test's in-process main() turns it on later
        if isinstance(timer, threading.Timer) and timer.function is entry_point._collector_on:
            timer.join(10)  # a hang bound
    monkeypatch.setattr(entry_point, "START_UP_SECONDS", 0)
    gc.disable()
    try:
        entry_point.collector_off_while_starting().join(10)
        assert not gc.isenabled()
    finally:
        gc.enable()
