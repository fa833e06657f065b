"""Top-level markdown blocks for the streaming renderer (`stream.py`), on rich's own parser.

Splits a streamed answer into settled blocks and the block still being written, with
markdown-it-py configured exactly as `rich.markdown.Markdown` configures it. The invariant:
nothing settled can render differently once more text arrives, and a settled chunk renders
with the separator rich itself would put before it. `markdown` is rich's `Markdown` on one
shared parser. The boundary rules: docs/design/rendering.md.

This module imports rich and markdown-it at import time; `stream.py` imports it lazily.
"""

from __future__ import annotations

import re
from collections.abc import Iterable
from functools import lru_cache
from typing import ClassVar, NamedTuple

from markdown_it import MarkdownIt
from markdown_it.token import Token
from rich.console import Console, ConsoleOptions, RenderResult
from rich.markdown import CodeBlock, Markdown, MarkdownElement
from rich.segment import Segment
from rich.style import Style
from rich.text import Text

from countbot_cli.ui import rendermemo
from countbot_cli.ui.rendermemo import RenderMemo

_PREFIX = "x\n\n"  # renders as exactly one line; sets rich's "blank line before next" state

Line = list[Segment]


@lru_cache(maxsize=1)
def parser() -> MarkdownIt:
    """rich.markdown's block grammar (same plugins), without inline parsing: block maps only."""
    return MarkdownIt().enable("strikethrough").enable("table").disable("inline")


@lru_cache(maxsize=1)
def _rich_parser() -> MarkdownIt:
    """The parser `rich.markdown.Markdown` builds for itself (inline parsing included); a
    parse given a `RenderMemo` takes the inline parses the render before made from it."""
    return rendermemo.install(MarkdownIt().enable("strikethrough").enable("table"))


class _EmptyAsTextCodeBlock(CodeBlock):
    """rich's code block, highlighted as "text" while it has no code yet.

    A streamed fence's opening line is shown while its info string is still arriving ("```p",
    "```py", ...): rich would look each prefix up as a pygments lexer, and a miss makes pygments
    scan the installed packages' entry points for plugins (16 ms the first time), a hit on a
    prefix loads a lexer the answer does not use ("java" on the way to "javascript"). A block
    without code renders the same cells whatever its lexer (tests/ui/test_mdblocks.py checks).
    """

    def __rich_console__(self, console: Console, options: ConsoleOptions) -> RenderResult:
        if not str(self.text).strip():
            self.lexer_name = "text"
        yield from super().__rich_console__(console, options)


class _SharedParserMarkdown(Markdown):
    """rich's `Markdown`, parsed by `_rich_parser()` instead of a parser of its own; its fields
    are those rich's `__init__` sets for `Markdown(markup, code_theme=...)`. A fence without
    code yet is drawn by `_EmptyAsTextCodeBlock`."""

    elements: ClassVar[dict[str, type[MarkdownElement]]] = {
        **Markdown.elements,
        "fence": _EmptyAsTextCodeBlock,
        "code_block": _EmptyAsTextCodeBlock,
    }

    def __init__(  # rich's __init__ is not called
        self, markup: str, code_theme: str, env: dict[str, object] | None = None
    ) -> None:
        self.markup = markup
        self.parsed = _rich_parser().parse(markup, env)
        self.code_theme = code_theme
        self.justify = None
        self.style = "none"
        self.hyperlinks = True
        self.inline_code_lexer = None
        self.inline_code_theme = code_theme


class _MemoMarkdown(_SharedParserMarkdown):
    """`_SharedParserMarkdown` parsed and rendered through `memo` (ui/rendermemo.py): inline
    parses and the render of paragraphs and table cells that the render before also made."""

    elements: ClassVar[dict[str, type[MarkdownElement]]] = {
        **_SharedParserMarkdown.elements,
        **rendermemo.ELEMENTS,
    }

    def __init__(self, markup: str, code_theme: str, memo: RenderMemo) -> None:
        self.memo = memo
        super().__init__(markup, code_theme, memo.parse_env())


@lru_cache(maxsize=1)
def _shared_parser_fits() -> bool:
    """Whether `_SharedParserMarkdown` sets exactly the fields rich's own `__init__` sets, to
    the same values (another rich version may add one: then rich's own class is used)."""
    sample = "# a\n\n- *b* `c`\n"
    return vars(Markdown(sample, code_theme="monokai")) == vars(
        _SharedParserMarkdown(sample, "monokai")
    )


def markdown(markup: str, *, code_theme: str, memo: RenderMemo | None = None) -> Markdown:
    """`Markdown(markup, code_theme=code_theme)`, on the shared parser where that is the same;
    with `memo`, rendered through it (the same lines)."""
    if _shared_parser_fits():
        if memo is not None:
            return _MemoMarkdown(markup, code_theme, memo)
        return _SharedParserMarkdown(markup, code_theme)
    return Markdown(markup, code_theme=code_theme)


class Split(NamedTuple):
    settled: str  # source of the blocks that can no longer change
    rest: str  # the last block and any partial line
    ends_with_hr: bool  # the last settled block is a thematic break (no blank line follows it)
    goes_on: str = ""  # the rest's first item goes on a bullet list: an item of it (render_lines)


def _line_offset(text: str, line: int) -> int:
    """Character offset of the start of line number `line` (lines end with "\\n" only)."""
    pos = 0
    for _ in range(line):
        pos = text.index("\n", pos) + 1
    return pos


class Splitter:
    """Finds the settled blocks of a growing tail, parsing only when something may have settled.

    While the tail is a single open code fence, nothing can settle until a line that could close
    it arrives, so long code blocks are not re-parsed on every new line.
    """

    def __init__(self) -> None:
        self._closer: re.Pattern[str] | None = None  # closing line of the open fence, if any
        self.in_table = False  # the tail's last block is a table still open (by the last split)

    def split(self, tail: str, new_from: int = 0) -> Split | None:
        """Cut `tail` before its last top-level block, or None if nothing is settled yet.

        new_from: offset in `tail` where the text added since the previous call starts.
        """
        end = tail.rfind("\n") + 1  # decide on complete lines only
        if not end:
            return None
        if self._closer is not None:
            start = tail.rfind("\n", 0, new_from) + 1
            if not self._closer.search(tail, start, end):
                return None
        self._closer = None
        parsed = parser().parse(tail[:end])
        tokens = [tok for tok in parsed if tok.level == 0 and tok.nesting >= 0 and tok.map]
        self.in_table = bool(tokens) and tokens[-1].type == "table_open"
        if tokens and _closed(tokens[-1], tail[:end]):
            self.in_table = False
            return Split(tail[:end], tail[end:], tokens[-1].type == "hr")
        if tokens and tokens[-1].type == "bullet_list_open":
            opened = next(i for i, tok in enumerate(parsed) if tok is tokens[-1])
            split = _done_items(tail, parsed[opened:])
            if split is not None:
                return split
        if len(tokens) >= 2:
            cut = _line_offset(tail, tokens[-1].map[0])  # type: ignore[index]
            return Split(tail[:cut], tail[cut:], tokens[-2].type == "hr")
        if tokens and tokens[0].type == "fence":
            self._closer = _open_fence_closer(tail[:end], tokens[0].markup)
        return None

    def reset(self) -> None:
        self._closer = None
        self.in_table = False


def _done_items(tail: str, bullet_list: list[Token]) -> Split | None:
    """The split before the last item of the bullet list that ends `tail` (its tokens from its
    opening on), if it has items before it: those are done, and rich draws each item of a
    bullet list by itself, so they settle (not when one may use a link reference that a later
    line can still define: a "]" in them)."""
    items = [tok for tok in bullet_list if tok.type == "list_item_open" and tok.level == 1]
    if len(items) < 2:
        return None
    start = _line_offset(tail, bullet_list[0].map[0])  # type: ignore[index]
    cut = _line_offset(tail, items[-1].map[0])  # type: ignore[index]
    if "]" in tail[start:cut]:
        return None
    line = tail[cut : tail.find("\n", cut)]
    indent = line[: len(line) - len(line.lstrip(" \t"))]
    return Split(tail[:cut], tail[cut:], False, f"{indent}{items[-1].markup} x\n")


_DONE_AT_LINE_END = frozenset({"heading_open", "hr"})  # one line (setext: the underline)
_ENDED_BY_BLANK_LINE = frozenset({"paragraph_open", "table_open", "blockquote_open"})


def _closed(block: Token, src: str) -> bool:
    """Whether no later line can change the top-level `block`, the last one of `src` (complete
    lines): it is done, and only blank lines follow it in `src`."""
    start, stop = block.map  # type: ignore[misc]
    after = src[_line_offset(src, stop) :] if stop < src.count("\n") else ""
    if after.strip():  # a reference definition, say: what follows may still use it
        return False
    if block.type in _DONE_AT_LINE_END:
        return True
    if block.type in _ENDED_BY_BLANK_LINE:  # the last line is blank (in the block's map or not)
        return not src[:-1].rsplit("\n", 1)[-1].strip()
    if block.type == "fence":
        return _open_fence_closer(src[_line_offset(src, start) :], block.markup) is None
    return False


def _open_fence_closer(src: str, markup: str) -> re.Pattern[str] | None:
    """The pattern of a line closing the fence `src` starts with, or None if it is closed."""
    closer = re.compile(f"^ {{0,3}}{re.escape(markup[0])}{{{len(markup)},}}[ \\t]*$", re.M)
    body_start = src.find("\n") + 1
    return None if closer.search(src, body_start) else closer


def render_lines(
    console: Console,
    src: str,
    *,
    separated: bool,
    code_theme: str,
    options: ConsoleOptions | None = None,
    memo: RenderMemo | None = None,
    goes_on: str = "",
) -> list[Line]:
    """`src` rendered by rich as lines, as it renders within a whole document.

    separated: something rendered as markdown comes before `src` on screen, so rich's blank line
    between blocks applies (False at the start of the answer and after a thematic break).
    goes_on: instead, `src` begins with the next items of a bullet list on screen: the source of
    an item of that list (`Split.goes_on`), rendered before `src` and dropped with the blank line
    rich puts before a list, so that the items are drawn as in the whole list.
    memo: the stream's `RenderMemo` (one console), which keeps what this render made for the next.
    """
    opts = options or console.options
    before = goes_on or (_PREFIX if separated else "")
    md = markdown(before + src, code_theme=code_theme, memo=memo)
    try:
        lines = list(Segment.split_lines(console.render(md, opts)))
    except Exception:  # a renderer bug must not lose the answer: show it as plain text
        return list(Segment.split_lines(console.render(Text(src), opts)))
    finally:
        if memo is not None:
            memo.rendered()
    if console.no_color:  # NO_COLOR: no backgrounds either, so padding at line ends can go
        lines = [list(Segment.remove_color(line)) for line in lines]
    return lines[_rows(console, before, opts, code_theme) :] if before else lines


_ROWS: dict[tuple[str, int], int] = {}


def _rows(console: Console, src: str, options: ConsoleOptions, code_theme: str) -> int:
    """The lines `src` renders to alone at this width (a dummy block put before a chunk)."""
    key = (src, options.max_width)
    if key not in _ROWS:
        _ROWS[key] = len(
            list(Segment.split_lines(console.render(markdown(src, code_theme=code_theme), options)))
        )
    return _ROWS[key]


def is_blank(src: str) -> bool:
    return not src.strip()


class Lines:
    """A renderable that prints pre-rendered lines as they are."""

    def __init__(self, lines: Iterable[Line] = ()) -> None:
        self.lines: list[Line] = list(lines)

    def __rich_console__(self, console: Console, options: ConsoleOptions) -> RenderResult:
        newline = Segment.line()
        for line in self.lines:
            yield from line
            yield newline


def _plain_spaces(style: Style | None) -> bool:
    """Spaces in this style show nothing (no background, reverse, underline or strike)."""
    return style is None or not (style.bgcolor or style.reverse or style.underline or style.strike)


def rstrip_line(line: Line) -> Line:
    """`line` without trailing spaces that show nothing (so a narrowed terminal reflows less)."""
    end = len(line)
    while end:
        seg = line[end - 1]
        if seg.control or not _plain_spaces(seg.style):
            break
        text = seg.text.rstrip(" ")
        if text:
            if end == len(line) and text == seg.text:
                return line
            return [*line[: end - 1], Segment(text, seg.style)]
        end -= 1
    return line if end == len(line) else line[:end]


def line_length(line: Line) -> int:
    """Cells the line takes on screen."""
    return Segment.get_line_length(line)


def bottom(lines: list[Line], keep: int) -> list[Line]:
    """The last `keep` lines, right-stripped: what a bottom-anchored live region shows."""
    return [rstrip_line(line) for line in lines[-max(1, keep) :]]


def fence_window(src: str, keep_lines: int) -> str:
    """`src` with the middle of a long trailing code fence dropped, for the live region only.

    When the unsettled tail is one long fenced code block, only its last lines are visible in a
    bottom-cropped region, and highlighting the whole block each frame dominates the cost. The
    opening fence line is kept so the rest still renders as code of the same language.
    """
    if not src.startswith(("```", "~~~")):
        return src
    first_end = src.find("\n")
    if first_end < 0:
        return src
    body = src[first_end + 1 :]
    if body.count("\n") <= keep_lines:
        return src
    cut = len(body)
    for _ in range(keep_lines + 1):
        cut = body.rfind("\n", 0, cut)
        if cut < 0:
            return src
    return src[: first_end + 1] + body[cut + 1 :]
