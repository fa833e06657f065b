"""countbot_cli.ui.stream: streamed markdown equals a one-shot render, plain mode, safety, speed hooks.

Streams are replayed on captured Consoles (width 80). On a non-terminal console the Live region
never draws, so the file holds exactly what was printed into scrollback: it must equal a one-shot
render byte for byte (nothing printed twice, nothing lost). On a terminal console the bytes,
cursor moves included, are replayed in a VT100 emulator (pyte) and the screen must equal the
emulated one-shot render.
"""

from __future__ import annotations

import io
import os
import random
import subprocess
import sys
import threading
import time
from collections import Counter
from collections.abc import Iterator
from pathlib import Path

import gen_doc
import pyte
import pytest
from rich.console import Console
from waits import wait_until

from countbot_cli.textsafe import sanitize
from countbot_cli.ui.stallredraw import StallRedraw
from countbot_cli.ui.status import CLEAR_BELOW, rows_up
from countbot_cli.ui.stream import (
    StreamView,
    is_plain_console,
    make_console,
    preload,
    render_markdown,
)

ROOT = Path(__file__).resolve().parents[2]

WIDTH = 80

CASES: dict[str, str] = {
    "open_fence_at_end": "Intro.\n\n```python\ndef f():\n\n    return 1\n",
    "nested_lists_blank_lines": (
        "- one\n\n  - one.a\n\n  - one.b\n\n    more of one.b\n\n- two\n\n"
        "1. first\n2. second\n\n   1. nested\n\n3. third\n\nEnd.\n"
    ),
    "table_row_by_row": (
        "Options:\n\n| Name | Default | Notes |\n|:---|---:|:---:|\n| `a` | 1 | short |\n"
        "| `bb` | 22 | a much longer note that widens the column |\n| `c` | 3 | x |\n\nAfter.\n"
    ),
    "setext_headings": "Title\n=====\n\nSub title\nover two lines\n---\n\nPara\n\n---\n\nx\n",
    "heading_after_paragraph": "A paragraph line\n## Heading right after\ntext under it\n# H1\n- a\n- b\nplain\n",
    "code_blank_lines_and_backticks": (
        "Use:\n\n```markdown\n# not a heading\n\n\n    ```\n  not closed by indented\n    ```\n"
        "- not a list\n```\n\nIndented code:\n\n    ```\n    still code\n\n    more\n\nDone.\n"
    ),
    "fence_closers": (
        "````text\nA\n```\n    ````\n\t````\n```` not a closer\n\n ```` \t\nafter\n\n"
        "~~~\n```\n~~\n  ~~~~~\nB\n\n```\nopen then closed by a longer one\n`````\n# H\n"
    ),
    "four_backtick_fence": "Text\n\n````md\n```py\nprint(1)\n```\n````\n\nDone.\n",
    "tilde_fence": "A\n\n~~~\ncode ``` here\n~~~\n\nB\n",
    "cjk": (
        "# 流式渲染\n\n终端中的滚动历史必须保持正确，每个块只打印一次。" * 1
        + "这是一个很长的段落，用来测试宽字符在换行处的处理是否与一次性渲染完全一致。" * 3
        + "\n\n| 列 | 说明 |\n|---|---|\n| 表格 | 宽字符单元格 |\n\n- 列表项一\n- 列表项二\n"
    ),
    "markup_and_escapes": (
        "Say [red]x[/red] and [bold]y[/] literally.\x1b]0;pwned\x07\n\n"
        "- item \x1b[31mred?\x1b[0m\n- [link](https://example.com) \x9b2J\n\nEnd\x07.\n"
    ),
    "ordered_split_by_paragraph": "1. a\n2. b\n\nText between.\n\n3. c\n4. d\n",
    "nested_list_with_code": (
        "1. Step one:\n\n   ```sh\n   pip install x\n\n   echo hi\n   ```\n\n"
        "2. Step two\n   - sub a\n   - sub b\n\nFin.\n"
    ),
    "table_interrupting_paragraph": "Intro line\n| a | b |\n|---|---|\n| 1 | 2 |\nafter row\n\nNext.\n",
    "blockquote_lazy": "> quoted\nlazy continuation\n\n> second\n>\n> third\n\n>\n\nText\n",
    "html_block": "<details>\n<summary>x</summary>\n\ninner *md*\n\n</details>\n\nafter\n",
    "hr_variants": "a\n\n***\n\nb\n\n- - -\n\n___\n- list after hr\n\nc\n",
    "partial_number_line": "1. a\n\n   more\n\n2. b\n\n10. c\n",
    "emphasis_across_lines": "Some **bold\ntext** here and `code\nspan`.\n\nNext\n",
    "no_trailing_newline": "# Title\n\nLast words without newline",
    "hard_break_and_reference_before_use": "[1]: https://example.com\n\nLine one  \nline two [x][1]\n",
    # a bullet list's items settle one by one (each drawn by itself): markers, nesting, loose
    # items, lazy lines, an indented marker, a tab, blocks inside items, what ends the list
    "bullet_items_settle": (
        "Tips:\n\n- one\n- two *x*\nlazy\n\n- three\n  - nested a\n  - nested b\n"
        "* star list\n+ plus\n  + nested plus\n   - indented marker\n-\ttab item\n-\n  late\n-\n"
        "- code:\n\n  ```py\n  x = 1\n  ```\n  > quoted\n- last\n\nEnd.\n"
    ),
    "bullet_items_then_hr_and_underline": "- a\n- b\n---\n- c\n- d\n===\n- e\n- f\n\n    code\n",
    "bullet_item_reference_defined_later": "- see [docs]\n- more\n- and more\n\n[docs]: https://e.com\n",
}


def docs() -> dict[str, str]:
    out = dict(CASES)
    out["generated_a"] = gen_doc.make_doc(900, seed=3)
    out["generated_b"] = gen_doc.make_doc(900, seed=11)
    return out


def chunkings(text: str, seeds: int = 3) -> Iterator[tuple[str, list[str]]]:
    for seed in range(seeds):
        r = random.Random(seed)
        parts, i = [], 0
        while i < len(text):
            k = r.randint(1, 40)
            parts.append(text[i : i + k])
            i += k
        yield f"random{seed}", parts
    yield "tokens", gen_doc.regex_chunks(text)
    yield "lines", text.splitlines(keepends=True)
    if len(text) < 600:
        yield "chars", list(text)


class Clock:
    """A fake clock; each reading advances it, so every feed is due for a frame (by default an
    hour a reading: the view waits 4x a frame's real drawing time before the next one, and even
    a frame slowed down by a loaded machine must not make it skip one)."""

    def __init__(self, step: float = 3600.0) -> None:
        self.now, self.step = 0.0, step

    def __call__(self) -> float:
        self.now += self.step
        return self.now


def console(*, terminal: bool, height: int = 25, width: int = WIDTH) -> Console:
    return Console(
        file=io.StringIO(),
        width=width,
        height=height,
        force_terminal=terminal,
        color_system="truecolor" if terminal else None,
        legacy_windows=False,
    )


def one_shot(text: str, *, terminal: bool) -> str:
    c = console(terminal=terminal)
    render_markdown(c, text)
    return c.file.getvalue()  # type: ignore[attr-defined]


def stream(parts: list[str], c: Console, **kw: object) -> StreamView:
    view = StreamView(c, clock=Clock(), **kw)  # type: ignore[arg-type]
    for part in parts:
        view.feed(part)
    view.finish()
    return view


def screen(raw: str, rows: int, width: int = WIDTH) -> list[str]:
    scr = pyte.Screen(width, rows)
    pyte.Stream(scr).feed(raw.replace("\n", "\r\n"))
    lines = [line.rstrip() for line in scr.display]
    while lines and not lines[-1]:
        lines.pop()
    return lines


@pytest.mark.parametrize("name", sorted(docs()))
def test_settled_output_equals_one_shot(name: str) -> None:
    text = docs()[name]
    want = one_shot(text, terminal=False)
    for how, parts in chunkings(text):
        assert "".join(parts) == text
        c = console(terminal=False)
        view = stream(parts, c)
        assert view.text == text
        assert c.file.getvalue() == want, f"{name} chunked by {how}"  # type: ignore[attr-defined]


# what may follow a block: one of them changes it unless the block is closed
PROBES = ("x\n", "- x\n", "1. x\n", "    x\n", "> x\n", "===\n", "---\n", "| x |\n", "```\n")
# the blocks the streamer settles once closed (mdblocks.py); the others wait for the next block
CLOSING = {"heading_open", "hr", "paragraph_open", "table_open", "blockquote_open", "fence"}


def _top_blocks(text: str) -> list[list[tuple[object, ...]]]:
    """The top-level blocks of `text` by rich's own parser, each as its tokens."""
    from markdown_it import MarkdownIt

    md = MarkdownIt().enable("strikethrough").enable("table")
    blocks: list[list[tuple[object, ...]]] = []
    for t in md.parse(text):
        if t.level == 0 and t.nesting >= 0:
            blocks.append([])
        blocks[-1].append((t.type, t.map, t.content, t.markup, t.info, t.level))
    return blocks


def _settled_prefix(text: str) -> str:
    """`text` (complete lines) up to the start of its last top-level block, or all of it when
    that block is one the streamer closes and no line that may follow changes it; when that
    block is a bullet list of two items or more, up to the start of its last item (rich draws
    each item of a bullet list by itself), unless those items hold a "]" (a link reference
    defined later may change them)."""
    blocks = _top_blocks(text)
    if not blocks:
        return ""
    last = blocks[-1]
    if last[0][0] in CLOSING and all(
        _top_blocks(text + probe)[len(blocks) - 1] == last for probe in PROBES
    ):
        return text
    items = [t[1] for t in last if t[0] == "list_item_open" and t[5] == 1]
    if last[0][0] == "bullet_list_open" and len(items) >= 2:
        lines = text.splitlines(keepends=True)
        done = lines[: items[-1][0]]  # type: ignore[index]
        if "]" not in "".join(done[last[0][1][0] :]):  # type: ignore[index]
            return "".join(done)
    if len(blocks) < 2:
        return ""
    return "".join(text.splitlines(keepends=True)[: last[0][1][0]])  # type: ignore[index]


@pytest.mark.parametrize("name", sorted(CASES))
def test_blocks_settle_once_closed_or_when_the_next_one_starts(name: str) -> None:
    text = sanitize(CASES[name])
    if "\u2028" in text or "\u2029" in text:
        pytest.skip("str.splitlines differs from markdown lines")
    for how, parts in [("lines", text.splitlines(keepends=True)), *chunkings(text, seeds=2)]:
        c = console(terminal=False)
        view = StreamView(c, clock=Clock())
        fed = ""
        for part in parts:
            view.feed(part)
            fed += part
            want = _settled_prefix(fed[: fed.rfind("\n") + 1])
            got = c.file.getvalue()  # type: ignore[attr-defined]
            assert got == (one_shot(want, terminal=False) if want.strip() else ""), (how, fed)
        view.finish()


@pytest.mark.parametrize("name", sorted(docs()))
def test_terminal_screen_equals_one_shot(name: str) -> None:
    text = docs()[name]
    want_raw = one_shot(text, terminal=True)
    rows = want_raw.count("\n") + 40
    want = screen(want_raw, rows)
    ways = list(chunkings(text, seeds=2))[: 1 if name.startswith("generated") else 3]
    for how, parts in ways:
        c = console(terminal=True, height=12)  # answers taller than the terminal
        view = stream(parts, c)
        assert view.frames > 0
        assert screen(c.file.getvalue(), rows) == want, f"{name} chunked by {how}"  # type: ignore[attr-defined]


def test_long_generated_answer_in_a_small_terminal() -> None:
    text = gen_doc.make_doc(4000, seed=5)
    want_raw = one_shot(text, terminal=True)
    rows = want_raw.count("\n") + 40
    c = console(terminal=True, height=8)
    view = StreamView(c, clock=Clock(step=0.01), max_fps=10.0)  # 100 tokens/s
    for part in gen_doc.regex_chunks(text):
        view.feed(part)
    view.finish()
    assert screen(c.file.getvalue(), rows) == screen(want_raw, rows)  # type: ignore[attr-defined]


def test_newest_lines_of_a_tall_block_stay_visible() -> None:
    c = console(terminal=True, height=10)
    term = pyte.Screen(WIDTH, 200)
    vt, done = pyte.Stream(term), 0

    def shown() -> list[str]:
        nonlocal done
        raw = c.file.getvalue()  # type: ignore[attr-defined]
        vt.feed(raw[done:].replace("\n", "\r\n"))
        done = len(raw)
        return [line.rstrip() for line in term.display if line.strip()]

    view = StreamView(c, clock=Clock())
    view.feed("```python\n")
    for i in range(60):
        view.feed(f"line_{i} = {i}\n")
        now = shown()
        assert f"line_{i} = {i}" in now[-1]  # the newest line is on screen
        assert i < 7 or not any("line_0 =" in line for line in now)  # cropped to the bottom
    view.finish()
    final = shown()
    assert sum("line_0 = 0" in s for s in final) == 1
    assert sum("line_59 = 59" in s for s in final) == 1


def test_width_change_mid_stream_loses_and_duplicates_nothing() -> None:
    text = gen_doc.make_doc(1200, seed=8)
    parts = gen_doc.regex_chunks(text)
    outputs = []
    for terminal in (False, True):
        c = console(terminal=terminal, height=15)
        view = StreamView(c, clock=Clock(step=0.03), reflows=False)  # pyte cuts, never re-wraps
        for i, part in enumerate(parts):
            if i == len(parts) // 3:
                c.width = 60
            if i == 2 * len(parts) // 3:
                c.width = 72
            view.feed(part)
        view.finish()
        outputs.append(c.file.getvalue())  # type: ignore[attr-defined]
    flat, term = outputs
    rows = flat.count("\n") + 40
    assert screen(term, rows) == screen(flat, rows)
    numbers = Counter(
        line.split(" ")[1] for line in text.splitlines() if line.startswith(("## ", "### "))
    )
    assert len(numbers) >= 3
    shown = [line.strip() for line in flat.splitlines()]
    for n, count in numbers.items():  # every numbered heading printed exactly once
        assert sum(line.startswith(n + " ") for line in shown) == count, n
    assert max(len(line) for line in flat.splitlines()) == WIDTH


def test_narrowing_a_reflowing_terminal_erases_the_rows_the_region_spread_over() -> None:
    c = console(terminal=True, height=30, width=100)
    view = StreamView(c, clock=Clock(), reflows=True)
    view.feed("1. " + "word " * 19 + "\n2. " + "more " * 19 + "\n3. short")  # lines: 0, 97, 97, 8
    c.width = 60  # the terminal now shows them on 1 + 2 + 2 + 1 rows
    c.file = io.StringIO()
    view.feed(" and more")
    frame = c.file.getvalue()  # type: ignore[attr-defined]
    assert frame.startswith("\r" + rows_up(5) + CLEAR_BELOW)  # up to the first of the 6 rows
    assert frame.count("\n") == 5 and frame.endswith("short and more")  # the 6 lines at 60
    view.finish()


def test_a_growing_paragraph_redraws_only_its_changing_lines() -> None:
    text = " ".join(f"word{i}" for i in range(400)) + "\n"  # one paragraph, 30+ rows at 80
    c = console(terminal=True, height=60)
    view = stream(gen_doc.regex_chunks(text), c)
    assert view.frames > 300  # a frame for every token
    raw = c.file.getvalue()  # type: ignore[attr-defined]
    assert screen(raw, 80) == screen(one_shot(text, terminal=True), 80)
    assert len(raw) < view.frames * 2 * WIDTH  # a row or two a frame, not the whole block


def test_a_table_being_written_grows_a_whole_row_at_a_time() -> None:
    c = console(terminal=True, height=30)
    term = pyte.Screen(WIDTH, 30)
    vt, done = pyte.Stream(term), 0

    def shown() -> str:
        nonlocal done
        raw = c.file.getvalue()  # type: ignore[attr-defined]
        vt.feed(raw[done:].replace("\n", "\r\n"))
        done = len(raw)
        return "\n".join(term.display)

    view = StreamView(c, clock=Clock())
    view.feed("Intro words\n\n| Name | Notes |\n|---|---|\n| `a` | first row |\n")
    assert "first row" in shown()
    frames = view.frames
    for part in ["| `b", "` | sec", "ond r", "ow |"]:
        view.feed(part)
        assert view.frames == frames and view.due_in() is None  # no frame for a partial row
    assert "sec" not in shown()
    view.feed("\n")
    assert view.frames == frames + 1 and "second row" in shown()
    view.feed("| `c` | third")  # a partial row is held back, also by a waiter's refresh()
    view.refresh()
    assert "third" not in shown()
    view.feed(" |\n\nWords ")  # the blank line closes the table: words are drawn as they come
    assert "third" in shown() and "Words" in shown()
    view.finish()
    want = "| Name | Notes |\n|---|---|\n| `a` | first row |\n| `b` | second row |\n"
    want = "Intro words\n\n" + want + "| `c` | third |\n\nWords"
    assert screen(c.file.getvalue(), 30) == screen(one_shot(want, terminal=True), 30)  # type: ignore[attr-defined]


def test_settled_lines_carry_no_invisible_padding() -> None:
    text = "Intro that is short.\n\n| a | centred |\n|---|:---:|\n| 1 | x |\n\nEnd.\n"
    for parts in (gen_doc.regex_chunks(text), [text]):
        c = console(terminal=False)
        stream(parts, c)
        lines = c.file.getvalue().splitlines()  # type: ignore[attr-defined]
        assert any("centred" in line for line in lines)
        assert all(line == line.rstrip() for line in lines), lines


def test_first_feed_draws_at_once_then_throttles() -> None:
    c = console(terminal=True)
    frozen = Clock(step=0.0)
    view = StreamView(c, clock=frozen, max_fps=10.0)
    view.feed("Hello")
    assert "Hello" in c.file.getvalue()  # type: ignore[attr-defined]
    assert view.frames == 1
    view.feed(" world")
    assert view.frames == 1 and "world" not in c.file.getvalue()  # type: ignore[attr-defined]
    due = view.due_in()
    assert due is not None and due >= 0.1 - 1e-9
    view.refresh()
    assert view.frames == 2 and "world" in c.file.getvalue()  # type: ignore[attr-defined]
    assert view.due_in() is None
    view.finish()


def test_plain_mode_writes_sanitised_text_as_it_arrives() -> None:
    text = CASES["markup_and_escapes"] + "tail \x1b]0;split"
    for seed in range(5):
        r = random.Random(seed)
        out = io.StringIO()
        c = console(terminal=True)
        c.file = out
        view = StreamView(c, plain=True)
        i = 0
        while i < len(text):
            k = r.randint(1, 7)
            view.feed(text[i : i + k])
            i += k
        view.finish()
        assert out.getvalue() == sanitize(text) + "\n"
        assert "\x1b" not in out.getvalue() and "\x07" not in out.getvalue()
        assert view.text == text


def test_make_console_is_plain_for_pipes_and_plain_but_not_for_no_color(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setenv("NO_COLOR", "1")
    piped = make_console(file=io.StringIO())
    assert is_plain_console(piped)
    view = StreamView(piped)
    view.feed("# Title\n\n**bold**")
    view.finish()
    assert piped.file.getvalue() == "# Title\n\n**bold**\n"  # type: ignore[attr-defined]
    master, slave = os.openpty()
    with os.fdopen(slave, "w") as tty:
        assert is_plain_console(make_console(file=tty, force_plain=True))  # --plain
        colourless = make_console(file=tty)  # NO_COLOR only drops colour
        assert not is_plain_console(colourless) and colourless.no_color
        monkeypatch.delenv("NO_COLOR")
        coloured = make_console(file=tty)
        assert not is_plain_console(coloured) and not coloured.no_color
    os.close(master)


def test_model_markup_and_escapes_print_literally() -> None:
    for terminal in (False, True):
        c = console(terminal=terminal)
        view = StreamView(c, clock=Clock())
        view.reasoning("think [blue]hard[/blue] \x1b[2J now\n")
        view.feed(CASES["markup_and_escapes"])
        view.notice("[red]tool[/red] \x1b]0;pwned\x07 call")
        view.finish()
        out = c.file.getvalue()  # type: ignore[attr-defined]
        assert "[red]x[/red]" in out and "[bold]y[/]" in out
        assert "[blue]hard[/blue]" in out and "[red]tool[/red]" in out
        assert "pwned" not in out and "\x07" not in out and "\x9b" not in out
        assert "\x1b[2J" not in out and "\x1b]0;" not in out


def test_abort_keeps_what_arrived() -> None:
    text = next(d for d in (gen_doc.make_doc(600, seed=s) for s in range(50)) if "```" in d)
    cut = text.index("```") + 40  # inside a code fence
    for terminal in (False, True):
        c = console(terminal=terminal)
        view = StreamView(c, clock=Clock(step=0.01), max_fps=10.0)  # 100 tokens/s
        for part in gen_doc.regex_chunks(text[:cut]):
            view.feed(part)
        view.abort("[interrupted]")
        assert view.text == text[:cut]
        want = one_shot(text[:cut], terminal=terminal)
        got = c.file.getvalue()  # type: ignore[attr-defined]
        if terminal:
            assert view.frames > 10  # the tail was drawn while it streamed
            rows = want.count("\n") + 40  # room for the answer and a full live region
            shown, expect = screen(got, rows), screen(want, rows)
            assert shown[: len(expect)] == expect and shown[-1] == "[interrupted]"
            assert shown[len(expect) : -1] in ([""], ["", ""])  # a blank line, maybe padding
        else:
            assert got == want + "\n[interrupted]\n"


def test_abort_in_plain_mode_keeps_text_and_notes_on_the_side() -> None:
    main, side = io.StringIO(), io.StringIO()
    view = StreamView(make_console(file=main), side=make_console(file=side))
    view.feed("partial ans")
    view.abort()
    assert main.getvalue() == "partial ans\n"
    assert side.getvalue() == "interrupted\n"


def test_reasoning_is_dim_and_separate_from_the_answer() -> None:
    answer = "The answer:\n\n- one\n- two\n"
    c = console(terminal=False)
    view = StreamView(c, clock=Clock())
    for part in ("Let me ", "think.\nSecond", " thought"):
        view.reasoning(part)
    for part in gen_doc.regex_chunks(answer):
        view.feed(part)
    view.finish()
    assert view.text == answer
    assert c.file.getvalue() == (  # type: ignore[attr-defined]
        "Let me think.\nSecond thought\n\n" + one_shot(answer, terminal=False)
    )
    t = console(terminal=True)
    view = StreamView(t, clock=Clock())
    view.reasoning("Let me think.\n")
    view.feed(answer)
    view.finish()
    assert "\x1b[2mLet me think." in t.file.getvalue()  # type: ignore[attr-defined]


def test_notice_settles_the_answer_then_prints_one_line() -> None:
    before, after = "Checking:\n\n- a\n- b", "Done **now**.\n"
    c = console(terminal=False)
    view = StreamView(c, clock=Clock())
    view.feed(before)
    view.notice("→ read_file path='x'\nsecond line")
    view.notice("  ✓ · 2 lines:\tcol  a")
    view.feed(after)
    view.finish()
    want = one_shot(before, terminal=False) + "\n→ read_file path='x' second line\n"
    want += "  ✓ · 2 lines:  col  a\n\nDone now."
    got = c.file.getvalue()  # type: ignore[attr-defined]
    assert [line.rstrip() for line in got.splitlines()] == [
        line.rstrip() for line in want.splitlines()
    ]
    assert view.text == before + after


def test_render_markdown_sanitises_and_is_raw_on_plain_consoles() -> None:
    c = console(terminal=False)
    render_markdown(c, "# T\x1b[2J\n\n[red]r[/red]")
    got = c.file.getvalue()  # type: ignore[attr-defined]
    assert got == one_shot("# T\n\n[red]r[/red]", terminal=False) and "[red]r[/red]" in got
    out = io.StringIO()
    render_markdown(make_console(file=out), "# T\x07")
    assert out.getvalue() == "# T\n"


def test_import_is_cheap_and_preload_warms_up() -> None:
    code = (
        "import sys; import countbot_cli.ui.stream as r\n"
        "assert not any(m == 'rich' or m.startswith(('rich.', 'markdown_it')) for m in sys.modules), "
        "sorted(m for m in sys.modules if 'rich' in m)\n"
        "r.preload(); assert 'rich.markdown' in sys.modules\n"
        "assert 'countbot_cli.ui.liveregion' in sys.modules\n"
        "import io; from rich.console import Console\n"
        "c = Console(file=io.StringIO(), force_terminal=True, width=80, height=20)\n"
        "v = r.StreamView(c); v.feed('# a\\n\\nsome text'); v.finish()\n"
        "assert v.frames and 'some text' in c.file.getvalue()\n"
        "assert 'rich.live' not in sys.modules  # countbot's own live region\n"
    )
    res = subprocess.run([sys.executable, "-c", code], cwd=ROOT, capture_output=True, text=True)
    assert res.returncode == 0, res.stderr
    preload()


def test_plain_mode_sends_reasoning_and_notices_to_the_side() -> None:
    main, side = io.StringIO(), io.StringIO()
    view = StreamView(make_console(file=main), side=make_console(file=side))
    view.reasoning("thinking \x1b[31m[b]hard[/b]")
    view.feed("The answer.")
    view.notice("→ tool")
    view.feed("\nMore.")
    view.finish()
    assert main.getvalue() == "The answer.\nMore.\n"
    assert side.getvalue() == "thinking [b]hard[/b]\n→ tool\n"
    assert view.text == "The answer.\nMore."


class _SlowTerminal(io.StringIO):
    def write(self, s: str) -> int:
        time.sleep(0.03)  # the slow terminal is what the test is about
        return super().write(s)


def test_throttle_adapts_to_slow_frames() -> None:
    c = console(terminal=True)
    c.file = _SlowTerminal()
    view = StreamView(c, clock=Clock(step=0.0), max_fps=10.0)
    view.feed("Hello")
    view.feed(" world")
    due = view.due_in()
    assert due is not None and due >= 4 * 0.03  # at least 4x the frame time, above 1/max_fps
    view.finish()


def test_a_stalled_stream_gets_its_pending_frame_from_one_waiter(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    started: list[threading.Thread] = []
    start = threading.Thread.start

    def counted(thread: threading.Thread) -> None:
        started.append(thread)
        start(thread)

    monkeypatch.setattr(threading.Thread, "start", counted)
    c = console(terminal=True)
    view = StreamView(c, max_fps=10.0)
    frames = StallRedraw(view)

    def fed(text: str) -> None:
        with frames.lock:
            view.feed(text)
            frames.schedule()

    def shown(text: str) -> bool:
        with frames.lock:
            return text in c.file.getvalue()  # type: ignore[attr-defined]

    fed("Hello")  # drawn at once
    for word in ("one", "two", "three"):
        fed(f" {word}")  # too soon after the last frame: pending, then the stream stalls
        assert not shown(word)
        wait_until(lambda w=word: shown(w), f"the stalled frame with {word!r}", 30)
    assert len(started) == 1  # one waiter drew the three stalled frames
    frames.close()
    started[0].join(30)
    assert not started[0].is_alive()
    fed(" four")  # a closed view's pending frame waits for the next feed or finish()
    assert len(started) == 1


def test_a_fence_whose_language_arrives_letter_by_letter_looks_up_only_the_whole_name(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """While "```javascript" is being typed, a frame drawn at "```j", "```java", ... does not
    ask pygments for a lexer of that prefix (a miss scans the installed packages for plugins; a
    hit loads a lexer the answer never uses): an empty block is highlighted as "text"."""
    import rich.syntax

    asked: list[str] = []
    real = rich.syntax.get_lexer_by_name

    def spy(name: str, **options: object) -> object:
        asked.append(name)
        return real(name, **options)

    monkeypatch.setattr(rich.syntax, "get_lexer_by_name", spy)
    text = "Intro\n\n```javascript\nlet a = 1;\n```\n\n~~~python\nx = 1\n~~~\n"
    c = console(terminal=True)
    view = stream(list(text), c)
    assert view.frames > len(text) // 2  # frames were drawn while the info string was partial
    assert set(asked) == {"text", "javascript", "python"}
    assert screen(c.file.getvalue(), 40) == screen(one_shot(text, terminal=True), 40)  # type: ignore[attr-defined]


class _SimulatedWaits:
    """The stall waiter's clock and condition, simulated in one thread: while the waiter waits,
    the stream's tokens arrive on schedule (fed and scheduled as `MarkdownView.text` does); a
    notify() ends the wait. Counts the waiter's wake-ups (each a thread switch in real life)."""

    def __init__(self, parts: list[str], step: float) -> None:
        self.now = 0.0
        self.due = [(i * step, part) for i, part in enumerate(parts)]
        self.wakes = 0
        self.notified = False
        self.frames: StallRedraw | None = None

    def monotonic(self) -> float:
        return self.now

    def notify(self) -> None:
        self.notified = True

    def feed_next(self) -> None:
        assert self.frames is not None
        self.now, part = self.due.pop(0)
        self.frames.stream.feed(part)
        self.frames.schedule()

    def wait(self, timeout: float) -> bool:
        end, self.notified = self.now + timeout, False
        self.wakes += 1
        while self.due and self.due[0][0] <= end:
            self.feed_next()
            if self.notified:
                return True
        self.now = end
        return False


def test_a_flowing_stream_wakes_the_stall_waiter_once_a_frame_period(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """At 100 tokens/s and 10 frames/s each frame is drawn by a token; the waiter is there for a
    stall. It wakes by itself when the next frame is due, instead of being notified of each new
    pending frame and then waking at its deadline to find a token drew it (two a period)."""
    import types

    from countbot_cli.ui import stallredraw

    words = [f" word{i}" for i in range(200)]
    sim = _SimulatedWaits(words, step=0.01)
    monkeypatch.setattr(stallredraw, "time", types.SimpleNamespace(monotonic=sim.monotonic))
    waiters: list[threading.Thread] = []
    monkeypatch.setattr(threading.Thread, "start", lambda thread: waiters.append(thread))
    c = console(terminal=True, height=40)
    view = StreamView(c, clock=sim.monotonic, max_fps=10.0)
    frames = sim.frames = StallRedraw(view)
    frames._wake = sim  # type: ignore[assignment]
    while not waiters:
        sim.feed_next()
    waiters[0].run()  # the waiter, until it leaves idle after the stream ends
    assert not sim.due
    assert "word199" in c.file.getvalue()  # type: ignore[attr-defined]  # the stalled last frame
    assert view.frames >= 15
    assert sim.wakes <= view.frames + 3
