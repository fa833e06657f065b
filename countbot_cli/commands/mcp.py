"""The body of `countbot mcp list` (also `/mcp` in the chat): each configured MCP server
started as a turn would start it (stdio or streamable HTTP), its state and tools drawn by
ui/mcp.py, and the servers stopped before the command returns (the chat's are left running).
"""

from __future__ import annotations

import sys
from typing import TYPE_CHECKING, Any, TextIO

from countbot_cli.textsafe import json_text
from countbot_cli.ui.mcp import NONE_CONFIGURED, server_json, server_text

if TYPE_CHECKING:
    from countbot_cli.tools.mcp import McpTools


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
        out.write(json_text([server_json(s) for s in status]) + "\n")
    else:
        out.write("".join(server_text(s) for s in status))
    out.flush()
    return 0
