"""`ReplHost`: what the slash commands and the prompt may use of the running REPL.

`loop.Repl` provides it; declaring it here keeps `slash` and `prompt` from importing the loop
that imports them. The conversation's state and operations are `conversation` (a
`conversation.chat.Conversation`); the REPL itself only runs turns on screen and draws.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING, Protocol

if TYPE_CHECKING:
    from countbot_cli.config.chat import ChatSettings
    from countbot_cli.conversation.chat import Conversation
    from countbot_cli.conversation.input.attachments import PendingAttachments
    from countbot_cli.conversation.turn_record import TurnResult
    from countbot_cli.repl.tool_outputs import ToolOutputs
    from countbot_cli.repl.toolbar import ContextMeter
    from countbot_cli.repl.view import ReplView

# a Conversation operation that runs a turn on the REPL's view (send, retry)
TurnOp = Callable[["ReplView"], "TurnResult | None"]


class ReplHost(Protocol):
    """What the slash commands and the prompt use of the running REPL (`loop.Repl`)."""

    conversation: Conversation
    meter: ContextMeter
    tool_outputs: ToolOutputs  # every tool call's full output (/last-tool)
    attachments: PendingAttachments  # `/attach`: for the next message
    chat: ChatSettings  # the prompt's editing mode, Enter and notify (config chat:, /set)

    def apply_chat(self) -> None: ...  # after `chat` changed: the prompt follows it

    def send(self, text: str) -> TurnResult | None: ...
    def turn(self, op: TurnOp) -> TurnResult | None: ...
    def show_recent(self) -> None: ...
    def model_names(self, *, refresh: bool = False, quiet: bool = True) -> list[str]: ...
    def prefetch_models(self) -> None: ...
    def request_exit(self) -> None: ...
    def write(self, text: str) -> None: ...
    def columns(self) -> int: ...  # the output's width now (/help wraps to it)
    def raw_write(self, data: str) -> None: ...  # straight to the terminal (OSC 52 for /copy)
    def info(self, text: str) -> None: ...
    def warn(self, text: str) -> None: ...
    def confirm(self, question: str) -> bool: ...
    def ask(self, question: str) -> str | None: ...  # a line typed (None: Ctrl-C or Ctrl-D)
    def edit_text(self, default: str) -> str | None: ...
    def pick_session(self, query: str) -> str | None: ...
    def clear_screen(self) -> None: ...
    def toolbar(self) -> str: ...
