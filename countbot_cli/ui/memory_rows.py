"""How memory entries are drawn (`memory show|search|add|pin…`, `/memory`): one row an entry,
`  N  DATE        SOURCE       content  [pinned]`, the columns aligned. MEMORY.md content may
come from a model or a hand edit, so every field goes through `textsafe.sanitize_line`."""

from __future__ import annotations

from collections.abc import Sequence

from countbot_cli.memory.marks import Marks
from countbot_cli.memory.store import Entry
from countbot_cli.textsafe import sanitize_line


def memory_rows(numbered: Sequence[tuple[int, Entry]], marks: Marks) -> str:
    """The rows of (number, entry) pairs, pinned and muted ones marked ("" for none)."""
    if not numbered:
        return ""
    num_w = max(len(str(n)) for n, _ in numbered)
    sources = [sanitize_line(e.source) for _, e in numbered]
    src_w = max(len(s) for s in sources)
    rows = [
        f"{n:>{num_w}}  {sanitize_line(e.date)}  {s:<{src_w}}  {sanitize_line(e.content)}"
        + _mark(marks, e)
        for (n, e), s in zip(numbered, sources, strict=True)
    ]
    return "\n".join(rows) + "\n"


def _mark(marks: Marks, entry: Entry) -> str:
    if marks.is_pinned(entry):
        return "  [pinned]"
    if marks.is_muted(entry):
        return "  [muted]"
    return ""
