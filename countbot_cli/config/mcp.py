"""The `mcp:` section: Model Context Protocol servers whose tools the model may call.

    mcp:
      servers:
        time:                      # tools appear as mcp__time__TOOL
          command: uvx             # stdio: a program, its args, extra env and folder
          args: [mcp-server-time]
          env: {TZ: UTC}
          cwd: ~/work
          allow: [get_current_time]  # these tools run without asking; the rest ask each time
          timeout: 60              # seconds each call may take
          start_timeout: 30        # seconds to start and list its tools
        docs:
          url: https://example.com/mcp   # streamable HTTP, with optional headers
          headers: {Authorization: Bearer …}

A server has either `command` or `url`, never both. Names are letters, digits, `-` and `_`
(no `__`, which separates the parts of a tool's name). Every mistake is a ConfigError naming
the file, line and key, like the rest of the file. Nothing here starts a server. One server's
entry is read and checked by config/mcp_server.py, imported only when there is one.
"""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path
from typing import TYPE_CHECKING, NamedTuple

from countbot_cli.config.file import Section

if TYPE_CHECKING:
    from countbot_cli.config.mcp_server import McpServer

MCP_KEYS = ("servers",)


class McpSettings(NamedTuple):
    servers: tuple[McpServer, ...] = ()

    def secret_values(self) -> tuple[str, ...]:
        """What `exec` must never pass on (`ToolContext.secret_values`): every `headers`
        value (and the credential after a scheme such as `Bearer`) and every `env` value,
        except paths and lists of paths (`PATH: /opt/bin:/usr/bin` is no secret, and scrubbing
        it would scrub exec's own PATH)."""
        out: list[str] = []
        for server in self.servers:
            for value in server.headers.values():
                out.append(value)
                scheme, _, credential = value.partition(" ")
                if credential.strip() and scheme.isalpha():
                    out.append(credential.strip())
            out.extend(v for v in server.env.values() if not _is_paths(v))
        return tuple(dict.fromkeys(v for v in out if v.strip()))


def parse_mcp(sec: Section, home: Path, env: Mapping[str, str]) -> McpSettings:
    """The `mcp:` section, checked whole (relative `cwd` against the config file's folder)."""
    sec.check_keys(MCP_KEYS)
    servers = sec.section("servers")
    names = servers.names()
    if not names:
        return McpSettings()
    from countbot_cli.config.mcp_server import parse_server  # only with servers (start-up)

    return McpSettings(servers=tuple(parse_server(servers, name, home, env) for name in names))


def _is_paths(value: str) -> bool:
    parts = [p for p in value.split(":") if p]
    return bool(parts) and all(p.startswith(("/", "~", "./", "../")) for p in parts)
