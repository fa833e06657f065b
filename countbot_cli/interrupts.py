"""Ctrl-C held back while something must not be cut in half (a save, a memory write)."""

from __future__ import annotations

import signal
import threading
from collections.abc import Iterator
from contextlib import contextmanager


@contextmanager
def sigint_deferred() -> Iterator[None]:
    """Hold Ctrl-C for the duration of the block, then deliver it as KeyboardInterrupt.

    Only the main thread can install signal handlers; elsewhere the block runs unprotected.
    """
    if threading.current_thread() is not threading.main_thread():
        yield
        return
    pending: list[bool] = []
    try:
        previous = signal.signal(signal.SIGINT, lambda *_: pending.append(True))
    except ValueError:
        yield
        return
    try:
        yield
    finally:
        signal.signal(signal.SIGINT, previous)
        if pending:
            raise KeyboardInterrupt
