"""`/memory tidy`: `countbot memory tidy` in the chat (commands/memory_tidy.py), answered at the
REPL's own prompt; the model's proposals come from the chat's provider (none from the embedded
model, which is too small to judge which facts replace which)."""

from __future__ import annotations

import io
from typing import TYPE_CHECKING

from countbot_cli.commands.memory_tidy import memory_tidy, tidy_model
from countbot_cli.memory.store import MemoryStore

if TYPE_CHECKING:
    from countbot_cli.repl.host import ReplHost


class _Live(io.StringIO):
    """Text written goes to the REPL at once (a question follows each proposal)."""

    def __init__(self, repl: ReplHost) -> None:
        super().__init__()
        self.repl = repl

    def write(self, text: str) -> int:
        self.repl.write(text)
        return len(text)


def cmd_memory_tidy(repl: ReplHost) -> None:
    c = repl.conversation
    store = MemoryStore(c.settings.memory.file)
    model = tidy_model(store, c.engine.settings, lambda: c.provider)
    memory_tidy(store, _Live(repl), ask=repl.ask, edit=repl.edit_text, model=model)
