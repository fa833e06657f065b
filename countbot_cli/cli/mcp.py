"""`countbot mcp list`: the configured MCP servers, started, listed and stopped again.

Each server is started as a turn would start it (stdio or streamable HTTP), its state and
tools are printed — the names the model sees (`mcp__SERVER__TOOL`), their arguments (`*`
marks a required one) and whether the config's `allow` list runs them without asking — and
the servers are stopped before the command returns. `--json` prints the full input schemas.
Everything a server says is sanitised before it reaches the terminal.
"""

from __future__ import annotations

import typer

from countbot_cli.cli.options import ConfigOpt, JsonOpt, guarded, load_for_command

mcp_app = typer.Typer(help="MCP servers whose tools the model may call.", no_args_is_help=True)


@mcp_app.command("list", help="Start each configured server, list its state and tools, stop it.")
def mcp_list(json_out: JsonOpt = False, config: ConfigOpt = None) -> None:
    from countbot_cli.ui.mcp import list_servers  # the command's body, loaded when it runs

    guarded(lambda: list_servers(load_for_command(config, require_provider=False), json_out))
