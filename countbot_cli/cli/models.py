"""The `models` command group: typer declarations only (the bodies are
commands/config_check.py's `models_command` and commands/models.py)."""

from __future__ import annotations

import sys
from typing import Annotated

import typer

from countbot_cli.cli.options import ConfigOpt, JsonOpt, ProviderOpt, guarded, load_for_command

models_app = typer.Typer(
    help="List the provider's models (GET {api_base}/models) and the models pulled for the "
    "embedded provider; `pull` fetches one, `rm` removes one.",
    invoke_without_command=True,
)


@models_app.callback()
def models_list(
    ctx: typer.Context,
    json_out: JsonOpt = False,
    provider: ProviderOpt = None,
    config: ConfigOpt = None,
) -> None:
    if ctx.invoked_subcommand is not None:
        return
    from countbot_cli.commands.config_check import models_command

    guarded(
        lambda: models_command(
            load_for_command(ctx, config, provider=provider, require_model=False),
            sys.stdout,
            json_out=json_out,
        )
    )


@models_app.command(
    "pull",
    help="Fetch a model for the embedded provider: a name from the catalogue (`countbot "
    "models` lists it) or any GGUF file's URL; resumable, checked against the server's "
    "sha256 (HF_ENDPOINT: a Hugging Face mirror). Then: countbot -p local -m NAME.",
)
def models_pull(
    target: Annotated[str, typer.Argument(metavar="NAME|URL")],
    name: Annotated[
        str | None, typer.Option("--name", help="The name to give a model pulled by URL.")
    ] = None,
) -> None:
    from countbot_cli.commands.models import pull_command

    guarded(lambda: pull_command(target, name, sys.stderr))


@models_app.command("rm", help="Remove a pulled model (its file and its record).")
def models_rm(name: Annotated[str, typer.Argument(metavar="NAME")]) -> None:
    from countbot_cli.commands.models import rm_command

    guarded(lambda: rm_command(name, sys.stderr))
