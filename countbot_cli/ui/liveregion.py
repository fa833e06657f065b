"""countbot's own live region: the rows at the bottom of the output that `StreamView` redraws
in place while an answer streams (the unsettled tail, or the reasoning line being written).

Each `show` draws pre-rendered lines in one write, printing text that settles above them into
the scrollback, and rewrites only from the first line that differs from what is on screen.
The cursor rests at the end of the last line, hidden while the region is up; `clear` erases
the region. On a width change the region is erased over the rows it occupies after the
terminal re-wrapped it. Escape sequences come from ui/status.py. Why not rich's `Live`, and
the figures: docs/design/rendering.md.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING, Any

from countbot_cli.ui.status import CLEAR_BELOW, HIDE_CURSOR, SHOW_CURSOR, rows_up

if TYPE_CHECKING:
    from rich.console import Console
    from rich.segment import Segment

    Line = list[Segment]


class LiveRegion:
    """The live rows below the printed output of one console; `write` sends text to its
    terminal (and flushes)."""

    def __init__(
        self, console: Console, *, write: Callable[[str], None], reflows: bool = True
    ) -> None:
        self._console = console
        self._write = write
        self._reflows = reflows
        self._lines: list[Line] = []  # what is on screen now
        self._lens: list[int] = []  # cells each drawn line takes
        self._width = 0  # the terminal's width when they were drawn
        self._up = False  # drawn at least once and not cleared (the cursor is hidden)
        self.bytes = 0  # characters written (for benchmarks)

    @property
    def active(self) -> bool:
        return self._up

    @property
    def lines(self) -> list[Line]:
        """The lines on screen now."""
        return list(self._lines)

    def show(
        self,
        lines: Sequence[Line],
        above: Sequence[Line] | None = None,
        *,
        size: tuple[int, int] | None = None,
    ) -> None:
        """Draw `lines` as the region; `above` is printed into the scrollback first. size: the
        terminal's (width, height) as the caller just asked it (each time a console is asked
        its size, it asks the terminal), else the console's."""
        width, height = self._console.size if size is None else size
        new = list(lines)
        if above or width != self._width:
            out = self._back_to_start(width, height)
            out += "".join(self._text(line) + "\n" for line in above or ())
            out += "\n".join(self._text(line) for line in new)
        else:
            out = self._changes(new)
        if not self._up:
            out = HIDE_CURSOR + out
            self._up = True
        self._lines, self._width = new, width
        self._lens = [_cells(line) for line in new]
        self._emit(out)

    def clear(self) -> None:
        """Erase the region; the cursor is at the start of its first row, shown again."""
        if not self._up:
            return
        out = self._back_to_start(*self._console.size) + SHOW_CURSOR
        self._lines, self._lens, self._up = [], [], False
        self._emit(out)

    def _changes(self, new: list[Line]) -> str:
        """The text that turns the drawn lines into `new`: from the first line that differs."""
        old = self._lines
        same = 0
        for a, b in zip(old, new, strict=False):
            if a != b:
                break
            same += 1
        if same == len(old) == len(new):
            return ""
        if same == len(old) and old:  # lines were added below: no erasing
            return "\n" + "\n".join(self._text(line) for line in new[same:])
        same = min(same, max(len(new) - 1, 0))  # rewrite at least the new last line
        up = max(len(old) - 1 - same, 0)
        return "\r" + rows_up(up) + CLEAR_BELOW + "\n".join(self._text(line) for line in new[same:])

    def _back_to_start(self, width: int, height: int) -> str:
        """Cursor to the start of the region's first row, everything below erased (the terminal
        is `width` x `height` now)."""
        if not self._lines:
            return "\r" + CLEAR_BELOW if self._up else ""
        rows = len(self._lens)
        if self._reflows and width != self._width and width > 0:
            rows = sum(max(1, -(-n // width)) for n in self._lens)
        rows = min(rows, max(height, 1))
        return "\r" + rows_up(rows - 1) + CLEAR_BELOW

    def _text(self, line: Line) -> str:
        """`line` as the terminal text rich's Console.print would write for it."""
        from rich.console import COLOR_SYSTEMS
        from rich.segment import Segment

        console = self._console
        system = COLOR_SYSTEMS.get(console.color_system or "")
        legacy = console.legacy_windows
        segments: Any = Segment.remove_color(line) if console.no_color else line
        parts = []
        for text, style, _control in segments:
            if style:
                parts.append(style.render(text, color_system=system, legacy_windows=legacy))
            else:
                parts.append(text)
        return "".join(parts)

    def _emit(self, text: str) -> None:
        if text:
            self.bytes += len(text)
            self._write(text)


def _cells(line: Line) -> int:
    from rich.segment import Segment

    return Segment.get_line_length(line)
