"""The `mcp` command group: typer declarations only (the body of `mcp list` is
commands/mcp.py)."""

from __future__ import annotations

import typer

from countbot_cli.cli.options import ConfigOpt, JsonOpt, guarded, load_for_command

mcp_app = typer.Typer(help="MCP servers whose tools the model may call.", no_args_is_help=True)


@mcp_app.command("list", help="Start each configured server, list its state and tools, stop it.")
def mcp_list(ctx: typer.Context, json_out: JsonOpt = False, config: ConfigOpt = None) -> None:
    from countbot_cli.commands.mcp import list_servers  # the command's body, loaded when it runs

    guarded(lambda: list_servers(load_for_command(ctx, config, require_provider=False), json_out))
