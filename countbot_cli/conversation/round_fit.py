"""A tool loop's requests fitted to the token budget again, before each model call after the
first of a turn (SPEC §4-§5).

This turn's own messages (the question, each call and its results), the system prompt and the
tools are fixed; the history window is trimmed in the budget's usual blocks and never grows
back within the turn. When the turn's own messages alone no longer fit, its oldest tool results
(never the latest round's) are sent as a short marker instead; the session's tool records keep
them. A request that still fits is sent as it is. docs/design/window.md says more.

Loaded with the first tool round of a turn, as `tool_round.py` is (start-up).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

from countbot_cli.prompts import LEFT_OUT_NOTICE, TOOL_OUTPUT_LEFT_OUT

if TYPE_CHECKING:
    from countbot_cli.conversation.budget import TokenBudget
    from countbot_cli.conversation.view import TurnView
    from countbot_cli.messages import Message


class RoundFit:
    """The requests of one turn's tool loop: `add_round` after each round of calls,
    `next_request` for the messages of the call after it."""

    def __init__(
        self,
        budget: TokenBudget | None,
        window: list[Message],
        first: list[dict[str, Any]],
        tools: Sequence[dict[str, Any]],
    ) -> None:
        """`window`: the history the turn's first request carried; `first`: that request's
        messages (system prompt, the window, the question) exactly as sent."""
        self.budget = budget
        self.window = window
        self.system = first[0]
        self.sent_history = first[1:-1]  # the window's messages as sent, byte for byte
        self.turn = first[-1:]  # this turn's own messages: the question, then each round's
        self.tools = list(tools)
        self.latest = len(self.turn)  # where the latest round's messages start in `turn`
        self.shortened: set[int] = set()  # `turn` indices sent as the marker
        self.said = False  # the notice is given once a turn

    def add_round(self, call: dict[str, Any], results: list[dict[str, Any]]) -> None:
        """One round: the assistant message with `tool_calls`, then its `tool` messages."""
        self.latest = len(self.turn)
        self.turn = [*self.turn, call, *results]

    def next_request(self, view: TurnView) -> list[dict[str, Any]]:
        """The messages of the next call, fitted to the budget (the notice when something was
        left out for it the first time this turn)."""
        if self.budget is not None:
            fixed = [self.system, *self.turn, *self.tools]
            dropped = self._trim_history(self.budget, fixed)
            shortened = self._shorten(self.budget, fixed) if not self.window else 0
            if (dropped or shortened) and not self.said:
                self.said = True
                view.notice(left_out_notice(dropped > 0, shortened > 0, self.budget))
        return [self.system, *self.sent_history, *self.turn]

    def _trim_history(self, budget: TokenBudget, fixed: list[dict[str, Any]]) -> int:
        """The budget's own trimming of the window sent last (a suffix of it); how many
        messages it left out."""
        if not self.window:
            return 0
        kept = budget(self.window, fixed)
        dropped = len(self.window) - len(kept)
        if dropped:
            self.window = kept
            self.sent_history = self.sent_history[dropped:]
        return dropped

    def _shorten(self, budget: TokenBudget, fixed: list[dict[str, Any]]) -> int:
        """Send this turn's oldest tool results (not the latest round's) as the marker, oldest
        first, until the fixed part fits; how many were shortened now."""
        over = budget.overflow(fixed)
        count = budget.counter.count_message
        n = 0
        for i in range(1, self.latest):
            if over <= 0:
                break
            sent = self.turn[i]
            content = sent.get("content")
            if sent.get("role") != "tool" or i in self.shortened or not isinstance(content, str):
                continue
            short = {**sent, "content": TOOL_OUTPUT_LEFT_OUT.format(chars=len(content))}
            saved = count(sent) - count(short)
            if saved <= 0:  # shorter than the marker already
                continue
            self.turn[i] = short
            self.shortened.add(i)
            over -= saved
            n += 1
        return n


def left_out_notice(history: bool, output: bool, budget: TokenBudget) -> str:
    """The user's one line: what was left out, and the context window it was left out for."""
    parts = [("older messages", history), ("earlier tool output", output)]
    what = " and ".join(name for name, left in parts if left)
    return LEFT_OUT_NOTICE.format(what=what, window=budget.context_window)
