"""The narrow sink a turn reports to: the engine and its tool rounds never print.

The REPL, `ask` and tests each provide a `TurnView`; `NullView` shows nothing. A conversation
reports to a `ConversationView`, which also shows the end of the turn and the memory upkeep
after it; `SilentView` shows nothing of them either.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Protocol

if TYPE_CHECKING:
    from countbot_cli.conversation.turn_record import TurnResult
    from countbot_cli.messages import ToolCall
    from countbot_cli.tools.approval import Decision
    from countbot_cli.tools.base import PreparedCall, ToolResult


class TurnView(Protocol):
    """Where a turn's output goes. The REPL, `ask` and tests each provide one."""

    def text(self, delta: str) -> None: ...
    def reasoning(self, delta: str) -> None: ...
    def notice(self, text: str) -> None: ...
    def tool_start(self, prepared: PreparedCall) -> None: ...
    # a running command's output as it arrives, from its reader threads (a live tail, or nothing)
    def tool_output(self, text: str) -> None: ...
    def tool_end(self, prepared: PreparedCall, result: ToolResult, decision: Decision) -> None: ...
    # a call that did not run: refused by the user or a rule, invalid, or interrupted at the prompt
    def tool_denied(self, call: ToolCall, how: str, reason: str) -> None: ...


class NullView:
    def text(self, delta: str) -> None:
        pass

    def reasoning(self, delta: str) -> None:
        pass

    def notice(self, text: str) -> None:
        pass

    def tool_start(self, prepared: PreparedCall) -> None:
        pass

    def tool_output(self, text: str) -> None:
        pass

    def tool_end(self, prepared: PreparedCall, result: ToolResult, decision: Decision) -> None:
        pass

    def tool_denied(self, call: ToolCall, how: str, reason: str) -> None:
        pass


class ConversationView(TurnView, Protocol):
    """A TurnView that also shows the end of a turn and the memory upkeep after it."""

    def turn_ended(self, result: TurnResult) -> None:
        """The turn is saved: settle the answer on screen (upkeep comes after it)."""
        ...

    def upkeep_started(self) -> None: ...
    def upkeep_note(self, text: str, *, failed: bool) -> None:
        """Upkeep was interrupted (failed=False) or failed: a notice, the status cleared first."""
        ...

    def upkeep_ended(self) -> None: ...


class SilentView(NullView):
    """Shows nothing; upkeep's notes go to `notice` (tests record them there)."""

    def turn_ended(self, result: TurnResult) -> None:
        pass

    def upkeep_started(self) -> None:
        pass

    def upkeep_note(self, text: str, *, failed: bool) -> None:
        self.notice(text)

    def upkeep_ended(self) -> None:
        pass
