"""Timing helpers shared by the bench scripts (no countbot import: a bench may run an older
checkout's package with this checkout's scripts)."""

from __future__ import annotations

import statistics
import time
from collections.abc import Callable


def median_of(runs: int, fn: Callable[[], object]) -> float:
    """The median wall time of `runs` calls of `fn`, in seconds."""
    times = []
    for _ in range(runs):
        t0 = time.perf_counter()
        fn()
        times.append(time.perf_counter() - t0)
    return statistics.median(times)
