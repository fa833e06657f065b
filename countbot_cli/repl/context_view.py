"""`/context`: what exactly went into the last request.

The context window it was fitted to and where that figure comes from (the server, the config, a
preset, countbot's table); the system prompt and its parts; the pinned memory lines and those
recalled for the message (each with its `countbot memory unpin N` / `pin N` hint, numbered as
`memory show` numbers them); the history window; the tools; the current message; how much of
the request the provider read from its prompt cache (as whole parts of the request); and what
changed since the session's previous request (conversation/cache_report.py).
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

from countbot_cli.conversation.sessions.session import plural
from countbot_cli.errors import CountbotError
from countbot_cli.memory.embed import describe as describe_recall
from countbot_cli.memory.report import entry_for
from countbot_cli.memory.store import MemoryStore
from countbot_cli.messages import Message
from countbot_cli.textsafe import sanitize_line
from countbot_cli.ui.transcript import first_line

if TYPE_CHECKING:
    from countbot_cli.conversation.cache_report import CacheReport
    from countbot_cli.conversation.chat import Conversation
    from countbot_cli.conversation.context import TurnContext
    from countbot_cli.conversation.sessions.session import Session
    from countbot_cli.conversation.tokens import TokenCounter
    from countbot_cli.repl.toolbar import ContextMeter

NOTHING_YET = (
    "No request yet in this conversation: /context shows the last one after a turn "
    "(/tokens counts the next).\n"
)


def context_report(meter: ContextMeter, conversation: Conversation) -> str:
    """The last request, part by part (see the module)."""
    last = meter.last
    ctx = last.context if last is not None else None
    if last is None or ctx is None:
        return NOTHING_YET
    # the engine that made it: a fallback link's when the chosen provider could not answer
    link = conversation.fallback.link(last.fallback["to"]) if last.fallback else None
    engine = link or conversation.engine
    counter = meter.counter(engine.provider.model)
    memory_file = engine.settings.memory.file
    lines = [f"Last request to {sanitize_line(last.model)}"]
    budget = engine.budget
    if budget is not None:  # the figure history is trimmed to, and where it comes from
        source = f" ({sanitize_line(budget.source)})" if budget.source else ""
        lines.append(f"  context window: {budget.context_window:,} tokens{source}")
    lines += _system_rows(ctx, conversation.session, counter, memory_file)
    lines.append(f"  recall: {describe_recall(engine.settings.memory.inject)}")
    lines += _recalled_rows(ctx.memory_entries, memory_file)
    lines += _window_rows(ctx, counter)
    schemas = engine.tool_schemas()
    tools = [_tool_name(t) for t in schemas]
    tool_tokens = counter.count_tools(schemas) if schemas else 0
    shown = f"{', '.join(tools)} ({tool_tokens:,} tokens)" if tools else "none offered"
    lines.append(f"  tools: {shown}")
    lines.append(f"  your message: {_quote(ctx.user.content)}")
    if last.tool_calls:
        lines.append("  cached: this turn made several requests (tool rounds); see the usage line")
    else:
        u = last.usage
        lines.append(_cached_row(ctx, u.prompt_tokens, u.cached_tokens, counter, tool_tokens))
    lines.append(_changes_row(last.cache))
    return "\n".join(lines) + "\n"


def _changes_row(report: CacheReport) -> str:
    """What changed since the session's previous request (conversation/cache_report.py)."""
    if not report.previous:
        return "  since the previous request: none to compare with (the first of this session)"
    said = sanitize_line(report.details()) or "nothing in the head, history or model changed"
    return f"  since the previous request: {said}" + (
        " — the cache missed" if report.missed else ""
    )


def _system_rows(
    ctx: TurnContext, session: Session, counter: TokenCounter, memory_file: Path
) -> list[str]:
    rows = [f"  system prompt: {counter.count_text(ctx.system):,} tokens"]
    rows.append("    persona and rules")
    own = session.summary.strip()
    summary = own or session.rolling_summary.strip()
    if summary and summary[:40] in ctx.system:
        what = "session summary" if own else "rolling summary (what left the window)"
        rows.append(f"    {what}: {_quote(summary)}")
    if ctx.instructions:
        rows.append(f"    instructions file: {sanitize_line(ctx.instructions)}")
    for entry in ctx.pinned:
        rows.append(f"    pinned memory: {_quote(entry)}{_hint(entry, memory_file, 'unpin')}")
    return rows


def _recalled_rows(entries: Sequence[str], memory_file: Path) -> list[str]:
    if not entries:
        return ["  recalled memory: none"]
    rows = [f"  recalled memory ({plural(len(entries), 'line')}, sent with your message):"]
    rows += [f"    {_quote(e)}{_hint(e, memory_file, 'pin')}" for e in entries]
    return rows


def _window_rows(ctx: TurnContext, counter: TokenCounter) -> list[str]:
    window = ctx.window
    if not window:
        left = f" ({ctx.omitted} older left out)" if ctx.omitted else ""
        return [f"  history: no earlier messages sent{left}"]
    tokens = sum(counter.count_message(m.to_api()) for m in window)
    left = f", {ctx.omitted} older left out" if ctx.omitted else ""
    return [
        f"  history: {plural(len(window), 'message')}, {tokens:,} tokens{left}",
        f"    first: {_said(window[0])}",
        f"    last:  {_said(window[-1])}",
    ]


def _cached_row(
    ctx: TurnContext, prompt: int, cached: int | None, counter: TokenCounter, tool_tokens: int
) -> str:
    """Which whole parts of the request lay inside the provider's cached prefix (chat templates
    put the tool definitions at the head, with the system prompt)."""
    if cached is None:
        return "  cached: the provider reported no prompt cache"
    if not cached:
        return f"  cached: none of the {prompt:,} prompt tokens (the prefix changed or is new)"
    api = ctx.api_messages()
    sizes = [counter.count_message(m) for m in api]
    sizes[0] += tool_tokens
    scale = prompt / max(1, sum(sizes))  # the provider's count, spread over our parts
    covered, spent = 0, 0.0
    for n in sizes:
        if spent + n * scale > cached * 1.02:  # a token or two of template slack
            break
        spent += n * scale
        covered += 1
    head = "system prompt" + (" and tools" if tool_tokens else "")
    what = _parts(covered, len(ctx.window), head)
    return f"  cached: {cached:,} of {prompt:,} prompt tokens, about {what}"


def _parts(covered: int, history: int, head: str) -> str:
    if covered == 0:
        return f"part of the {head}"
    if covered == 1:
        return f"the {head}"
    if covered <= 1 + history:
        return f"the {head}, then {covered - 1} of the {plural(history, 'history message')}"
    return "the whole request up to your message"


def _said(m: Message) -> str:
    return f"{m.role} · {_quote(m.content)}"


def _quote(text: Any) -> str:
    if not isinstance(text, str):
        text = " ".join(p.get("text", "") for p in text if isinstance(p, dict)) or "(image)"
    return f"“{sanitize_line(first_line(text, 70))}”"


def _hint(entry: str, memory_file: Path, verb: str) -> str:
    n = _line_of(entry, memory_file)
    return f"   (countbot memory {verb} {n})" if n else ""


def _line_of(entry: str, memory_file: Path) -> int | None:
    """The entry number of a memory line as the prompt holds it (`DATE: CONTENT`)."""
    try:
        hit = entry_for(entry, MemoryStore(memory_file).numbered())
    except (CountbotError, OSError):
        return None
    return hit[0] if hit else None


def _tool_name(schema: dict[str, Any]) -> str:
    fn = schema.get("function")
    return sanitize_line(str(fn.get("name", "?"))) if isinstance(fn, dict) else "?"
