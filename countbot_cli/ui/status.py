"""The one writer of dim status text on a terminal, the styles countbot writes without rich,
and the one NO_COLOR policy they follow.

The status line, notices, spinner, banner, live tail, the live region's cursor moves and the
approval prompt's palette all take their escape sequences from here; no other module writes
`ESC [` by hand. The policy (https://no-color.org): `NO_COLOR` set and not empty means no
colour; dim, bold and reverse video stay. Callers write here only when their stream is a
terminal. docs/design/rendering.md says more.
"""

from __future__ import annotations

import os
from typing import IO

DIM = "\x1b[2m"
BOLD = "\x1b[1m"
REVERSE, NO_REVERSE = "\x1b[7m", "\x1b[27m"
RED, GREEN, YELLOW, CYAN = "\x1b[31m", "\x1b[32m", "\x1b[33m", "\x1b[36m"
COLOURS = (RED, GREEN, YELLOW, CYAN)
RESET = "\x1b[0m"
CLEAR_LINE = "\r\x1b[2K"  # back to the line's start and erase it
CLEAR_BELOW = "\x1b[J"  # erase from the cursor to the end of the screen
HIDE_CURSOR, SHOW_CURSOR = "\x1b[?25l", "\x1b[?25h"  # while the answer's live region is up


def colour_on() -> bool:
    """False when `NO_COLOR` is set and not empty: no colour (dim and bold are not colours)."""
    return not os.environ.get("NO_COLOR")


def dim(text: str) -> str:
    """`text` dimmed (the same under `NO_COLOR`: see the module's policy)."""
    return f"{DIM}{text}{RESET}"


def paint(style: str, text: str) -> str:
    """`text` in `style` (concatenated codes above), the colours left out under `NO_COLOR`."""
    if not colour_on():
        for colour in COLOURS:
            style = style.replace(colour, "")
    return f"{style}{text}{RESET}" if style else text


def rows_up(n: int) -> str:
    """Move the cursor to the start of the line `n` rows up (nothing for 0)."""
    return f"\x1b[{n}F" if n > 0 else ""


class StatusLine:
    """One dim line on `stream` that the next output replaces: `show` draws (or redraws) it,
    `clear` erases it, `line` writes a dim line that stays. Write errors (the terminal went
    away) are ignored when `quiet_errors`, as a background redraw must never raise."""

    def __init__(self, stream: IO[str], *, quiet_errors: bool = False) -> None:
        self.stream = stream
        self.shown = False
        self._quiet_errors = quiet_errors

    def show(self, text: str) -> None:
        self._write(f"{CLEAR_LINE}{dim(text)}")
        self.shown = True

    def clear(self) -> None:
        if self.shown:
            self._write(CLEAR_LINE)
            self.shown = False

    def line(self, text: str) -> None:
        self.clear()
        self._write(dim(text) + "\n")

    def _write(self, text: str) -> None:
        try:
            self.stream.write(text)
            self.stream.flush()
        except (OSError, ValueError):
            if not self._quiet_errors:
                raise
