"""Builds the messages array of one call: a stable head, the history window, a volatile tail.

Laid out for prompt caching (SPEC §4): the system prompt (date, never the minute), the
instructions file, pinned memory lines and the session summary first; then the history window
(at most `max_history_messages`, its start moving in steps of `window_step` from the first live
message, trimmed further by an optional budget in the same blocks); then the recalled memory
lines, sent inside the current user message and never saved with it. With `keep_recall` (the
`deepseek` preset) recalled lines stay with their question. The invariant: between two steps
each request is the previous one plus the new messages. docs/design/window.md says why.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field, replace
from datetime import date
from typing import TYPE_CHECKING, Any

from countbot_cli.messages import STATUS_FAILED, Message
from countbot_cli.prompts import (
    PromptFacts,
    system_prompt,
    with_instructions,
    with_pinned_memory,
    with_recalled_memory,
    with_session_context,
    with_skills,
)

if TYPE_CHECKING:
    from countbot_cli.config.settings import Settings

# (window, fixed_tokens_hint) -> trimmed window. `fixed` is everything that is not history:
# the system prompt, the tools and the current message (as API dicts), for token accounting.
Budget = Callable[[list[Message], list[dict[str, Any]]], list[Message]]

MIN_STEP = 4
DEFAULT_STEP_WINDOW = 50  # the step of an unlimited window (max_history_messages: 0)


@dataclass
class TurnContext:
    system: str
    window: list[Message]
    user: Message
    omitted: int  # sendable messages left out of the window
    memory_entries: list[str] = field(default_factory=list)  # recalled: the volatile tail
    pinned: list[str] = field(default_factory=list)  # pinned memory lines, in the head
    instructions: str = ""  # the instructions file's name when one is in the head
    language: str = "en"
    # the stable head part by part (what each was built from), for cache_report.py
    head: dict[str, str] = field(default_factory=dict)
    keep_recall: bool = False  # the `keep` layout: recalled lines stay with their question

    def api_user(self) -> dict[str, Any]:
        """The current message as sent: the recalled lines first, then the user's words."""
        if not self.memory_entries:
            return self.user.to_api()
        text = with_recalled_memory(self.user.content, self.memory_entries, self.language)
        return replace(self.user, content=text, kept=None).to_api()

    def api_messages(self) -> list[dict[str, Any]]:
        return (
            [{"role": "system", "content": self.system}]
            + [m.to_api() for m in self.window]
            + [self.api_user()]
        )


def not_kept(entries: Sequence[str], window: Sequence[Message]) -> list[str]:
    """The recalled lines that no message of the window keeps already (`Message.kept`)."""
    kept = "".join(m.kept for m in window if m.kept)
    return [e for e in entries if f"\n- {e}\n" not in kept]


def sendable(messages: Sequence[Message]) -> list[Message]:
    """The stored messages that may be sent to the model again."""
    out: list[Message] = []
    for m in messages:
        if m.status == STATUS_FAILED:
            continue
        if m.role == "user" and m.status is not None:  # interrupted before any answer
            continue
        if m.role not in ("user", "assistant"):
            continue
        out.append(m)
    return out


def without_failed(messages: list[Message], user_id: str) -> list[Message]:
    """Drop a failed/interrupted user message (and its failed partial answer) being retried."""
    out: list[Message] = []
    skipping = False
    for m in messages:
        if m.id == user_id and m.role == "user":
            skipping = True
            continue
        if skipping and m.role == "assistant" and m.status is not None:
            continue
        skipping = False
        out.append(m)
    return out


def window_step(max_history: int) -> int:
    """How many messages the window's start moves by at once: half the window rounded down to
    an even number (a user message and its answer), at least MIN_STEP, at most the window."""
    size = max_history if max_history > 0 else DEFAULT_STEP_WINDOW
    return max(1, min(size, max(MIN_STEP, (size // 2) & ~1)))


def user_start(window: Sequence[Message], start: int) -> int:
    """The first index at or after `start` holding a user message (len(window) if none): a
    window never starts on an assistant message, nor inside a tool call and its results."""
    while start < len(window) and window[start].role != "user":
        start += 1
    return start


def block_start(window: Sequence[Message], at_least: int, step: int) -> int:
    """The oldest place the window may start at or after index `at_least`: a multiple of
    `step` moved on to a user message (len(window) when there is none)."""
    step = max(1, step)
    k = at_least // step
    s = user_start(window, k * step)
    return s if s >= at_least else user_start(window, (k + 1) * step)


def history_window(messages: Sequence[Message], max_history: int) -> list[Message]:
    """At most `max_history` sendable messages (0 = all), starting on a user message; the
    start moves in steps of `window_step(max_history)` from the first live message."""
    usable = sendable(messages)
    if max_history <= 0 or len(usable) <= max_history:
        return usable[user_start(usable, 0) :]
    step = window_step(max_history)
    over = len(usable) - max_history
    start = -(-over // step) * step  # the first step boundary that keeps at most max_history
    return usable[user_start(usable, start) :]


def prompt_facts(
    settings: Settings, today: date, *, tools_enabled: bool, extra_system: str | None = None
) -> PromptFacts:
    """The system prompt's facts: the persona and the workspace of `settings`, the day, whether
    tools are offered, the user's own instructions. The one place they are put together (the
    engine's request; the memory keeper counting the prompt the next request will carry)."""
    p = settings.persona
    return PromptFacts(
        ai_name=p.ai_name,
        user_name=p.user_name,
        personality=p.personality,
        language=p.language,
        workspace=str(settings.tools.workspace),
        today=today,
        tools_enabled=tools_enabled,
        extra_system=extra_system,
    )


def build_context(
    *,
    facts: PromptFacts,
    summary: str,
    history: Sequence[Message],
    user: Message,
    max_history: int,
    memory_entries: Sequence[str] = (),
    pinned: Sequence[str] = (),
    instructions: tuple[str, str] | None = None,
    skills: Sequence[tuple[str, str, str]] = (),
    tools: Sequence[dict[str, Any]] = (),
    budget: Budget | None = None,
    keep_recall: bool = False,
) -> TurnContext:
    """`instructions`: (file name, text) of a trusted instructions file; `skills`: (name,
    description, file) of each skill (config/skills.py). `keep_recall`: the
    `keep` layout (see the module): only lines not kept in a message of the window are sent."""
    head = system_prompt(facts)
    parts = {
        "system prompt": head,
        "instructions": "\n".join(instructions or ()),
        "skills": "\n".join(" ".join(row) for row in skills),
        "pinned line": "\n".join(pinned),
        "session summary": summary,
        "tools": json.dumps(list(tools), sort_keys=True, ensure_ascii=False),
    }
    if instructions is not None:
        head = with_instructions(head, *instructions)
    head = with_skills(head, skills)
    system = with_session_context(with_pinned_memory(head, list(pinned)), summary)
    window = history_window(history, max_history)
    total = len(sendable(history))
    ctx = TurnContext(
        system=system,
        window=window,
        user=user,
        omitted=0,
        memory_entries=list(memory_entries),
        pinned=list(pinned),
        instructions=instructions[0] if instructions else "",
        language=facts.language,
        head=parts,
        keep_recall=keep_recall,
    )
    if keep_recall:
        ctx.memory_entries = not_kept(memory_entries, window)
    if budget is not None:
        fixed = [{"role": "system", "content": system}, ctx.api_user(), *tools]
        ctx.window = budget(window, fixed)
        if keep_recall:  # a message trimmed away takes its kept lines with it
            ctx.memory_entries = not_kept(memory_entries, ctx.window)
    ctx.omitted = total - len(ctx.window)
    return ctx
