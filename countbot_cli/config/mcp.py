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
the file, line and key, like the rest of the file. Nothing here starts a server.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from types import MappingProxyType

from countbot_cli.config.file import Section
from countbot_cli.config.providers import mask_secret

MCP_KEYS = ("servers",)
SERVER_KEYS = (
    "command",
    "args",
    "env",
    "cwd",
    "url",
    "headers",
    "allow",
    "timeout",
    "start_timeout",
)
DEFAULT_TIMEOUT = 60.0
DEFAULT_START_TIMEOUT = 30.0
_NAME = re.compile(r"[A-Za-z0-9][A-Za-z0-9_-]{0,31}")


@dataclass(frozen=True)
class McpServer:
    """One configured server. `env` and `headers` may hold secrets: they stay out of repr()."""

    name: str
    command: str | None = None
    args: tuple[str, ...] = ()
    env: Mapping[str, str] = field(default_factory=lambda: MappingProxyType({}), repr=False)
    cwd: Path | None = None
    url: str | None = None
    headers: Mapping[str, str] = field(default_factory=lambda: MappingProxyType({}), repr=False)
    allow: tuple[str, ...] = ()
    timeout: float = DEFAULT_TIMEOUT  # seconds a call may take
    start_timeout: float = DEFAULT_START_TIMEOUT  # seconds to start, initialize, list tools

    @property
    def transport(self) -> str:
        return "http" if self.url else "stdio"

    def describe(self) -> str:
        """How it is reached, for listings: the command line or the URL (no secrets)."""
        if self.url:
            return self.url
        return " ".join([self.command or "", *self.args]).strip()

    def masked_headers(self) -> dict[str, str]:
        """Every value masked, whatever its name: all of them are treated as secrets."""
        return {k: mask_secret(v) for k, v in self.headers.items()}

    def masked_env(self) -> dict[str, str]:
        return {k: mask_secret(v) for k, v in self.env.items()}


@dataclass(frozen=True)
class McpSettings:
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
    return McpSettings(servers=tuple(_server(servers, name, home, env) for name in servers.names()))


def _server(parent: Section, name: str, home: Path, env: Mapping[str, str]) -> McpServer:
    if not _NAME.fullmatch(name) or "__" in name:
        raise parent.error(
            name,
            f"'{name}' is not a usable server name",
            "use letters, digits, '-' and '_' (at most 32, no '__'): it becomes part of "
            "the tool names mcp__NAME__TOOL",
        )
    sec = parent.section(name)
    sec.check_keys(SERVER_KEYS)
    command, url = _blank_none(sec.text("command")), _blank_none(sec.text("url"))
    if command and url:
        raise sec.error("url", "a server has either `command` (stdio) or `url` (HTTP), not both")
    if not command and not url:
        raise sec.error(
            None,
            "a server needs `command` (a program speaking MCP over stdio) or `url` "
            "(a streamable HTTP endpoint)",
        )
    if url and not re.match(r"https?://", url):
        raise sec.error("url", f"'{url}' is not an http:// or https:// URL")
    for key in ("args", "env", "cwd") if url else ("headers",):
        if sec.has(key):
            other = "an HTTP (`url`)" if url else "a stdio (`command`)"
            raise sec.error(key, f"`{key}` does not apply to {other} server")
    return McpServer(
        name=name,
        command=command,
        args=sec.texts("args") or (),
        env=MappingProxyType(sec.text_map("env") or {}),
        cwd=sec.path("cwd", home, env),
        url=url,
        headers=MappingProxyType(sec.text_map("headers") or {}),
        allow=sec.texts("allow") or (),
        timeout=_or(sec.number("timeout", 0.1, 3600.0), DEFAULT_TIMEOUT),
        start_timeout=_or(sec.number("start_timeout", 0.1, 3600.0), DEFAULT_START_TIMEOUT),
    )


def _is_paths(value: str) -> bool:
    parts = [p for p in value.split(":") if p]
    return bool(parts) and all(p.startswith(("/", "~", "./", "../")) for p in parts)


def _blank_none(value: str | None) -> str | None:
    return value.strip() if value and value.strip() else None


def _or(value: float | None, default: float) -> float:
    return default if value is None else value
