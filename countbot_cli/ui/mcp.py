"""What `countbot mcp list` and the REPL's `/mcp` print: MCP servers, their state and tools.

For each configured server: its transport and target (the command line or the URL, never the
`env` or `headers` values), its state (and why it failed), and each tool under the name the
model sees (`mcp__SERVER__TOOL`), its arguments (`*` marks a required one) and whether the
config's `allow` list runs it without asking. `--json` gives the full input schemas. Everything a
server says is sanitised before it reaches the terminal.
"""

from __future__ import annotations

import sys
from typing import TYPE_CHECKING, Any, TextIO

from countbot_cli.textsafe import json_text
from countbot_cli.textsafe import sanitize_line as clean

if TYPE_CHECKING:
    from countbot_cli.tools.mcp import McpTools

NONE_CONFIGURED = "no MCP servers configured (add them under `mcp: servers:` in the config)"


def list_servers(
    settings: Any, json_out: bool, out: TextIO | None = None, *, running: McpTools | None = None
) -> int:
    """Every configured server's state and tools. `running`: the session's servers (the
    REPL's, started if they were not yet, and left running); otherwise they are started for
    the listing and stopped again."""
    out = out or sys.stdout
    servers = settings.mcp.servers
    if not servers:
        if json_out:
            out.write("[]\n")
        else:
            out.write(NONE_CONFIGURED + "\n")
        return 0
    if running is not None:
        status = running.status()
    else:
        from countbot_cli.tools.mcp import McpTools  # the SDK only when servers are configured

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
