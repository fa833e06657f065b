"""countbot_cli.ui.mdblocks: rich's Markdown on one shared parser, and its fallback.

Every frame of a streamed answer renders through `mdblocks.markdown`; it must be rich's own
`Markdown` in every field (the look is checked cell for cell in test_stream_look.py) while not
building a markdown-it parser per frame.
"""

from __future__ import annotations

import pytest
import rich.markdown
from rich.markdown import Markdown

from countbot_cli.ui import mdblocks

TEXT = "# Title\n\nSome *text* with `code` and ~~strike~~.\n\n| a | b |\n|---|---|\n| 1 | 2 |\n"


def test_markdown_is_riches_own_field_for_field_on_one_shared_parser(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    md = mdblocks.markdown(TEXT, code_theme="monokai")
    assert isinstance(md, Markdown)
    assert vars(md) == vars(Markdown(TEXT, code_theme="monokai"))
    built: list[object] = []
    real = mdblocks.MarkdownIt
    for module in (mdblocks, rich.markdown):
        monkeypatch.setattr(module, "MarkdownIt", lambda *a: built.append(a) or real(*a))
    for _ in range(3):
        mdblocks.markdown(TEXT, code_theme="monokai")
    assert built == []  # no parser built per render


def test_a_rich_that_sets_other_fields_gets_its_own_class(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    real_init = Markdown.__init__

    def init(self: Markdown, markup: str, **kw: object) -> None:
        real_init(self, markup, **kw)  # type: ignore[arg-type]
        self.new_field = 1  # type: ignore[attr-defined]

    monkeypatch.setattr(Markdown, "__init__", init)
    mdblocks._shared_parser_fits.cache_clear()
    try:
        md = mdblocks.markdown(TEXT, code_theme="monokai")
        assert type(md) is Markdown and md.new_field == 1  # type: ignore[attr-defined]
    finally:
        mdblocks._shared_parser_fits.cache_clear()


@pytest.mark.parametrize("info", ["p", "py", "python", "java", "nosuchlang", "sql  extra", ""])
@pytest.mark.parametrize("before", ["x\n\n", "- a\n\n  ", "> "])
def test_a_fence_without_code_yet_renders_the_cells_rich_draws(before: str, info: str) -> None:
    """`mdblocks.markdown` highlights an empty fence as "text" (no lexer looked up for a name
    still being typed): the same segments as rich's own Markdown, for any name."""
    import io

    from rich.console import Console

    def lines(md: Markdown) -> list[list[object]]:
        c = Console(file=io.StringIO(), force_terminal=True, width=60, color_system="truecolor")
        return [list(line) for line in c.render_lines(md, c.options)]

    for src in (f"{before}```{info}", f"{before}```{info}\n", f"{before}```{info}\nx = 1\n"):
        ours = mdblocks.markdown(src, code_theme="monokai")
        assert lines(ours) == lines(Markdown(src, code_theme="monokai")), src
