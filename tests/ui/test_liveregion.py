"""countbot_cli.ui.liveregion: the rows redrawn in place, checked on a VT100 emulator (pyte).

Every write goes to an emulated screen; what it shows is compared with what the region was told
to show, and the bytes of a frame tell what was rewritten.
"""

from __future__ import annotations

import io

import pyte
import pytest
from rich.console import Console
from rich.segment import Segment
from rich.style import Style
from rich.text import Text

from countbot_cli.ui.liveregion import LiveRegion
from countbot_cli.ui.status import HIDE_CURSOR, SHOW_CURSOR

WIDTH, HEIGHT = 40, 12


class Term:
    """A console and the emulated screen it writes to; `frames` holds each write's text."""

    def __init__(self, *, reflows: bool = True, no_color: bool = False) -> None:
        self.console = Console(
            file=io.StringIO(),
            width=WIDTH,
            height=HEIGHT,
            force_terminal=True,
            color_system="truecolor",
            no_color=no_color,
            legacy_windows=False,
        )
        self.screen = pyte.Screen(WIDTH, HEIGHT)
        self._vt = pyte.Stream(self.screen)
        self.frames: list[str] = []
        self.region = LiveRegion(self.console, write=self.write, reflows=reflows)

    def write(self, text: str) -> None:
        self.frames.append(text)
        self._vt.feed(text.replace("\n", "\r\n"))  # the tty's output processing (ONLCR)

    def rows(self) -> list[str]:
        lines = [line.rstrip() for line in self.screen.display]
        while lines and not lines[-1]:
            lines.pop()
        return lines

    def print(self, text: str) -> None:
        """Something printed before the region (the answer's earlier output)."""
        self.write(text + "\n")


def lines(*texts: str, style: Style | None = None) -> list[list[Segment]]:
    return [[Segment(t, style)] if t else [] for t in texts]


def test_draws_below_the_output_and_redraws_in_place() -> None:
    t = Term()
    t.print("earlier output")
    t.region.show(lines("one", "two"))
    assert t.rows() == ["earlier output", "one", "two"]
    assert t.frames[-1].startswith(HIDE_CURSOR)  # the cursor is hidden while the region is up
    t.region.show(lines("one", "two!", "three"))
    assert t.rows() == ["earlier output", "one", "two!", "three"]
    t.region.show(lines("1"))
    assert t.rows() == ["earlier output", "1"]  # a shorter region leaves nothing behind


def test_a_growing_last_line_is_the_only_line_rewritten() -> None:
    t = Term()
    first = [f"line {i}" for i in range(8)]
    t.region.show(lines(*first, "the last line gr"))
    t.region.show(lines(*first, "the last line grows"))
    frame = t.frames[-1]
    assert "the last line grows" in frame and not any(f in frame for f in first)
    t.region.show(lines(*first, "the last line grows", "a new line"))  # only appended
    assert t.frames[-1] == "\na new line"
    t.region.show(lines(*first, "the last line grows", "a new line"))  # nothing changed
    assert len(t.frames) == 3
    assert t.rows() == [*first, "the last line grows", "a new line"]


def test_text_printed_above_goes_before_the_region_in_one_write() -> None:
    t = Term()
    t.region.show(lines("tail a", "tail b"))
    writes = len(t.frames)
    t.region.show(lines("new tail"), above=lines("settled 1", "", "settled 2"))
    assert len(t.frames) == writes + 1
    assert t.rows() == ["settled 1", "", "settled 2", "new tail"]


def test_clear_erases_the_region_and_leaves_the_cursor_where_it_began() -> None:
    t = Term()
    t.print("kept")
    t.region.show(lines("a", "b", "c"))
    t.region.clear()
    assert t.frames[-1].endswith(SHOW_CURSOR)
    assert t.rows() == ["kept"]
    assert (t.screen.cursor.y, t.screen.cursor.x) == (1, 0)
    assert not t.region.active
    t.region.clear()  # nothing drawn: nothing written
    assert len(t.frames) == 3  # the print, the region, its erasing


def test_styles_are_written_as_rich_prints_them_without_colours_under_no_color() -> None:
    red_bold = Style(color="red", bold=True)
    for no_color in (False, True):
        t = Term(no_color=no_color)
        t.region.show(lines("hot", style=red_bold))
        t.console.file = io.StringIO()
        t.console.print(Text("hot", style=red_bold), end="")
        assert t.frames[-1].removeprefix(HIDE_CURSOR) == t.console.file.getvalue()  # type: ignore[attr-defined]
        assert ("31" in t.frames[-1]) is not no_color and "\x1b[1" in t.frames[-1]


def test_a_narrowed_reflowing_terminal_is_erased_over_the_rows_the_lines_took() -> None:
    t = Term(reflows=True)
    t.region.show(lines("x" * 30, "y" * 30, "short"))
    t.console.width = 20  # a re-wrapping terminal now shows them on 2 + 2 + 1 rows
    t.region.show(lines("z"))
    assert t.frames[-1].startswith("\r\x1b[4F\x1b[J")  # up to the first of the 5 rows
    cutting = Term(reflows=False)  # xterm cuts lines instead: still 3 rows
    cutting.region.show(lines("x" * 30, "y" * 30, "short"))
    cutting.console.width = 20
    cutting.region.show(lines("z"))
    assert cutting.frames[-1].startswith("\r\x1b[2F\x1b[J")
    assert cutting.rows() == ["z"]


def test_a_streamed_frame_asks_the_terminal_its_size_once(monkeypatch: pytest.MonkeyPatch) -> None:
    """A console whose size is not fixed asks the terminal (an ioctl) each time its size is
    read: a frame reads it once and draws with that (three times cost 7 % of the renderer's
    CPU on a pty)."""
    import os

    from countbot_cli.ui.stream import StreamView

    asked: list[int] = []

    def terminal_size(fd: int = 1) -> os.terminal_size:
        asked.append(fd)
        return os.terminal_size((WIDTH, HEIGHT))

    class Tty(io.StringIO):
        def isatty(self) -> bool:
            return True

    monkeypatch.setattr(os, "get_terminal_size", terminal_size)
    monkeypatch.setenv("TERM", "xterm-256color")  # a dumb terminal is 80x25 without asking
    for fixed in ("COLUMNS", "LINES"):  # either would fix the console's size
        monkeypatch.delenv(fixed, raising=False)
    console = Console(file=Tty(), force_terminal=True, color_system="truecolor")
    now = [0.0]
    view = StreamView(console, clock=lambda: now[0], max_fps=10.0)
    for i, char in enumerate("A paragraph that grows a letter at a time, " * 4):
        now[0] = i / 100
        view.feed(char)
    assert view.frames > 10
    assert len(asked) == view.frames
    view.finish()
