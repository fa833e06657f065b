"""The body of `countbot sessions search WORDS` (also `/search` in the chat): the sessions
that hold the words, best first, drawn by ui/search_results.py as text or `--json`."""

from __future__ import annotations

from collections.abc import Sequence
from datetime import datetime, timezone
from typing import TextIO

from countbot_cli.conversation.sessions.session import short_ids
from countbot_cli.conversation.sessions.store import SessionStore
from countbot_cli.errors import EXIT_OK
from countbot_cli.memory.session_meaning import MeaningSearch
from countbot_cli.textsafe import json_text, sanitize_line
from countbot_cli.ui.search_results import hit_json, hits_text


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
        out.write(json_text([hit_json(h, results.terms) for h in results.hits]) + "\n")
        return EXIT_OK
    query = sanitize_line(" ".join(words))
    if not results.hits:
        out.write(f"No session matches '{query}'.\n")
        return EXIT_OK
    if not results.every_word:
        out.write(f"No session holds every word of '{query}'; sessions with some of them:\n\n")
    shorts = short_ids(search.listed_ids())
    out.write(hits_text(results.hits, results.terms, shorts, now or datetime.now(timezone.utc)))
    return EXIT_OK


def search_command(
    store: SessionStore, words: Sequence[str], out: TextIO, *, json_out: bool, limit: int
) -> int:
    """`countbot sessions search`: by words, and by meaning with the `recall` extra."""
    # notices go where the store's go (stderr); asked for, it waits for every message's vector
    search = MeaningSearch(store, wait=None)
    return sessions_search(search, words, out, json_out=json_out, limit=limit)
