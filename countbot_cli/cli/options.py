"""What every typer command shares: the common options, error mapping and settings loading.

Only typer is imported here; commands import what they need when they run.
"""

from __future__ import annotations

import os
import sys
from collections.abc import Callable
from typing import Annotated, Any, NamedTuple

import typer


class Above(NamedTuple):
    """What the root's and a group's callback hand the commands below them, as typer's
    `ctx.obj` (a child context starts with its parent's): the `--config` given before the
    command (`countbot --config F sessions list`, `countbot sessions --config F list`)."""

    config: str | None = None


ConfigOpt = Annotated[
    str | None, typer.Option("--config", help="Config file (default: see `countbot config path`).")
]
ProviderOpt = Annotated[
    str | None, typer.Option("--provider", "-p", help="Provider name from the config.")
]
ModelOpt = Annotated[str | None, typer.Option("--model", "-m", help="Model to use.")]
SystemOpt = Annotated[
    str | None, typer.Option("--system", help="Extra instructions for the system prompt.")
]
JsonOpt = Annotated[bool, typer.Option("--json", help="Print JSON.")]


def guarded(fn: Callable[[], int | None]) -> None:
    """Run a command: map countbot errors to their one-line message and exit code."""
    from countbot_cli.errors import CountbotError

    try:
        code = fn() or 0
    except CountbotError as exc:
        from countbot_cli.commands.ask_report import print_error

        print_error(exc, sys.stderr)
        code = exc.exit_code
    except KeyboardInterrupt:
        sys.stderr.write("\ncountbot: interrupted\n")
        code = 130
    except BrokenPipeError:
        _silence_broken_pipe()
        code = 0
    except Exception as exc:
        if os.environ.get("COUNTBOT_DEBUG"):
            raise
        from countbot_cli.textsafe import sanitize_line

        sys.stderr.write(
            f"countbot: unexpected error: {type(exc).__name__}: {sanitize_line(str(exc))}\n"
            "countbot: set COUNTBOT_DEBUG=1 to see the traceback, and please report it\n"
        )
        code = 1
    raise typer.Exit(code)


def _silence_broken_pipe() -> None:
    # stdout's reader went away (e.g. `countbot ask … | head -1`): exit quietly
    try:
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, sys.stdout.fileno())
    except OSError:
        pass


def hand_down(ctx: typer.Context, config: str | None) -> None:
    """A callback's `--config` for the commands below it (the nearest one given wins)."""
    ctx.obj = Above(config=config_of(ctx, config))


def config_of(ctx: typer.Context, value: str | None) -> str | None:
    """The command's own `--config`, else the one given before it (root or group)."""
    above = ctx.obj if isinstance(ctx.obj, Above) else Above()
    return value or above.config


def load_for_command(
    ctx: typer.Context,
    config: str | None,
    *,
    provider: str | None = None,
    require_provider: bool = True,
    require_model: bool = True,
) -> Any:
    from countbot_cli.app import CommonOptions, load_settings

    opts = CommonOptions(config=config_of(ctx, config), provider=provider)
    return load_settings(opts, require_provider=require_provider, require_model=require_model)
