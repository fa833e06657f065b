"""Questions the commands ask on the terminal with `input()` (the prompt on stdout, the answer
from stdin): a y/N question, and a line of text. Whether there is a terminal to ask on is the
caller's to decide (`ui.terminal.isatty`): without one a command does not ask."""

from __future__ import annotations

from countbot_cli.errors import Terminated


def yes_no(question: str) -> bool:
    """`question [y/N]`: only y or yes is a yes (end of input: no)."""
    sep = "" if question.endswith("\n") else " "
    try:
        return input(f"{question}{sep}[y/N] ").strip().lower() in ("y", "yes")
    except EOFError:
        return False


def line(question: str) -> str | None:
    """The line typed after `question`; None at end of input or Ctrl-C (the user gave up)."""
    try:
        return input(question)
    except Terminated:
        raise  # SIGTERM/SIGHUP stop countbot, they do not give the question up
    except (EOFError, KeyboardInterrupt):
        return None
