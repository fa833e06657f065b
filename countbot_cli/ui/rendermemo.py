"""The render memo: what one frame of a streamed answer renders that the next frame renders again.

A `RenderMemo` (one per `StreamView`) keeps markdown-it's inline parse of a block's text and
rich's render of a paragraph's or table cell's `Text` from one frame to the next, each under a
key that holds everything it depends on; `MemoParagraph` and `MemoTable` are rich's own
elements rendered through it. The invariant: a frame's lines are exactly rich's lines. An
entry lives while consecutive renders use it. Details: docs/design/rendering.md.

This module imports rich and markdown-it at import time; `mdblocks.py` imports it.
"""

from __future__ import annotations

from collections.abc import Hashable, Iterable, MutableMapping
from typing import TYPE_CHECKING, Any, TypeVar, cast

from markdown_it.rules_core import inline as parse_inlines
from rich.markdown import MarkdownElement, Paragraph, TableElement
from rich.text import Text

if TYPE_CHECKING:
    from markdown_it import MarkdownIt
    from markdown_it.rules_core import StateCore
    from markdown_it.token import Token
    from rich.console import Console, ConsoleOptions, RenderResult
    from rich.markdown import Markdown
    from rich.measure import Measurement

_ENV_KEY = "countbot.render_memo"  # where a parse finds its memo in markdown-it's env
MISSING = object()  # what `RenderMemo.get` returns for a key it does not hold

# The fields of a rich Text (its __slots__): the key of its render holds each of them.
TEXT_FIELDS = frozenset(
    {"_text", "style", "justify", "overflow", "no_wrap", "end", "tab_size", "_spans", "_length"}
)


class RenderMemo:
    """Results of one render kept for the next (see the module's docstring)."""

    def __init__(self) -> None:
        self._used: dict[Hashable, Any] = {}  # used or made by the render under way
        self._last: dict[Hashable, Any] = {}  # those of the render before

    def get(self, key: Hashable) -> Any:
        """The value kept under `key`, or `MISSING`."""
        value = self._used.get(key, MISSING)
        if value is MISSING:
            value = self._last.get(key, MISSING)
            if value is not MISSING:
                self._used[key] = value
        return value

    def put(self, key: Hashable, value: object) -> None:
        self._used[key] = value

    def rendered(self) -> None:
        """A render is over: what it used is kept for the next one, the rest is dropped."""
        self._last, self._used = self._used, {}

    def parse_env(self) -> dict[str, object]:
        """markdown-it's env for a parse whose inline parses go through this memo."""
        return {_ENV_KEY: self}


def install(md: MarkdownIt) -> MarkdownIt:
    """Make `md`'s inline parse go through the memo of the parse's env (`RenderMemo.parse_env`);
    a parse without one is markdown-it's own."""
    md.core.ruler.at("inline", _inline)
    md.core.ruler.push("countbot_remember_inline", _remember_inline)  # after text_join
    return md


def _memo_of(env: MutableMapping[str, Any]) -> RenderMemo | None:
    memo = env.get(_ENV_KEY)
    if not isinstance(memo, RenderMemo) or env.get("references"):
        return None
    return memo


def _inline(state: StateCore) -> None:
    """markdown-it's core "inline" rule, taking each inline's children from the memo when it
    has them (they were stored after "text_join", which leaves such a list as it is)."""
    memo = _memo_of(state.env)
    if memo is None:
        parse_inlines(state)
        return
    for token in state.tokens:
        if token.type == "inline":
            children = memo.get(("inline", token.content))
            if children is MISSING:
                children = []
                state.md.inline.parse(token.content, state.md, state.env, children)
            token.children = children


def _remember_inline(state: StateCore) -> None:
    """After "text_join": each inline's final children, for the next parse."""
    memo = _memo_of(state.env)
    if memo is None:
        return
    for token in state.tokens:
        if token.type == "inline":
            memo.put(("inline", token.content), token.children)


def _options_key(options: ConsoleOptions) -> tuple[object, ...]:
    return tuple(vars(options).values())  # every field of the dataclass, all hashable


def _text_key(text: Text) -> tuple[object, ...]:
    return (
        text.plain,
        tuple(text.spans),
        text.style,
        text.justify,
        text.overflow,
        text.no_wrap,
        text.end,
        text.tab_size,
    )


class Remembered:
    """A `Text` rendered and measured through the memo: the same segments and measure."""

    __slots__ = ("memo", "text")

    def __init__(self, text: Text, memo: RenderMemo) -> None:
        self.text = text
        self.memo = memo

    def __rich_console__(self, console: Console, options: ConsoleOptions) -> Iterable[Any]:
        key = ("render", _text_key(self.text), _options_key(options))
        segments = self.memo.get(key)
        if segments is MISSING:
            segments = list(self.text.__rich_console__(console, options))
            self.memo.put(key, segments)
        return cast("list[Any]", segments)

    def __rich_measure__(self, console: Console, options: ConsoleOptions) -> Measurement:
        key = ("measure", self.text.plain)  # rich measures a Text by its characters only
        measure = self.memo.get(key)
        if measure is MISSING:
            measure = self.text.__rich_measure__(console, options)
            self.memo.put(key, measure)
        return cast("Measurement", measure)


def _memo(markdown: Markdown) -> RenderMemo:
    memo = getattr(markdown, "memo", None)
    assert isinstance(memo, RenderMemo), "a memo element outside a memo Markdown"
    return memo


_E = TypeVar("_E", bound="_WithMemo")


class _WithMemo(MarkdownElement):
    """An element that keeps the memo of the Markdown it is made for (put before rich's own
    element class among the bases: its `create` makes the element, this one adds the memo)."""

    memo: RenderMemo

    @classmethod
    def create(cls: type[_E], markdown: Markdown, token: Token) -> _E:
        element = cast(_E, super().create(markdown, token))
        element.memo = _memo(markdown)
        return element


class MemoParagraph(_WithMemo, Paragraph):
    """rich's paragraph, its Text rendered through the memo."""

    def __rich_console__(self, console: Console, options: ConsoleOptions) -> RenderResult:
        for part in super().__rich_console__(console, options):
            yield Remembered(part, self.memo) if isinstance(part, Text) else part


class MemoTable(_WithMemo, TableElement):
    """rich's table, the Text of each body cell rendered and measured through the memo."""

    def __rich_console__(self, console: Console, options: ConsoleOptions) -> RenderResult:
        rows = self.body.rows if self.body is not None else []
        for row in rows:
            for cell in row.cells:
                if isinstance(cell.content, Text):  # rich's TableElement adds it to the Table
                    cell.content = cast(Text, Remembered(cell.content, self.memo))
        yield from super().__rich_console__(console, options)


ELEMENTS = {"paragraph_open": MemoParagraph, "table_open": MemoTable}
