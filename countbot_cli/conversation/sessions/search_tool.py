"""The `search_sessions` tool: the model looks up what was said in past conversations.

Reads only (kind `read`, no paths). It stays in its project: it searches the sessions started
in the current workspace; another project's conversations (`all_projects`) need the user's
approval at the prompt each time (denied without a terminal), unless `tools.search_all_sessions`
allows every session. The answer cites each session (id, title,
date) and quotes the matching messages verbatim, so "what did I say about X last week" is
answered from the record. Bounded: at most `MAX_SESSIONS` sessions, `PER_SESSION` messages
each, a message cut at `MESSAGE_CHARS`, the whole answer at `OUTPUT_CHARS`. The conversation
the model is in is never returned (`current()` names it).
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Collection
from pathlib import Path
from typing import Any, Protocol

from countbot_cli.conversation.sessions.search import Hit, Results, SessionSearch
from countbot_cli.conversation.sessions.store import SessionStore
from countbot_cli.errors import CountbotError
from countbot_cli.tools.base import KIND_READ, ToolContext, ToolError, ToolResult, ToolSpec

NAME = "search_sessions"
DEFAULT_SESSIONS = 3
MAX_SESSIONS = 8
PER_SESSION = 3
MESSAGE_CHARS = 1200
OUTPUT_CHARS = 8000
CUT = " …[cut]"

PARAMETERS: dict[str, Any] = {
    "type": "object",
    "properties": {
        "query": {
            "type": "string",
            "description": "Words to look for (any language); sessions holding all of them first.",
        },
        "max_sessions": {
            "type": "integer",
            "minimum": 1,
            "maximum": MAX_SESSIONS,
            "description": f"How many conversations at most (default {DEFAULT_SESSIONS}).",
        },
        "all_projects": {
            "type": "boolean",
            "description": "Also search conversations held in other projects (folders); "
            "the user is asked first. Default: this project's only.",
        },
    },
    "required": ["query"],
    "additionalProperties": False,
}

DESCRIPTION = (
    "Full-text search over the user's past conversations with you in this project (not this "
    "one). Returns "
    "the best matching sessions (id, title, date) with the matching messages quoted verbatim. "
    "Use it when the user refers to something said before; cite the session id."
)


class Searcher(Protocol):
    """What the tool searches with: `SessionSearch`, or one that also searches by meaning
    (memory/session_meaning.py, injected by the app: it is a higher layer)."""

    def search(
        self,
        words: str,
        *,
        limit: int,
        exclude: Collection[str],
        per_session: int,
        workspace: str | None,
    ) -> Results: ...


def _by_words(store: SessionStore) -> Searcher:
    return SessionSearch(store, on_notice=lambda _m: None)


CROSSING = "reads conversations from other projects, not only this workspace's"


def search_sessions_tool(
    sessions_dir: Path,
    current: Callable[[], str | None] = lambda: None,
    *,
    workspace: str,
    everywhere: bool = False,
    searcher: Callable[[SessionStore], Searcher] = _by_words,
) -> ToolSpec:
    """The tool over the sessions in `sessions_dir` started in `workspace` (`everywhere`: all
    of them, unasked); `current()` is the session to leave out."""
    box: list[Searcher] = []

    def reasons(args: dict[str, Any]) -> list[str]:
        return [CROSSING] if args.get("all_projects") is True and not everywhere else []

    def run(args: dict[str, Any], _ctx: ToolContext, _cancel: threading.Event) -> ToolResult:
        if not box:
            box.append(searcher(SessionStore(sessions_dir)))
        query = str(args["query"])
        limit = int(args.get("max_sessions") or DEFAULT_SESSIONS)
        mine = current()
        scope = None if everywhere or args.get("all_projects") is True else workspace
        try:
            results = box[0].search(
                query,
                limit=limit,
                exclude={mine} if mine else (),
                per_session=PER_SESSION,
                workspace=scope,
            )
        except CountbotError as e:
            raise ToolError(e.user_message()) from e
        if not results.hits:
            where = "" if scope is None else " in this project (all_projects searches the others)"
            return ToolResult(f"No past conversation{where} matches {query!r}.")
        head = f"Past conversations matching {query!r}, best first"
        if not results.every_word:
            head += " (none holds every word; these hold some)"
        return ToolResult(_bounded([head + ":", *(_cite(h) for h in results.hits)]))

    return ToolSpec(
        name=NAME,
        description=DESCRIPTION,
        parameters=PARAMETERS,
        run=run,
        kind=KIND_READ,
        reasons=reasons,
    )


def _cite(hit: Hit) -> str:
    title = " ".join(hit.title.split()) or "untitled"
    lines = [f'\n[session {hit.id} · "{title}" · updated {hit.updated_at[:10]}]']
    if not hit.excerpts:
        lines.append("(the title matched)")
    for e in hit.excerpts:
        text = e.content if len(e.content) <= MESSAGE_CHARS else e.content[:MESSAGE_CHARS] + CUT
        where = " (archived)" if e.archived else ""
        lines.append(f"{e.role} at {e.created_at}{where}, message {e.message_id}:\n{text}")
    return "\n".join(lines)


def _bounded(parts: list[str]) -> str:
    """Whole sessions while they fit in OUTPUT_CHARS; the first one is cut if it alone is over."""
    out = parts[0]
    for n, part in enumerate(parts[1:]):
        if len(out) + len(part) + 1 > OUTPUT_CHARS:
            if n == 0:
                out += "\n" + part[: OUTPUT_CHARS - len(out) - len(CUT) - 1] + CUT
            else:
                out += f"\n\n({len(parts) - 1 - n} more not shown: narrow the query)"
            break
        out += "\n" + part
    return out
