"""What the listings share (`sessions list`, `sessions search`, the session picker): aligned
columns that count a wide (CJK) character as two, text cut to a width with `…`, and when a
thing happened as people say it ("just now", "3 min ago", "2 days ago", then the date)."""

from __future__ import annotations

from datetime import datetime, timezone

from countbot_cli.textsafe import sanitize_line


def table(head: list[str], rows: list[list[str]]) -> str:
    """`head` and `rows` as aligned columns (two spaces apart, no trailing blanks)."""
    from rich.cells import cell_len  # light; counts wide (CJK) characters as 2 columns

    widths = [max(cell_len(r[i]) for r in [head, *rows]) for i in range(len(head))]
    lines = []
    for r in [head, *rows]:
        cells = [c + " " * (w - cell_len(c)) for c, w in zip(r, widths, strict=True)]
        lines.append("  ".join(cells).rstrip())
    return "\n".join(lines) + "\n"


def fit(text: str, width: int) -> str:
    """`text` in at most `width` columns, cut with `…`."""
    from rich.cells import cell_len, set_cell_size

    return text if cell_len(text) <= width else set_cell_size(text, width - 1) + "…"


def relative_time(iso: str, now: datetime) -> str:
    """'just now', '3 min ago', '5 h ago', '2 days ago', then the date."""
    try:
        then = datetime.fromisoformat(iso.replace("Z", "+00:00"))
    except ValueError:
        return sanitize_line(iso) or "?"
    if then.tzinfo is None:
        then = then.replace(tzinfo=timezone.utc)
    seconds = (now - then).total_seconds()
    if seconds < 60:
        return "just now"
    if seconds < 3600:
        return f"{int(seconds // 60)} min ago"
    if seconds < 86400:
        return f"{int(seconds // 3600)} h ago"
    days = int(seconds // 86400)
    if days < 7:
        return "1 day ago" if days == 1 else f"{days} days ago"
    return then.strftime("%Y-%m-%d")
