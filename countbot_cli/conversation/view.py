"""The narrow sink a turn reports to: the engine and its tool rounds never print.

The REPL, `ask` and tests each provide a `TurnView`; `NullView` shows nothing.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Protocol

if TYPE_CHECKING:
    from countbot_cli.messages import ToolCall
    from countbot_cli.tools import PreparedCall, ToolResult
    from countbot_cli.tools.approval import Decision


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
