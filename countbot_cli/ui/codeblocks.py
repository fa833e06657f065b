"""Fenced code blocks of an answer: the one extraction `ask -x/--extract` and `/copy N` share.

Parsed with markdown-it-py (CommonMark, the grammar rich renders with), so a fence inside a list
item or a quote is found with its indentation removed, and a fence the answer left open runs to
the end, as it is shown. Only fenced blocks count (``` or ~~~), not indented code. Imports
markdown-it only, not rich.
"""

from __future__ import annotations

from functools import lru_cache
from typing import TYPE_CHECKING, NamedTuple

if TYPE_CHECKING:
    from markdown_it import MarkdownIt


class CodeBlock(NamedTuple):
    lang: str  # the fence's info string's first word ("" when none)
    code: str  # the block's text, raw, ending with a newline unless empty

    def describe(self) -> str:
        """'python, 3 lines' — for "copied code block 2 (python, 3 lines)"."""
        n = self.code.count("\n") + (0 if self.code.endswith("\n") or not self.code else 1)
        lines = f"{n} line" + ("" if n == 1 else "s")
        return f"{self.lang}, {lines}" if self.lang else lines


@lru_cache(maxsize=1)
def _parser() -> MarkdownIt:
    from markdown_it import MarkdownIt

    return MarkdownIt().enable("strikethrough").enable("table").disable("inline")


def code_blocks(markdown: str) -> list[CodeBlock]:
    """Every fenced code block of `markdown`, in order."""
    if "```" not in markdown and "~~~" not in markdown:
        return []
    return [
        CodeBlock((t.info.split() or [""])[0], t.content)
        for t in _parser().parse(markdown)
        if t.type == "fence"
    ]


def extracted(markdown: str, *, every: bool) -> str:
    """What `ask -x` prints: the first block's code (every=True: all blocks, one blank line
    between), each ending with a newline; "" when the answer has no fenced block."""
    blocks = code_blocks(markdown)
    chosen = blocks if every else blocks[:1]
    texts = [b.code if b.code.endswith("\n") or not b.code else b.code + "\n" for b in chosen]
    return "\n".join(texts)
