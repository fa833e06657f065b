"""Which messages of a session are overflow: the live messages older than the next request's
history window, as the memory keeper (memory/keeper.py) computes it before archiving them.

The window is `context.history_window` trimmed by the token budget in the same blocks, counted
here with the system prompt and the session summary but no tool definitions, pinned lines or
recalled memory, so it is never smaller than the window the engine sends: nothing still sent is
archived. The last exchange (the last user message and what follows) is never overflow, so
/undo and /retry always find it; failed turns alone stay for /retry.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from datetime import date
from typing import TYPE_CHECKING

from countbot_cli.conversation.budget import make_budget
from countbot_cli.conversation.context import history_window, prompt_facts, sendable
from countbot_cli.messages import Message
from countbot_cli.prompts import system_prompt, with_session_context

if TYPE_CHECKING:
    from countbot_cli.config.settings import Settings
    from countbot_cli.conversation.budget import TokenBudget
    from countbot_cli.conversation.sessions.session import Session
    from countbot_cli.conversation.tokens import TokenCounter


class OverflowRegion:
    """The overflow of a session for one keeper's settings; the token budget is made on first
    use (it loads ratios and may count)."""

    def __init__(
        self,
        settings: Settings,
        counter: Callable[[], TokenCounter],
        today: Callable[[], date],
    ) -> None:
        self.settings = settings
        self._counter = counter
        self._today = today
        self._budget: TokenBudget | None = None

    def messages(self, session: Session, *, everything: bool = False) -> list[Message]:
        """The live messages of `session` outside the next request's window, oldest first.
        `everything` (/compact): all but the last exchange."""
        msgs = session.messages
        max_history = self.settings.persona.max_history_messages
        window = self._token_window(session, history_window(msgs, max_history))
        if everything:
            window = window[_last_user(window) :]
        usable = sendable(msgs)
        first = window[0] if window else None
        if first is None and not usable:  # only failed turns: they stay for /retry
            return []
        edge = first if first is not None else usable[-1]
        boundary = _index(msgs, edge) + (0 if first is not None else 1)
        last_user = next((i for i in range(len(msgs) - 1, -1, -1) if msgs[i].role == "user"), 0)
        return msgs[: min(boundary, last_user)]

    def _token_window(self, session: Session, window: list[Message]) -> list[Message]:
        """`window` trimmed by the token budget, counting the system prompt and the session
        summary but no tools or recalled memory: never smaller than the engine's window."""
        if not window:
            return window
        if self._budget is None:
            self._budget = make_budget(self.settings, self._counter())
        # the shorter tool text; no --system/`/system` text either
        facts = prompt_facts(self.settings, self._today(), tools_enabled=False)
        system = with_session_context(system_prompt(facts), session.context_summary())
        fixed = [{"role": "system", "content": system}, {"role": "user", "content": ""}]
        return self._budget(window, fixed)


def _last_user(window: Sequence[Message]) -> int:
    return next((i for i in range(len(window) - 1, -1, -1) if window[i].role == "user"), 0)


def _index(messages: Sequence[Message], m: Message) -> int:
    return next(i for i in range(len(messages) - 1, -1, -1) if messages[i] is m)
