"""The `mcp:` section: Model Context Protocol servers whose tools the model may call.

Each server under `mcp: servers:` has either `command` (stdio: `args`, `env`, `cwd`) or `url`
(streamable HTTP: `headers`), never both, plus `allow`, `timeout` and `start_timeout`
(config.example.yaml and docs/tools.md show them). Names are letters, digits, `-` and `_`,
without `__`, which separates the parts of a tool's name. Every mistake is a ConfigError naming
the file, line and key. Nothing here starts a server; one server's entry is read by
config/mcp_server.py, imported only when there is one.
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
