"""The live tail of a running command: its last few output lines, redrawn in place on a
terminal while it runs and erased when it ends.

Fed from the tool context's `progress` callback by a view that has a terminal. The output is
untrusted: each line is sanitised, a carriage return keeps what was drawn after it, and a line
is cut to the width so it never wraps. At most ROWS lines, a line without an end kept to
MAX_PARTIAL characters: a command printing megabytes costs a few redraws.
"""

from __future__ import annotations

import threading
import time
from collections import deque
from typing import IO

from countbot_cli.textsafe import cells, sanitize_line
from countbot_cli.ui.status import CLEAR_BELOW, CLEAR_LINE, dim, rows_up
from countbot_cli.ui.terminal import columns

ROWS = 5  # lines of output shown at most
MAX_PARTIAL = 4096  # characters of an unfinished line kept
REDRAW_EVERY = 0.05  # seconds between redraws at most
PREFIX = "  │ "


class LiveTail:
    """Feed it output (any thread); it redraws the last ROWS lines below the cursor on `out`."""

    def __init__(self, out: IO[str], *, rows: int = ROWS) -> None:
        self._out = out
        self._lines: deque[str] = deque(maxlen=rows)
        self._partial = ""
        self._drawn = 0  # rows on screen now
        self._last = 0.0
        self._lock = threading.Lock()

    def feed(self, text: str) -> None:
        with self._lock:
            *done, self._partial = (self._partial + text).split("\n")
            self._lines.extend(done)
            self._partial = self._partial[-MAX_PARTIAL:]
            now = time.monotonic()
            if now - self._last >= REDRAW_EVERY:
                self._last = now
                self._draw()

    def erase(self) -> None:
        """Remove the tail from the screen (the command ended); the cursor is back where the
        tail began."""
        with self._lock:
            if self._drawn:
                self._write(rows_up(self._drawn) + CLEAR_BELOW)
                self._drawn = 0

    def shown(self) -> list[str]:
        """The lines the tail shows now (sanitised, not cut to a width)."""
        lines = [*self._lines, self._partial] if self._partial else list(self._lines)
        return [_clean(line) for line in lines][-(self._lines.maxlen or ROWS) :]

    def _draw(self) -> None:
        width = max(columns(self._out) - cells(PREFIX) - 1, 10)
        rows = "".join(f"{CLEAR_LINE}{dim(PREFIX + _cut(line, width))}\n" for line in self.shown())
        self._write(f"{rows_up(self._drawn)}{rows}{CLEAR_BELOW}")
        self._drawn = len(self.shown())

    def _write(self, text: str) -> None:
        try:
            self._out.write(text)
            self._out.flush()
        except (OSError, ValueError):
            pass  # the terminal went away; the command's result still reaches the model


def _clean(line: str) -> str:
    """What a terminal would show of `line`: the text after its last carriage return (or
    before, when nothing followed it), sanitised."""
    parts = [p for p in line.split("\r") if p.strip()]
    return sanitize_line(parts[-1]) if parts else ""


def _cut(line: str, width: int) -> str:
    if cells(line) <= width:
        return line
    out, used = [], 0
    for c in line:
        used += cells(c)
        if used > width - 1:
            break
        out.append(c)
    return "".join(out) + "…"
