"""The command groups under the root: `sessions`, `memory`, `config`, `mcp` and `models`, each
declared in cli/NAME.py, imported and put under the root only when it is needed (importing all
of them cost every command, `ask` included, some 4 M instructions at start-up).

cli/main.py puts the one group the command line names under the root it builds for that command
(`_app_for`), and all of them under the whole app (`whole_app`: the root's --help lists them, the
chat, shell completion), so what each shows is the same either way.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from typing import Any

import typer

GROUPS = ("sessions", "memory", "config", "mcp", "models")
RESUME_HELP = "Open a saved session in the interactive chat (no ID: choose it in a picker)."


def add_groups(root: typer.Typer, names: Iterable[str], resume: Callable[..., Any]) -> None:
    """Each group of `names` (in GROUPS' order) under `root`; `resume` is `sessions resume`,
    declared in cli/main.py beside the chat it starts."""
    for name in GROUPS:
        if name in names:
            root.add_typer(group_app(name, resume), name=name)


def group_app(name: str, resume: Callable[..., Any]) -> typer.Typer:
    """Group `name`'s typer, its module imported now (`resume` put under `sessions`, once)."""
    if name == "sessions":
        from countbot_cli.cli.sessions import sessions_app

        if not any(c.name == "resume" for c in sessions_app.registered_commands):
            sessions_app.command("resume", help=RESUME_HELP)(resume)
        return sessions_app
    if name == "memory":
        from countbot_cli.cli.memory import memory_app

        return memory_app
    if name == "config":
        from countbot_cli.cli.config import config_app

        return config_app
    if name == "models":
        from countbot_cli.cli.models import models_app

        return models_app
    from countbot_cli.cli.mcp import mcp_app

    return mcp_app
