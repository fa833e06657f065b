"""Signals: SIGTERM and SIGHUP stop countbot the way Ctrl-C does, and all three are held back
while something must not be cut in half (a save, a memory write).

`stop_on_termination()` is the entry point's first step, so a signal at any moment of start-up
ends countbot with exit 130, as one during a turn does; a signal held around a save is raised
once the save is complete. This module is imported before the handler is in place, so it
imports only what the interpreter has already loaded and the error tree. docs/design/robustness.md
says more.
"""

from __future__ import annotations

import signal
import threading
from contextlib import contextmanager

from countbot_cli.errors import Terminated

TYPE_CHECKING = False  # typing.TYPE_CHECKING without importing typing (mypy knows the name)
if TYPE_CHECKING:
    from collections.abc import Callable, Iterator
    from typing import Any

_TERMINATING = ("SIGTERM", "SIGHUP")


def _stop(signum: int, frame: object) -> None:
    raise Terminated(signal.Signals(signum).name)


def stop_on_termination() -> None:
    """SIGTERM and SIGHUP (the terminal closed) raise `Terminated`, a KeyboardInterrupt: the
    turn in progress is saved (marked interrupted) instead of lost. Main thread only."""
    for name in _TERMINATING:
        sig = getattr(signal, name, None)
        if sig is not None:
            signal.signal(sig, _stop)


@contextmanager
def sigint_deferred() -> Iterator[None]:
    """Hold Ctrl-C, SIGTERM and SIGHUP for the duration of the block, then deliver them:
    `Terminated` for a termination (when `stop_on_termination` handles it), else
    KeyboardInterrupt. Only the main thread can install signal handlers; elsewhere the block
    runs unprotected."""
    if threading.current_thread() is not threading.main_thread():
        yield
        return
    pending: list[int] = []
    saved: dict[int, Callable[[int, Any], Any] | int | None] = {}

    def hold(signum: int, frame: object) -> None:
        pending.append(signum)

    try:
        saved[signal.SIGINT] = signal.signal(signal.SIGINT, hold)
        for name in _TERMINATING:
            sig = getattr(signal, name, None)
            if sig is not None and callable(signal.getsignal(sig)):
                saved[sig] = signal.signal(sig, hold)
    except ValueError:
        _restore(saved)
        yield
        return
    try:
        yield
    finally:
        _restore(saved)
        _deliver(pending, saved)


def _restore(saved: dict[int, Any]) -> None:
    for sig, previous in saved.items():
        signal.signal(sig, previous)


def _deliver(pending: list[int], saved: dict[int, Any]) -> None:
    """A held termination first (it stops the program), else a held Ctrl-C."""
    for sig in pending:
        if sig != signal.SIGINT and callable(saved.get(sig)):
            saved[sig](sig, None)
    if pending:
        raise KeyboardInterrupt
