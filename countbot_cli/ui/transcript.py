"""How a conversation is written on the terminal, in one place: the transcript of
`sessions show` (plain or rendered), the markdown of `sessions export` and `/export`, the recap
and last exchanges shown when the REPL resumes a session (`recap`, also `/recap`), and the short lines a turn prints about its
tool calls and usage.

Everything that came from a model or a tool goes through textsafe here. rich is imported only
by the functions that render (the plain forms need nothing but the standard library).
"""

from __future__ import annotations

import json
from collections.abc import Callable
from typing import TYPE_CHECKING, Any, TextIO

from countbot_cli.conversation.input.attachments import describe
from countbot_cli.conversation.sessions.session import Session, plural
from countbot_cli.messages import STATUS_FAILED, STATUS_INTERRUPTED, Message
from countbot_cli.textsafe import sanitize, sanitize_line
from countbot_cli.tools.shell import failed_stderr_tail
from countbot_cli.ui.stream import render_markdown

if TYPE_CHECKING:
    from rich.console import Console

    from countbot_cli.conversation.turn_record import TurnResult
    from countbot_cli.provider import ProviderStats
    from countbot_cli.tools.base import ToolResult

ROLE_LABELS = {"user": "You", "assistant": "Assistant", "tool": "Tool", "system": "System"}
UNTITLED = "(untitled)"
TOOL_PREVIEW_LINES = 4

Item = tuple[str, str]  # (kind, text): kinds title, meta, note, heading, text, plain, tool


# ---- sessions show ----


def transcript(session: Session) -> list[Item]:
    """The session as display items; all text already sanitised for the terminal."""
    items: list[Item] = [
        ("title", sanitize_line(session.title) or UNTITLED),
        ("meta", _meta(session)),
    ]
    said = recap(session)  # the user's summary, else the rolling one
    if said is not None:
        items.append(("note", said))
    tools = _tools_by_answer(session)
    if session.archived:
        n = len(session.archived)
        what = f"{n} earlier message{'' if n == 1 else 's'}"
        items.append(("note", f"{what}, summarised out of the history window:"))
    for i, msg in enumerate(session.all_messages()):
        if i == len(session.archived) and session.archived:
            items.append(("note", "Current history:"))
        other = msg.model and msg.model != session.model  # a fallback link's answer, say
        by = f" · by {sanitize_line(msg.model or '')}" if other else ""
        items.append(("heading", _label(msg) + by))
        items.extend(("tool", line) for line in tools.pop(msg.id, []))
        items.extend(("tool", sanitize_line(describe(r))) for r in msg.attachments or ())
        items.append(("text" if msg.role == "assistant" else "plain", sanitize(msg.content)))
    leftover = [line for lines in tools.values() for line in lines]
    if leftover:
        items.append(("note", "Tool calls not attached to a saved answer:"))
        items.extend(("tool", line) for line in leftover)
    return items


def _meta(s: Session) -> str:
    u = s.usage
    parts = [
        f"id {s.id}",
        sanitize_line(f"{s.provider}/{s.model}".strip("/")) or "?",
        plural(len(s.messages) + len(s.archived), "message"),
        f"created {s.created_at}",
        f"updated {s.updated_at}",
    ]
    if u.total_tokens:
        cached = cached_note(u.cached_tokens)
        parts.append(f"tokens {u.prompt_tokens} in{cached} / {u.completion_tokens} out")
    if u.cost is not None:
        parts.append(f"cost {cost_text(u.cost)}")
    if u.saved is not None:
        parts.append(f"cache saved {cost_text(u.saved)}")
    return " · ".join(parts)


def _label(msg: Message) -> str:
    return f"{_role_label(msg)} · {msg.created_at}"


def _role_label(msg: Message) -> str:
    label = ROLE_LABELS.get(msg.role, msg.role)
    if msg.status == STATUS_FAILED:
        label += " · failed (not sent again; /retry re-runs it)"
    elif msg.status == STATUS_INTERRUPTED:
        label += " · interrupted"
    elif msg.status:
        label += f" · {sanitize_line(msg.status)}"
    return label


def _tools_by_answer(session: Session) -> dict[str, list[str]]:
    grouped: dict[str, list[str]] = {}
    for rec in session.tool_conversations:
        grouped.setdefault(str(rec.get("message_id") or ""), []).append(tool_line(rec))
    return grouped


def tool_line(rec: dict[str, Any]) -> str:
    """One line for a tool call record: name, arguments, outcome, duration, approval."""
    args = rec.get("arguments")
    args_text = args if isinstance(args, str) else json.dumps(args, ensure_ascii=False)
    approval = str(rec.get("approval") or "")
    error = rec.get("error")
    kind = rec.get("outcome") or ("denied" if approval.startswith("den") else None)
    denied = kind == "denied"
    if denied:
        outcome = "denied" + (f" ({first_line(str(error), 100)})" if error else "")
    elif kind in ("interrupted", "timeout"):
        outcome = "interrupted" if kind == "interrupted" else "timed out"
    elif error or kind == "error":
        outcome = "error: " + first_line(str(error or rec.get("result") or ""), 100)
    else:
        outcome = "ok"
    parts = [f"⚙ {rec.get('tool') or '?'} {first_line(args_text, 100)}", outcome]
    if isinstance(rec.get("duration_ms"), (int, float)):
        parts.append(f"{rec['duration_ms']:.0f} ms")
    if approval and not denied and approval not in ("not-run", "interrupted"):
        parts.append(approval)
    return sanitize_line(" · ".join(parts))


def first_line(text: str, limit: int) -> str:
    """`text` on one line (runs of whitespace made one space), cut to `limit` characters."""
    line = " ".join(text.split())
    return line if len(line) <= limit else line[: limit - 1] + "…"


def render_plain(items: list[Item]) -> str:
    """The transcript as plain text (stdout is not a terminal)."""
    chunks = []
    for kind, text in items:
        if kind == "heading":
            chunks.append(f"\n── {text} ──\n")
        elif kind == "tool":
            chunks.append(f"  {text}\n")
        elif kind in ("text", "plain"):
            chunks.append(text.rstrip("\n") + "\n")
        else:
            chunks.append(text + "\n")
    return "".join(chunks)


def render_rich(items: list[Item], out: TextIO, factory: Callable[[TextIO], Any] | None) -> None:
    """The transcript rendered with rich: markdown answers, styled headings and notes."""
    from rich.console import Console
    from rich.markdown import Markdown
    from rich.text import Text

    console = factory(out) if factory else Console(file=out, force_terminal=True, highlight=False)
    styles = {"title": "bold", "meta": "dim", "note": "italic", "tool": "dim", "plain": ""}
    for kind, text in items:
        if kind == "heading":
            console.print()
            console.print(Text(text, style="bold cyan"))
        elif kind == "text":
            console.print(Markdown(text))
        else:  # Text objects never interpret markup: "[red]" prints as is
            console.print(Text(("  " if kind == "tool" else "") + text, style=styles[kind]))


# ---- sessions export, /export ----


def to_markdown(session: Session) -> str:
    """The session as a markdown document: a title heading, then a role heading a message."""
    parts = [f"# {sanitize_line(session.title) or 'Untitled session'}\n"]
    parts.append(
        f"- id: `{session.id}`\n- model: {sanitize_line(session.provider)}/"
        f"{sanitize_line(session.model)}\n- created: {session.created_at}\n"
        f"- updated: {session.updated_at}\n"
    )
    if session.summary:
        parts.append("> **Summary:** " + sanitize(session.summary).replace("\n", "\n> ") + "\n")
    tools = _tools_by_answer(session)
    for msg in session.all_messages():
        lines = [f"## {_role_label(msg)}", ""]
        tool_lines = tools.pop(msg.id, [])
        tool_lines += [sanitize_line(describe(r)) for r in msg.attachments or ()]
        if tool_lines:
            lines += [f"- {line}" for line in tool_lines] + [""]
        lines.append(sanitize(msg.content).rstrip("\n"))
        parts.append("\n".join(lines) + "\n")
    return "\n".join(parts)


# ---- the REPL: resume, and the lines of a turn ----


def short_args(args: dict[str, Any] | None, limit: int = 80) -> str:
    """A tool call's arguments on one line, cut to `limit` characters."""
    if not args:
        return ""
    text = sanitize_line(", ".join(f"{k}={v!r}" for k, v in args.items()))
    return text if len(text) <= limit else text[: limit - 1] + "…"


def recap(session: Session) -> str | None:
    """What the conversation is about, for a resume and /recap: the user's summary, else the
    rolling one (memory/rolling.py); None when it has neither."""
    if session.summary.strip():
        return "Summary: " + sanitize(session.summary.strip())
    if session.rolling_summary.strip():
        return "Recap: " + sanitize(session.rolling_summary.strip())
    return None


def render_recent(console: Console, session: Session, exchanges: int = 3) -> None:
    """A resumed session's title, its recap and its last few exchanges, rendered (SPEC §2)."""
    from rich.text import Text

    s = session
    total = len(s.messages) + len(s.archived)
    title = sanitize_line(s.title) or UNTITLED
    console.print(Text(f"Resumed “{title}” · {plural(total, 'message')} · {s.id}", style="bold"))
    said = recap(s)
    if said is not None:
        console.print(Text(said, style="italic"))
    users = [i for i, m in enumerate(s.messages) if m.role == "user"]
    start = users[-exchanges] if len(users) >= exchanges else 0
    earlier = start + len(s.archived)
    if earlier:
        note = (
            f"… {plural(earlier, 'earlier message')} (/export or `countbot sessions show {s.id}` "
            "shows all)"
        )
        console.print(Text(note, style="dim"))
    for m in s.messages[start:]:
        if m.role == "user":
            console.print(Text("> " + sanitize(m.content), style="bold cyan"))
        elif m.role == "assistant":
            render_markdown(console, m.content)
        if m.status:
            console.print(Text(f"({sanitize_line(m.status)})", style="dim"))
    console.print()


def interrupted_what(result: TurnResult) -> str:
    """What an interrupted turn left: stopped in a tool call (at its approval prompt or while
    it ran), a partial answer, or nothing."""
    calls = result.tool_calls
    if calls and calls[-1].get("outcome") == "interrupted":
        return "interrupted during a tool call"
    return "the partial answer is kept" if result.answer else "nothing arrived"


def usage_line(result: TurnResult, elapsed: float, stats: ProviderStats | None = None) -> str:
    """The dim line after an answer: tokens (or the local model's timing), the cached part of
    the prompt when the provider reports one, the cost when prices are set, time, tool calls."""
    u = result.usage
    parts = []
    if stats is not None:  # the local model: load time, first token, tokens per second
        parts.append(sanitize_line(stats.describe()))
        if u.cached_tokens is not None:
            parts.append(f"{u.prompt_tokens:,} in{cached_note(u.cached_tokens)}")
    elif u.prompt_tokens or u.completion_tokens:
        cached = cached_note(u.cached_tokens)
        parts.append(f"{u.prompt_tokens:,} in{cached} · {u.completion_tokens:,} out tokens")
    if u.cost is not None:
        parts.append(f"cost {cost_text(u.cost)}{today_note(result.cost_today)}")
    if u.saved is not None:
        parts.append(f"cache saved {cost_text(u.saved)}{today_note(result.saved_today)}")
    if result.cache.missed:  # a turn that should have read the cache did not: why
        parts.append(sanitize_line(result.cache.short()))
    parts.append(f"{elapsed:.1f} s")
    if result.upkeep_wait >= 0.05:  # the embedded model finished (part of) a memory upkeep first
        parts.append(f"waited {result.upkeep_wait:.1f} s for the memory upkeep")
    if result.tool_calls:
        n = len(result.tool_calls)
        parts.append(f"{n} tool call{'s' if n != 1 else ''}")
    return " · ".join(parts)


def ask_usage(result: TurnResult) -> str:
    """`ask`'s dim line on a terminal, after `session ID`: tokens, cost, a cache miss's why."""
    u = result.usage
    cached = cached_note(u.cached_tokens)
    usage = f" · {u.prompt_tokens}{cached}+{u.completion_tokens} tokens" if u.total_tokens else ""
    if u.cost is not None:
        usage += f" · cost {cost_text(u.cost)}{today_note(result.cost_today)}"
    if u.saved is not None:
        usage += f" · cache saved {cost_text(u.saved)}{today_note(result.saved_today)}"
    if result.cache.missed:
        usage += f" · {sanitize_line(result.cache.short())}"
    return usage


def cached_note(cached: int | None) -> str:
    """` (1,100 cached)`, or nothing when the provider reported no cache figure."""
    return "" if cached is None else f" ({cached:,} cached)"


def today_note(cost_today: float | None) -> str:
    """` (today 0.0345)`: the day's cost over all sessions, or nothing without prices."""
    return "" if cost_today is None else f" (today {cost_text(cost_today)})"


def cost_text(cost: float) -> str:
    """A cost in the prices' own currency: 4 significant decimals below 1, else 2."""
    return f"{cost:.2f}" if cost >= 1 else f"{cost:.4f}"


def tool_preview(result: ToolResult) -> list[str]:
    """A few dim lines for a finished tool call; the whole output stays in /last-tool."""
    if result.interrupted:
        state = "✗ interrupted"
    elif result.timed_out:
        state = "✗ timed out"
    elif not result.ok:
        state = "✗ " + sanitize_line(result.error or "failed")
    else:
        state = "✓"
    lines = sanitize(result.content).splitlines()
    shown = [f"  {line}" for line in lines[:TOOL_PREVIEW_LINES]]
    head = f"  {state} · {len(lines)} line{'s' if len(lines) != 1 else ''}"
    if len(lines) > TOOL_PREVIEW_LINES:
        shown.append(f"  … {len(lines) - TOOL_PREVIEW_LINES} more (/last-tool shows all)")
    if not result.ok:  # a failed command: the last lines of its stderr say why
        return [head, *(f"  {sanitize_line(line)}" for line in failed_stderr_tail(result))]
    return [head, *shown]
