"""The look of a streamed answer, cell for cell: what StreamView draws is what rich draws.

gen_doc's 2,000-token answer (the one `bench/bench_render.py --pty` streams) is fed token by
token at 100 tokens/s on a simulated clock to a 100x40 truecolor terminal, and every byte is
replayed in a VT100 emulator (pyte). The oracle is rich itself, not countbot's code: the
emulated screen of `Console.print(Markdown(text))`. Cells are compared with their attributes
(character, colours, bold, italics, underline, strike, reverse); a space that shows nothing (no
background, underline, strike or reverse) counts as empty, since the renderer drops invisible
padding at line ends.

- After the answer, the whole output equals rich's one-shot render of the whole answer.
- After every frame (a feed's, or the stall waiter's before the next token), what the user
  sees, the rows from the top of the screen down to the live region's last row (at most the
  region's height, `height - 2`, when a block is taller than the terminal), equals the last rows
  of rich's render of the text that has arrived; while a table is being written, of its
  complete lines (a table grows a whole row at a time).
"""

from __future__ import annotations

import io
from pathlib import Path

import gen_doc
import pyte
import pytest
from markdown_it import MarkdownIt
from rich.console import Console
from rich.markdown import Markdown

from countbot_cli.ui.stream import StreamView

ROOT = Path(__file__).resolve().parents[2]

Cell = tuple[object, ...]
Row = tuple[Cell, ...]
EMPTY: Cell = (" ",)


class Clock:
    """The simulated clock: set by the test before each token."""

    def __init__(self) -> None:
        self.now = 0.0

    def __call__(self) -> float:
        return self.now


def terminal(width: int, height: int) -> Console:
    return Console(
        file=io.StringIO(),
        width=width,
        height=height,
        force_terminal=True,
        color_system="truecolor",
        legacy_windows=False,
    )


def cell(char: pyte.screens.Char) -> Cell:
    """A cell as the user sees it: a space without a visible attribute is empty."""
    shows = char.bg != "default" or char.reverse or char.underscore or char.strikethrough
    if char.data == " " and not shows:
        return EMPTY
    return (
        char.data,
        char.fg,
        char.bg,
        char.bold,
        char.italics,
        char.underscore,
        char.strikethrough,
        char.reverse,
    )


def rows_of(screen: pyte.Screen, upto: int) -> list[Row]:
    """Rows 0..upto of the screen, cell by cell."""
    return [
        tuple(cell(screen.buffer[y][x]) for x in range(screen.columns)) for y in range(upto + 1)
    ]


def blank(row: Row) -> bool:
    return all(c == EMPTY for c in row)


def one_shot(text: str, width: int) -> list[Row]:
    """rich's own render of `text` as markdown, replayed: its rows down to its last line."""
    c = terminal(width, 40)
    c.print(Markdown(text))
    raw = c.file.getvalue()  # type: ignore[attr-defined]
    scr = pyte.Screen(width, raw.count("\n") + 2)
    pyte.Stream(scr).feed(raw.replace("\n", "\r\n"))
    rows = rows_of(scr, scr.cursor.y)
    while rows and blank(rows[-1]):
        rows.pop()
    return rows


def visible(screen: pyte.Screen, region: int) -> list[Row]:
    """The rows from the top of the screen down to its last row that is not blank, of which
    those that can belong to the live region: it ends at the cursor's row and is at most
    `region` rows tall (an older row above a cropped region shows what was there before)."""
    rows = rows_of(screen, screen.cursor.y)
    below = len(rows)
    while rows and blank(rows[-1]):
        rows.pop()
    return rows[-max(0, region - (below - len(rows))) :]


def in_table(text: str) -> bool:
    """Whether the last top-level block of `text`'s complete lines is a table."""
    parsed = (
        MarkdownIt().enable("strikethrough").enable("table").parse(text[: text.rfind("\n") + 1])
    )
    blocks = [t.type for t in parsed if t.level == 0 and t.nesting >= 0]
    return bool(blocks) and blocks[-1] == "table_open"


@pytest.fixture(autouse=True)
def frames_on_the_fake_clock(monkeypatch: pytest.MonkeyPatch) -> None:
    """StreamView spaces frames by 4 x a frame's real cost when that is above the frame rate's
    gap (ui/stream.py); here frames follow the test's clock only, so a loaded machine (the whole
    suite at once) checks as many frames as a quiet one: under `make check` a test once checked
    32 frames where it needs 40, and checks 60-70 alone."""
    import time
    import types

    from countbot_cli.ui import stream

    fixed = types.SimpleNamespace(perf_counter=lambda: 0.0, monotonic=time.monotonic)
    monkeypatch.setattr(stream, "time", fixed)


def stream_doc(
    text: str,
    width: int,
    height: int,
    check_every: int,
    *,
    tokens: list[str] | None = None,
    least: int = 20,
    resize: tuple[int, int] | None = None,
) -> None:
    """Stream `text` token by token (`tokens`, else cl100k's); check every `check_every`-th
    frame (at least `least` are checked) and the end. resize: (i, w) makes the terminal `w`
    columns wide before the i-th token; from then on what is written is replayed on a screen of
    that width (on a real terminal the rows above stay as they were drawn)."""
    c = terminal(width, height)
    view = StreamView(c, clock=(clock := Clock()), max_fps=10.0, reflows=False)
    live = pyte.Screen(width, height)  # what the user sees, scrolled as a terminal scrolls
    vt, done, fed, frames, checked, since = pyte.Stream(live), 0, "", 0, 0, 0
    for i, token in enumerate(gen_doc.token_chunks(text) if tokens is None else tokens):
        if resize is not None and i == resize[0]:
            c.width = width = resize[1]
            live = pyte.Screen(width, height)
            vt, done = pyte.Stream(live), len(c.file.getvalue())  # type: ignore[attr-defined]
            since = done
        clock.now = i / 100
        view.feed(token)
        fed += token
        if view.due_in() == 0:  # the stall waiter's frame (ui/turnview.py), before the next token
            view.refresh()
        if view.frames == frames:
            continue
        frames = view.frames
        raw = c.file.getvalue()  # type: ignore[attr-defined]
        vt.feed(raw[done:].replace("\n", "\r\n"))
        done = len(raw)
        if frames % check_every:
            continue
        got, want = visible(live, height - 2), one_shot(fed, width)
        if got != want[-len(got) :] and in_table(fed):  # a table shows its complete rows
            want = one_shot(fed[: fed.rfind("\n") + 1], width)
        assert got == want[-len(got) :] if got else not want, f"frame {frames}: {fed[-60:]!r}"
        checked += bool(got)
    view.finish()
    assert checked >= least
    raw = c.file.getvalue()[since:]  # type: ignore[attr-defined]
    whole = pyte.Screen(width, raw.count("\n") + height)
    pyte.Stream(whole).feed(raw.replace("\n", "\r\n"))
    got = rows_of(whole, whole.cursor.y)
    while got and blank(got[-1]):
        got.pop()
    assert got == one_shot(text, width)[-len(got) :] if resize else got == one_shot(text, width)


def test_gen_doc_answer_looks_as_rich_draws_it_during_and_after_the_stream() -> None:
    text = gen_doc.make_doc(2000, 1, gen_doc.token_counter())
    stream_doc(text, 100, 40, check_every=1)


@pytest.mark.parametrize("seed", [3, 11])
def test_other_answers_in_a_small_terminal_look_as_rich_draws_them(seed: int) -> None:
    text = gen_doc.make_doc(1200, seed, gen_doc.token_counter())
    stream_doc(text, 80, 14, check_every=3)


# Frames render through a memo of what the frame before rendered (ui/rendermemo.py): inline
# parses by their text, the render of a paragraph's or cell's Text by the Text and the options
# (width) it is rendered with. Each answer below changes what such a piece renders to while its
# text stays the same, so a memo keyed on less than it depends on shows a stale frame.

FITS = "alpha beta gamma delta epsilon zetaxx"  # 37 cells: one row at 37 columns, two at 36


def test_items_whose_width_changes_look_as_rich_draws_them() -> None:
    """At 40 columns: the ninth item makes the numbers two digits wide (rich reserves the width
    of the last number + 1), so the eight items above rewrap; a nested item has the text of the
    item above but three columns less; an item's line continues after a partial line; the list
    turns loose when a blank line comes between two items."""
    numbered = "".join(f"{i}. {FITS}\n" for i in range(1, 12))
    nested = f"- {FITS}\n  - {FITS}\n- short\n\n- loose now, {FITS}\n"
    text = f"Intro.\n\n{numbered}\nBetween.\n\n{nested}\nAfter.\n"
    stream_doc(text, 40, 30, check_every=1, tokens=list(text), least=40)


def test_a_link_reference_defined_after_its_use_looks_as_rich_draws_it() -> None:
    """The definition arrives after the item that uses it: the item's text parses again (a
    memo of inline parses by their text would keep "[the docs]" as it first parsed)."""
    text = "- see [the docs] for more\n- more\n\n[the docs]: https://example.com/docs\n\nAfter.\n"
    stream_doc(text, 40, 20, check_every=1, tokens=list(text), least=5)


def test_a_bullet_list_taller_than_the_terminal_looks_as_rich_draws_it() -> None:
    """A bullet list's items settle one by one as the next one starts (ui/mdblocks.py): each
    frame draws the last item only, below the items printed, which are what rich draws."""
    items = [
        f"- item {i}: {FITS} {FITS}\n"
        + ("\n" if i % 3 == 0 else "")
        + (f"  - sub {i}\n\n    ```py\n    x = {i}\n    ```\n" if i % 4 == 0 else "")
        for i in range(14)
    ]
    text = "Steps:\n\n" + "".join(items) + "* a new list\n\nDone.\n"
    stream_doc(text, 40, 12, check_every=1, tokens=list(text), least=60)


def test_a_table_taller_than_the_terminal_looks_as_rich_draws_it() -> None:
    """A frame shows such a table's last rows at the whole table's column widths: an early
    row, long out of sight, keeps two columns wide; a late wide cell narrows them again; cells
    wrap over several lines; a row arrives a character at a time."""
    rows = [f"| item {i} | {i * 37} | {'word ' * (i % 7)}|\n" for i in range(30)]
    rows.insert(3, f"| {'a long name ' * 2}| 1234567 | x |\n")  # wide columns, long scrolled away
    rows.insert(25, f"| y | 2 | {'wide ' * 9}|\n")  # a late wide cell that narrows the others
    text = "Data:\n\n| Name | Value | Notes |\n|:---|---:|:---|\n" + "".join(rows) + "\nDone.\n"
    stream_doc(text, 50, 12, check_every=1, tokens=list(text), least=30)


def test_table_cells_that_rewrap_as_rows_arrive_look_as_rich_draws_them() -> None:
    """The last row's long cell narrows the first column: the first rows' cells rewrap."""
    rows = "".join(f"| {FITS} {i} | b |\n" for i in range(3))
    text = f"| one | two |\n|---|---|\n{rows}| x | {FITS} {FITS} |\n\nAfter.\n"
    stream_doc(text, 60, 30, check_every=1, tokens=list(text), least=4)


def test_an_answer_whose_terminal_narrows_mid_stream_looks_as_rich_draws_it() -> None:
    """From 100 to 70 columns halfway: every later frame (and the end) is rich's render at 70."""
    text = gen_doc.make_doc(600, 5, gen_doc.token_counter())
    half = len(gen_doc.token_chunks(text)) // 2
    stream_doc(text, 100, 40, check_every=1, resize=(half, 70))
