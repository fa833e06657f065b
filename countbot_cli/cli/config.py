"""The `config` command group (and `config allow`): typer declarations only; each command
calls its body in commands/config.py, commands/config_check.py or commands/trust.py."""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Annotated

import typer

from countbot_cli.cli.options import ConfigOpt, ProviderOpt, guarded, load_for_command

config_app = typer.Typer(
    help="Create, show, check and trust the configuration.", no_args_is_help=True
)
allow_app = typer.Typer(
    help="Approvals saved with `A` at a prompt (in the user's own config folder).",
    no_args_is_help=True,
)
config_app.add_typer(allow_app, name="allow")

FileArg = Annotated[Path | None, typer.Argument(help="The file (default: ./config.yaml).")]


@config_app.command("init", help="Write a starter config file.")
def config_init(
    path: Annotated[
        Path | None, typer.Argument(help="Where (default: the user config folder).")
    ] = None,
    force: Annotated[bool, typer.Option("--force", help="Overwrite an existing file.")] = False,
) -> None:
    from countbot_cli.commands.config import config_init as body

    guarded(lambda: body(path, force=force, out=sys.stdout))


@config_app.command("show", help="Print the effective configuration (secrets masked).")
def config_show(ctx: typer.Context, config: ConfigOpt = None) -> None:
    from countbot_cli.commands.config import config_show as body

    guarded(lambda: body(load_for_command(ctx, config, require_provider=False), sys.stdout))


@config_app.command("path", help="Print every resolved path.")
def config_path(ctx: typer.Context, config: ConfigOpt = None) -> None:
    from countbot_cli.commands.config import config_path as body

    guarded(lambda: body(load_for_command(ctx, config, require_provider=False), sys.stdout))


@config_app.command(
    "trust",
    help="Apply a project's ./config.yaml (or PATH, or its AGENTS.md) as it is now: validate, "
    "show, ask, record.",
)
def config_trust(
    path: FileArg = None,
    yes: Annotated[bool, typer.Option("--yes", "-y", help="Do not ask (no terminal).")] = False,
) -> None:
    from countbot_cli.commands.trust import config_trust as body
    from countbot_cli.commands.trust import terminal_review

    review = terminal_review(sys.stdout, yes, sys.stdin)
    guarded(lambda: body(path, out=sys.stdout, review=review))


@config_app.command("untrust", help="Stop applying a trusted ./config.yaml (or PATH).")
def config_untrust(path: FileArg = None) -> None:
    from countbot_cli.commands.trust import config_untrust as body

    guarded(lambda: body(path, out=sys.stdout))


@config_app.command(
    "check", help="Validate the config, then call the provider (list models, one-token completion)."
)
def config_check(
    ctx: typer.Context, provider: ProviderOpt = None, config: ConfigOpt = None
) -> None:
    from countbot_cli.commands.config_check import check_command

    guarded(
        lambda: check_command(
            load_for_command(ctx, config, provider=provider, require_model=False), sys.stdout
        )
    )


@allow_app.command("list", help="Print the saved approvals and the file holding them.")
def config_allow_list() -> None:
    from countbot_cli.commands.config import allow_list

    guarded(lambda: allow_list(sys.stdout))


@allow_app.command("remove", help="Forget one saved approval (the command or tool as listed).")
def config_allow_remove(
    rule: Annotated[str, typer.Argument(metavar="RULE", help="The exact text listed.")],
) -> None:
    from countbot_cli.commands.config import allow_remove

    guarded(lambda: allow_remove(rule, sys.stdout))
