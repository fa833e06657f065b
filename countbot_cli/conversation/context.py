"""Builds the messages array of one call: `[system] + history window + [current user message]`.

The history window holds the newest `max_history_messages` earlier messages that may be sent
(the current message does not count against it, unlike CountBot), starting on a user message.
Messages of failed turns and user messages whose turn was interrupted before any answer arrived
are kept in the session but never sent again. An optional token budget trims the window further
(the context-window piece plugs in through `Budget`).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

from countbot_cli.messages import STATUS_FAILED, Message
from countbot_cli.prompts import (
    PromptFacts,
    system_prompt,
    with_long_term_memory,
    with_session_context,
)

# (window, fixed_tokens_hint) -> trimmed window. `fixed` is everything that is not history:
# the system prompt, the tools and the current message (as API dicts), for token accounting.
Budget = Callable[[list[Message], list[dict[str, Any]]], list[Message]]


@dataclass
class TurnContext:
    system: str
    window: list[Message]
    user: Message
    omitted: int  # sendable messages left out of the window
    memory_entries: list[str] = field(default_factory=list)

    def api_messages(self) -> list[dict[str, Any]]:
        return (
            [{"role": "system", "content": self.system}]
            + [m.to_api() for m in self.window]
            + [self.user.to_api()]
        )


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


def history_window(messages: Sequence[Message], max_history: int) -> list[Message]:
    """The newest `max_history` sendable messages (0 = all), starting on a user message."""
    usable = sendable(messages)
    window = usable if max_history <= 0 else usable[-max_history:]
    start = 0
    while start < len(window) and window[start].role != "user":
        start += 1
    return window[start:]


def build_context(
    *,
    facts: PromptFacts,
    summary: str,
    history: Sequence[Message],
    user: Message,
    max_history: int,
    memory_entries: Sequence[str] = (),
    tools: Sequence[dict[str, Any]] = (),
    budget: Budget | None = None,
) -> TurnContext:
    system = with_long_term_memory(
        with_session_context(system_prompt(facts), summary), list(memory_entries)
    )
    window = history_window(history, max_history)
    total = len(sendable(history))
    if budget is not None:
        fixed = [{"role": "system", "content": system}, user.to_api(), *tools]
        window = budget(window, fixed)
    return TurnContext(
        system=system,
        window=window,
        user=user,
        omitted=total - len(window),
        memory_entries=list(memory_entries),
    )
