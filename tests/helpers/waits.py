"""Waiting on a condition instead of sleeping a fixed time: on a loaded machine (two cores,
several xdist workers) a fixed sleep is either too short and flaky or long and slow.

`wait_until(check, what)` polls `check` until it returns something truthy and returns that; after
`timeout` seconds (a hang bound, never a speed claim) it fails the test saying `what` it waited
for.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from pathlib import Path
from typing import TypeVar

T = TypeVar("T")


def wait_until(check: Callable[[], T], what: str, timeout: float = 10, every: float = 0.01) -> T:
    """The first truthy value of `check()`; AssertionError naming `what` after `timeout` s."""
    deadline = time.monotonic() + timeout
    while True:
        value = check()
        if value:
            return value
        if time.monotonic() > deadline:
            raise AssertionError(f"waited {timeout} s for {what}")
        time.sleep(every)


def file_text(path: Path, timeout: float = 10) -> str:
    """The stripped text of `path` once it exists and is not empty (a pid file, a flag)."""

    def read() -> str:
        try:
            return path.read_text(encoding="utf-8").strip()
        except FileNotFoundError:
            return ""

    return wait_until(read, f"{path.name} to be written", timeout)
