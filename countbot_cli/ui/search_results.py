"""How session-search results are drawn (`sessions search`, `/search`).

Text: one block a session, best first: short id, title, when it was updated, then a line per
matching message (role, and the sanitised text around the first match). JSON: one object a
session: `id`, `title`, `created`, `updated`, `score` (higher is better) and `snippets` (each
`message_id`, `role`, `created_at`, `archived`, `text`).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from datetime import datetime
from typing import Any

from countbot_cli.conversation.sessions.search import Hit
from countbot_cli.conversation.sessions.search_text import Terms, snippet
from countbot_cli.textsafe import sanitize_line
from countbot_cli.ui.listing import relative_time
from countbot_cli.ui.transcript import ROLE_LABELS, UNTITLED


def hits_text(hits: Sequence[Hit], terms: Terms, shorts: Mapping[str, str], now: datetime) -> str:
    """The blocks of `hits`, a blank line between them (`shorts`: the short id of each)."""
    blocks = []
    for h in hits:
        title = sanitize_line(h.title) or UNTITLED
        lines = [f"{shorts.get(h.id, h.id)}  {title} · {relative_time(h.updated_at, now)}"]
        for e in h.excerpts:
            label = ROLE_LABELS.get(e.role, e.role) + (" (archived)" if e.archived else "")
            lines.append(f"    {label}: {snippet(e.content, terms)}")
        blocks.append("\n".join(lines))
    return "\n\n".join(blocks) + "\n"


def hit_json(h: Hit, terms: Terms) -> dict[str, Any]:
    return {
        "id": h.id,
        "title": h.title,
        "created": h.created_at,
        "updated": h.updated_at,
        "score": float(f"{h.score:.4g}"),
        "snippets": [
            {
                "message_id": e.message_id,
                "role": e.role,
                "created_at": e.created_at,
                "archived": e.archived,
                "text": snippet(e.content, terms),
            }
            for e in h.excerpts
        ],
    }
