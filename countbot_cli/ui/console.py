"""The rich Console countbot prints its output on, with its own `plain` flag.

`ui/stream.make_console` makes one for stdout or stderr: `plain` when the stream is not a
terminal (or `--plain`), and then the streamed answer, `render_markdown` and the REPL's notes
write raw text instead of rendered markdown (`ui/stream.is_plain_console`). The flag lives on
the console it describes, not in a module-level registry.

This module imports rich at import time; `stream.py` imports it when it makes a console.
"""

from __future__ import annotations

from typing import Any

from rich.console import Console


class OutputConsole(Console):
    """A rich Console that knows whether countbot writes raw text on it (`plain`)."""

    def __init__(self, *args: Any, plain: bool = False, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.plain = plain
