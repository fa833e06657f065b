"""The `memory` tool: long-term memory (MEMORY.md) for the model, with CountBot's parameters:
`action` write|search|read, `content`, `keywords`,
`max_results` (15), `match_mode` or|and, `start_line`/`end_line` (1-based), `recent_count` (10).

`write` adds a line `YYYY-MM-DD|tool|content` and needs approval like a file write (the preview
shows the line). Search results are ranked (all words first, then more words, newer first);
`match_mode: and` keeps only entries holding every word. Lines are shown as `[N] line`, N being
the entry number (1..N in file order, header comments and blank lines not counted): the number
`countbot memory show` prints and `why`, `pin`, `mute`, `delete`, `edit` and `/context` take, so
the model and the user name an entry alike. `read`'s `start_line`/`end_line` (CountBot's names)
are entry numbers too, documented so in the schema: a range of entries, clamped as before.
"""

from __future__ import annotations

import re
import threading
from collections.abc import Callable
from datetime import date
from typing import TYPE_CHECKING, Any

from countbot_cli.errors import CountbotError
from countbot_cli.memory.search import has_every_term, query_terms
from countbot_cli.memory.store import normalize_content
from countbot_cli.tools.base import KIND_MEMORY, ToolContext, ToolError, ToolResult, ToolSpec

if TYPE_CHECKING:
    from countbot_cli.memory.search import Entry
    from countbot_cli.memory.store import MemoryStore

SOURCE_TOOL = "tool"
_SHOWN = re.compile(r"^\[\d+\] (\d{4}-\d\d-\d\d\|[^|\n]*\|[^\n]*)$", re.MULTILINE)
DEFAULT_MAX_RESULTS = 15
DEFAULT_RECENT = 10
MAX_CONTENT_CHARS = 2000

PARAMETERS: dict[str, Any] = {
    "type": "object",
    "properties": {
        "action": {"type": "string", "enum": ["write", "search", "read"]},
        "content": {
            "type": "string",
            "description": "write: one line of durable facts, items separated by '；'.",
        },
        "keywords": {"type": "string", "description": "search: words separated by spaces."},
        "max_results": {
            "type": "integer",
            "minimum": 1,
            "maximum": 100,
            "description": "Default 15.",
        },
        "match_mode": {
            "type": "string",
            "enum": ["or", "and"],
            "description": "search: 'or' (default) any word, 'and' every word.",
        },
        "start_line": {
            "type": "integer",
            "minimum": 1,
            "description": "read: first entry number, the [N] results show (1-based).",
        },
        "end_line": {
            "type": "integer",
            "minimum": 1,
            "description": "read: last entry number (inclusive).",
        },
        "recent_count": {
            "type": "integer",
            "minimum": 1,
            "maximum": 200,
            "description": "read without start_line: how many recent entries (default 10).",
        },
    },
    "required": ["action"],
    "additionalProperties": False,
}

DESCRIPTION = (
    "Long-term memory (MEMORY.md): `write` one line of durable facts (the user's preferences, "
    "decisions, settings, things they asked you to remember; never chit-chat or one-off "
    "results), `search` by keywords, or `read` a range of entry numbers / the most recent "
    "entries. Results show each entry as `[N] date|source|content`, N its entry number."
)


def _line(number: int | None, e: Entry) -> str:
    return f"[{number}] {e.line}"


def shown_lines(result_text: str) -> list[str]:
    """The MEMORY.md lines a search or read result showed the model (`[N] line` rows)."""
    return [m.group(1) for m in _SHOWN.finditer(result_text)]


def _count(n: int) -> str:
    return f"{n} entry" if n == 1 else f"{n} entries"


def _header(store: MemoryStore) -> str:
    st = store.stats()
    span = f", dates {st.first_date} ~ {st.last_date}" if st.first_date else ""
    return f"Memory holds {_count(st.total)}{span}."


def run_write(store: MemoryStore, args: dict[str, Any], today: date) -> ToolResult:
    content = str(args.get("content") or "").strip()
    if not content:
        raise ToolError("write needs 'content': one line of facts to remember")
    if len(content) > MAX_CONTENT_CHARS:
        raise ToolError(
            f"content is {len(content)} characters; keep a memory entry under "
            f"{MAX_CONTENT_CHARS} (only the durable facts, items separated by '；')"
        )
    entry = store.add(content, SOURCE_TOOL, date=today)
    total = store.stats().total
    if entry is None:
        return ToolResult(f"Already in memory; not added again ({_count(total)}).")
    return ToolResult(f"Saved to memory as entry {store.number_of(entry)} ({_count(total)}).")


def run_search(store: MemoryStore, args: dict[str, Any]) -> ToolResult:
    keywords = str(args.get("keywords") or "").strip()
    if not keywords:
        raise ToolError("search needs 'keywords': words separated by spaces")
    limit = int(args.get("max_results") or DEFAULT_MAX_RESULTS)
    if not store.tail(1):
        return ToolResult("Memory is empty.")
    if args.get("match_mode") == "and":
        terms = query_terms([keywords])
        hits = [e for e in store.search(keywords, limit=None) if has_every_term(terms, e.content)]
        total = len(hits)
    else:
        hits, total = store.search_total(keywords, limit=None)
    if not hits:
        return ToolResult(f"{_header(store)}\n\nNo entry matches: {keywords}")
    shown = hits[:limit]
    body = "\n".join(_line(store.number_of(e), e) for e in shown)
    more = f"\n... {total} matches, showing the best {len(shown)}" if total > len(shown) else ""
    return ToolResult(f"{_header(store)}\n\n{body}{more}")


def run_read(store: MemoryStore, args: dict[str, Any]) -> ToolResult:
    if not store.tail(1):
        return ToolResult("Memory is empty.")
    numbered = store.numbered()
    start = args.get("start_line")
    if start is not None:  # entry numbers, clamped into 1..N (an end before the start: one)
        first = min(max(int(start), 1), len(numbered))
        end = args.get("end_line")
        last = min(max(int(end) if end is not None else first, first), len(numbered))
        rows = numbered[first - 1 : last]
    else:
        rows = numbered[-int(args.get("recent_count") or DEFAULT_RECENT) :]
    body = "\n".join(_line(n, e) for n, e in rows) or "(no entries in that range)"
    return ToolResult(f"{_header(store)}\n\n{body}")


def memory_tool(store: MemoryStore, *, today: Callable[[], date] = date.today) -> ToolSpec:
    """The `memory` ToolSpec over `store` (kind "memory": writes need approval)."""

    def run(args: dict[str, Any], ctx: ToolContext, cancel: threading.Event) -> ToolResult:
        action = args.get("action")
        try:
            if action == "write":
                return run_write(store, args, today())
            if action == "search":
                return run_search(store, args)
            if action == "read":
                return run_read(store, args)
        except CountbotError as exc:  # a locked or unreadable MEMORY.md
            raise ToolError(exc.user_message()) from exc
        raise ToolError(f"unknown action '{action}'; use write, search or read")

    def preview(args: dict[str, Any], ctx: ToolContext, may_read: bool) -> str:
        if args.get("action") != "write":
            return ""
        # exactly the line the store will write (controls dropped, whitespace runs one space)
        content = normalize_content(str(args.get("content") or ""))
        return f"add to {store.path}:\n{today().isoformat()}|{SOURCE_TOOL}|{content}"

    def reasons(args: dict[str, Any]) -> list[str]:
        return ["writes to long-term memory (MEMORY.md)"] if args.get("action") == "write" else []

    return ToolSpec(
        name="memory",
        description=DESCRIPTION,
        parameters=PARAMETERS,
        run=run,
        kind=KIND_MEMORY,
        preview=preview,
        reasons=reasons,
    )
