"""How MCP servers are drawn (`countbot mcp list`, `/mcp`): for each configured server its
transport and target (the command line or the URL, never the `env` or `headers` values), its
state (and why it failed), and each tool under the name the model sees (`mcp__SERVER__TOOL`),
its arguments (`*` marks a required one) and whether the config's `allow` list runs it without
asking; as JSON, the full input schemas. Everything a server says is sanitised here.
"""

from __future__ import annotations

from typing import Any

from countbot_cli.textsafe import sanitize_line as clean

NONE_CONFIGURED = "no MCP servers configured (add them under `mcp: servers:` in the config)"


def server_json(s: Any) -> dict[str, Any]:
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


def server_text(s: Any) -> str:
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
