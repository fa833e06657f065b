"""The terminal, asked about in one place: whether a stream is one, its descriptor and width,
and the quiet mode while an answer streams (`QuietKeys`).

Only the standard library: importing this costs nothing at start-up (`termios`, POSIX only, is
imported when a terminal mode is changed). Every function takes any object: a stream that is
closed, replaced by a test double or has no descriptor is simply "not a terminal".
"""

from __future__ import annotations

import os
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

DEFAULT_COLUMNS = 100  # the width assumed when the stream is not a terminal


def isatty(stream: Any) -> bool:
    """Whether `stream` is a terminal (False for None, closed streams and test doubles)."""
    try:
        return bool(stream.isatty())
    except (AttributeError, ValueError):
        return False


def fileno(stream: Any) -> int | None:
    """The descriptor behind `stream`, or None when it has none (a StringIO, a closed file)."""
    try:
        return int(stream.fileno())
    except (AttributeError, OSError, ValueError):
        return None


def tty_fd(stream: Any) -> int | None:
    """The descriptor of `stream` when it is a POSIX terminal whose mode can be changed."""
    if os.name != "posix" or stream is None:
        return None
    try:
        return int(stream.fileno()) if stream.isatty() else None
    except (AttributeError, ValueError, OSError):
        return None


def columns(stream: Any, default: int = DEFAULT_COLUMNS) -> int:
    """The width of the terminal `stream` is on; `default` when it is not on one."""
    try:
        return os.get_terminal_size(stream.fileno()).columns
    except (AttributeError, ValueError, OSError):
        return default


class QuietKeys:
    """While an answer streams, keys typed ahead are not echoed into it (^C neither); they stay
    buffered for the next prompt, where a typed-ahead Enter submits. Ctrl-C still raises SIGINT
    (ISIG is kept). Does nothing unless `stream` is a POSIX terminal.

    `with QuietKeys(sys.stdin): ...` around the turn; `with keys.normal(): ...` around anything
    in the turn that reads from the terminal itself (the approval prompt)."""

    def __init__(self, stream: Any) -> None:
        self._fd = tty_fd(stream)
        self._saved: list[Any] | None = None
        self._quiet: list[Any] | None = None

    def __enter__(self) -> QuietKeys:
        if self._fd is None:
            return self
        import termios

        try:
            self._saved = termios.tcgetattr(self._fd)
            quiet = termios.tcgetattr(self._fd)
            quiet[0] &= ~termios.ICRNL  # Enter typed ahead stays "\r": it submits at the prompt
            quiet[3] &= ~(termios.ECHO | getattr(termios, "ECHOCTL", 0))
            termios.tcsetattr(self._fd, termios.TCSANOW, quiet)
            self._quiet = quiet
        except (termios.error, OSError):
            self._saved = None
        return self

    def __exit__(self, *exc: object) -> None:
        self._set(self._saved)
        self._saved = self._quiet = None

    @contextmanager
    def normal(self) -> Iterator[None]:
        """The terminal's usual mode for a while (echo on, Enter ends a line)."""
        self._set(self._saved)
        try:
            yield
        finally:
            self._set(self._quiet)

    def _set(self, attrs: list[Any] | None) -> None:
        if self._fd is None or attrs is None:
            return
        import termios

        try:
            termios.tcsetattr(self._fd, termios.TCSANOW, attrs)
        except (termios.error, OSError):
            pass
