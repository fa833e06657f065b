"""How `/help` lays its text out in the terminal's width: wrapped at word boundaries (a word is
never cut; one longer than the line, such as a path, runs over), and a command's description
beside it, or under it when the terminal is too narrow for the two side by side."""

from __future__ import annotations

import textwrap
from collections.abc import Sequence

STACK_BELOW = 30  # columns: a description narrower than this goes under its command instead


def paragraph(text: str, width: int, indent: str = "", first: str | None = None) -> list[str]:
    """`text` wrapped within `width` columns: its first line after `first` (default `indent`),
    the others after `indent`."""
    head = indent if first is None else first
    lines = textwrap.wrap(
        text,
        max(width, len(head) + 1, len(indent) + 1),
        initial_indent=head,
        subsequent_indent=indent,
        break_long_words=False,
        break_on_hyphens=False,
    )
    return lines or [head.rstrip()]


def two_columns(rows: Sequence[tuple[str, str]], width: int) -> list[str]:
    """`  NAME  description` rows within `width` columns, the descriptions aligned and wrapped;
    stacked (each description under its name, indented) when beside the longest name it would
    get fewer than STACK_BELOW columns."""
    if not rows:
        return []
    col = max(len(name) for name, _ in rows)
    lines: list[str] = []
    for name, text in rows:
        if width - col - 4 >= STACK_BELOW:
            lines += paragraph(text, width, " " * (col + 4), first=f"  {name.ljust(col)}  ")
        else:
            lines += paragraph(name, width, "    ", first="  ")
            lines += paragraph(text, width, "      ") if text else []
    return lines
