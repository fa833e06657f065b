"""One server of the `mcp:` section (config/mcp.py): `McpServer`, and `parse_server`, which
reads and checks its entry. Imported only when the config names a server, so a run without
MCP servers does not define the class (start-up pays for every dataclass it defines).
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from types import MappingProxyType

from countbot_cli.config.file import Section
from countbot_cli.config.providers import mask_secret

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


def parse_server(parent: Section, name: str, home: Path, env: Mapping[str, str]) -> McpServer:
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


def _blank_none(value: str | None) -> str | None:
    return value.strip() if value and value.strip() else None


def _or(value: float | None, default: float) -> float:
    return default if value is None else value
