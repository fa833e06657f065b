"""`countbot sessions search WORDS`: what the typer CLI calls.

Text: one block a session, best first: short id, title, when it was updated, then a line per
matching message (role, and the sanitised text around the first match). `--json`: a list with
one object a session: `id`, `title`, `created`, `updated`, `score` (higher is better) and
`snippets` (each `message_id`, `role`, `created_at`, `archived`, `text`).
"""

from __future__ import annotations

from collections.abc import Sequence
from datetime import datetime, timezone
from typing import Any, TextIO

from countbot_cli.conversation.sessions.search import Hit
from countbot_cli.conversation.sessions.search_text import Terms, snippet
from countbot_cli.conversation.sessions.session import short_ids
from countbot_cli.errors import EXIT_OK
from countbot_cli.memory.session_meaning import MeaningSearch
from countbot_cli.textsafe import json_text, sanitize_line
from countbot_cli.ui.sessions import relative_time
from countbot_cli.ui.transcript import ROLE_LABELS, UNTITLED


def sessions_search(
    search: MeaningSearch,
    words: Sequence[str],
    out: TextIO,
    *,
    json_out: bool = False,
    limit: int = 10,
    now: datetime | None = None,
) -> int:
    results = search.search(words, limit=limit)
    if json_out:
        out.write(json_text([_json(h, results.terms) for h in results.hits]) + "\n")
        return EXIT_OK
    query = sanitize_line(" ".join(words))
    if not results.hits:
        out.write(f"No session matches '{query}'.\n")
        return EXIT_OK
    if not results.every_word:
        out.write(f"No session holds every word of '{query}'; sessions with some of them:\n\n")
    shorts = short_ids(search.listed_ids())
    now = now or datetime.now(timezone.utc)
    blocks = []
    for h in results.hits:
        title = sanitize_line(h.title) or UNTITLED
        lines = [f"{shorts.get(h.id, h.id)}  {title} · {relative_time(h.updated_at, now)}"]
        for e in h.excerpts:
            label = ROLE_LABELS.get(e.role, e.role) + (" (archived)" if e.archived else "")
            lines.append(f"    {label}: {snippet(e.content, results.terms)}")
        blocks.append("\n".join(lines))
    out.write("\n\n".join(blocks) + "\n")
    return EXIT_OK


def _json(h: Hit, terms: Terms) -> dict[str, Any]:
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
