"""`countbot mcp list`: the configured MCP servers, started, listed and stopped again.

Each server is started as a turn would start it (stdio or streamable HTTP), its state and
tools are printed — the names the model sees (`mcp__SERVER__TOOL`), their arguments (`*`
marks a required one) and whether the config's `allow` list runs them without asking — and
the servers are stopped before the command returns. `--json` prints the full input schemas.
Everything a server says is sanitised before it reaches the terminal.
"""

from __future__ import annotations

import sys
from typing import Any, TextIO

import typer

from countbot_cli.cli.options import ConfigOpt, JsonOpt, guarded, load_for_command

mcp_app = typer.Typer(help="MCP servers whose tools the model may call.", no_args_is_help=True)


@mcp_app.command("list", help="Start each configured server, list its state and tools, stop it.")
def mcp_list(json_out: JsonOpt = False, config: ConfigOpt = None) -> None:
    guarded(lambda: list_servers(load_for_command(config, require_provider=False), json_out))


def list_servers(settings: Any, json_out: bool, out: TextIO | None = None) -> int:
    from countbot_cli.textsafe import json_text

    out = out or sys.stdout
    servers = settings.mcp.servers
    if not servers:
        if json_out:
            out.write("[]\n")
        else:
            out.write("no MCP servers configured (add them under `mcp: servers:` in the config)\n")
        return 0
    from countbot_cli.tools.mcp import McpTools

    source = McpTools(servers)
    try:
        status = source.status()
    finally:
        source.close()
    if json_out:
        out.write(json_text([_as_json(s) for s in status]) + "\n")
    else:
        out.write("".join(_as_text(s) for s in status))
    out.flush()
    return 0


def _as_json(s: Any) -> dict[str, Any]:
    return {
        "name": s.name,
        "transport": s.transport,
        "target": s.target,
        "state": s.state,
        "error": s.error or None,
        "tools": [
            {
                "name": name,
                "description": description,
                "input_schema": schema,
                "allowed": allowed,
            }
            for name, description, schema, allowed in s.tools
        ],
    }


def _as_text(s: Any) -> str:
    from countbot_cli.textsafe import sanitize_line as clean

    state = s.state + (f": {s.error}" if s.error else "")
    lines = [f"{clean(s.name)}  {clean(state)}  ({s.transport}: {clean(s.target)})"]
    for name, description, schema, allowed in s.tools:
        mark = "  [allowed without asking]" if allowed else ""
        lines.append(f"  {clean(name)}({clean(_arguments(schema))}){mark}")
        if description.strip():
            lines.append(f"      {clean(description.strip().splitlines()[0])[:200]}")
    return "".join(line + "\n" for line in lines)


def _arguments(schema: dict[str, Any]) -> str:
    props = schema.get("properties") or {}
    required = set(schema.get("required") or ())
    parts = []
    for key, sub in props.items():
        kind = sub.get("type", "any") if isinstance(sub, dict) else "any"
        parts.append(f"{key}{'*' if key in required else ''}: {kind}")
    return ", ".join(parts)
