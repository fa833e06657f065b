"""Waiting on a condition instead of sleeping a fixed time: on a loaded machine (two cores,
several xdist workers) a fixed sleep is either too short and flaky or long and slow.

`wait_until(check, what)` polls `check` until it returns something truthy and returns that; after
`timeout` seconds (a hang bound, never a speed claim) it fails the test saying `what` it waited
for. `returns_within(call, what)` runs a call that must not hang (a server's stop, a command
run in process) in a thread, fails the test if it has not returned after `timeout` seconds,
and returns what it returned. A subprocess gets its hang bound from `subprocess.run(…,
timeout=)`, never from comparing `time.monotonic()` after it.
"""

from __future__ import annotations

import threading
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


def returns_within(call: Callable[[], T], what: str, timeout: float = 10) -> T:
    """Run `call` in a thread and return what it returned; AssertionError naming `what` if it
    is still running after `timeout` s (a hang bound). An exception it raised is raised here."""
    raised: list[BaseException] = []
    returned: list[T] = []

    def run() -> None:
        try:
            returned.append(call())
        except BaseException as exc:  # noqa: BLE001 - handed to the test's thread
            raised.append(exc)

    worker = threading.Thread(target=run, name=f"returns-within: {what}", daemon=True)
    worker.start()
    worker.join(timeout)
    if worker.is_alive():
        raise AssertionError(f"{what} did not return within {timeout} s")
    if raised:
        raise raised[0]
    return returned[0]
