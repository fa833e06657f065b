"""MCP servers' tools as countbot tools: `mcp__SERVER__TOOL`, asked about like `exec`.

`McpTools` is a lazy source for the registry: the first turn that offers tools starts every
configured server (`mcp_client.McpHub`) and turns each listed tool into a `ToolSpec` of kind
"mcp" with the server's own JSON schema; arguments are checked with `tools.schema`'s subset,
the rest is left to the server. Each call asks unless the server's `allow` lists the tool.
Results are passed on as text; what cannot be (images, audio, binary) becomes a note with its
type and size. docs/design/tools.md says more.
"""

from __future__ import annotations

import base64
import json
import re
import threading
from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from countbot_cli.config.mcp_server import McpServer
from countbot_cli.tools.base import KIND_MCP, ToolContext, ToolResult, ToolSpec
from countbot_cli.tools.mcp_client import STATE_RUNNING, McpHub, ServerConn

PREFIX = "mcp__"
MAX_NAME = 64  # OpenAI's limit on a function name
MAX_DESCRIPTION = 1024
if TYPE_CHECKING:
    from countbot_cli.tools.registry import ToolRegistry

_UNSAFE = re.compile(r"[^A-Za-z0-9_-]")


def tool_name(server: str, tool: str) -> str:
    """`mcp__SERVER__TOOL`, with characters a function name may not hold replaced by `_`."""
    return f"{PREFIX}{server}__{_UNSAFE.sub('_', tool)}"


@dataclass(frozen=True)
class ServerStatus:
    """One server for `countbot mcp list` and `/mcp`."""

    name: str
    transport: str
    target: str  # the command line or the URL
    state: str
    error: str
    # (offered name, description, input schema, in the server's `allow` list)
    tools: list[tuple[str, str, dict[str, Any], bool]]


class McpTools:
    """The configured servers' tools, started on first use and stopped at exit."""

    def __init__(
        self,
        servers: tuple[McpServer, ...],
        on_notice: Callable[[str], None] = lambda _: None,
        *,
        max_output_chars: int = 10000,
    ) -> None:
        self.hub = McpHub(servers)
        self.on_notice = on_notice
        self.max_output_chars = max_output_chars

    def specs(self) -> list[ToolSpec]:
        """Start the servers (once) and return the running ones' tools; a server that failed
        to start is one notice. Ctrl-C while they start goes on up (the turn is interrupted)
        with the servers stopped, to be started by the next call (`McpHub.start`)."""
        for conn in self.hub.start():
            self.on_notice(f"MCP server '{conn.name}' failed to start: {conn.error}")
        out: list[ToolSpec] = []
        for conn in self.hub.conns.values():
            if conn.state == STATE_RUNNING:
                out.extend(self._server_specs(conn))
        return out

    def status(self) -> list[ServerStatus]:
        """Every server's state and tools (starting them when not started yet; Ctrl-C then
        goes on up, the servers stopped)."""
        self.hub.start()
        return [
            ServerStatus(
                name=c.name,
                transport=c.config.transport,
                target=c.config.describe(),
                state=c.state,
                error=c.error,
                tools=[
                    (tool_name(c.name, t.name), t.description, t.schema, t.name in c.config.allow)
                    for t in c.tools
                ],
            )
            for c in self.hub.conns.values()
        ]

    def close(self) -> None:
        self.hub.close()

    def _restart_if_crashed(self, server: str, cancel: threading.Event) -> None:
        """A server that stopped responding is started again before its next call, once."""
        restarted = self.hub.restart(server, cancel)
        if restarted is True:
            self.on_notice(f"MCP server '{server}' had stopped responding: restarted it")
        elif restarted is False:
            why = self.hub.conns[server].error
            self.on_notice(
                f"MCP server '{server}' had stopped responding; restarting failed: {why}"
            )

    def _server_specs(self, conn: ServerConn) -> list[ToolSpec]:
        specs: dict[str, ToolSpec] = {}
        for listed in conn.tools:
            name = tool_name(conn.name, listed.name)
            if len(name) > MAX_NAME or name in specs:
                why = "too long" if len(name) > MAX_NAME else "the same as another's"
                self.on_notice(
                    f"MCP server '{conn.name}': tool '{listed.name}' left out (its name as "
                    f"{name} is {why})"
                )
                continue
            specs[name] = self._spec(conn, listed.name, listed.description, listed.schema)
        return list(specs.values())

    def _spec(
        self, conn: ServerConn, tool: str, description: str, schema: dict[str, Any]
    ) -> ToolSpec:
        server, allowed = conn.name, tool in conn.config.allow
        where = conn.config.describe()

        def run(args: dict[str, Any], ctx: ToolContext, cancel: threading.Event) -> ToolResult:
            self._restart_if_crashed(server, cancel)
            outcome = self.hub.call(server, tool, args, cancel)
            if outcome.error is not None:
                return ToolResult.failure(
                    f"MCP server '{server}': {outcome.error}",
                    timed_out=outcome.timed_out,
                    interrupted=outcome.interrupted,
                )
            return result_to_tool_result(outcome.result, self.max_output_chars)

        def reasons(args: dict[str, Any]) -> list[str]:
            if allowed:
                return []
            return [f"calls '{tool}' on the MCP server '{server}' ({_short(where, 120)})"]

        about = f"[MCP server '{server}'] " + (description or tool)
        return ToolSpec(
            name=tool_name(server, tool),
            description=_short(about, MAX_DESCRIPTION),
            parameters=_parameters(schema),
            run=run,
            kind=KIND_MCP,
            reasons=reasons,
        )


def _parameters(schema: dict[str, Any]) -> dict[str, Any]:
    """The server's input schema as a function's parameters: an object, properties present."""
    params = {k: v for k, v in schema.items() if k != "$schema"}
    params["type"] = "object"
    params.setdefault("properties", {})
    return params


def result_to_tool_result(result: Any, limit: int) -> ToolResult:
    """A CallToolResult as the text the model gets (see the module docstring)."""
    parts = [_part_text(block) for block in (getattr(result, "content", None) or [])]
    structured = getattr(result, "structured_content", None)
    if not parts and structured is not None:
        parts.append(json.dumps(structured, ensure_ascii=False))
    text = "\n".join(p for p in parts if p) or "(the tool returned nothing)"
    if len(text) > limit:
        text = text[:limit] + f"\n[… {len(text) - limit} more characters cut]"
    if getattr(result, "is_error", False):
        return ToolResult.failure(text)
    return ToolResult(content=text)


def _part_text(block: Any) -> str:
    kind = getattr(block, "type", "")
    if kind == "text":
        return str(block.text)
    if kind in ("image", "audio"):
        size = _b64_size(getattr(block, "data", ""))
        return (
            f"[{kind} from the tool: {block.mime_type}, {size}; not passed on: tool results "
            "reach the model as text only]"
        )
    if kind == "resource":
        res = block.resource
        mime = getattr(res, "mime_type", None) or "unknown type"
        if hasattr(res, "text"):
            return f"[resource {res.uri} ({mime})]\n{res.text}"
        size = _b64_size(getattr(res, "blob", ""))
        return f"[resource {res.uri}: {mime}, {size} of binary data; not passed on]"
    if kind == "resource_link":
        mime = getattr(block, "mime_type", None)
        return f"[resource link: {block.name} {block.uri}" + (f" ({mime})]" if mime else "]")
    return f"[a '{kind}' part the client does not understand; left out]"


def _b64_size(data: str) -> str:
    try:
        n = len(base64.b64decode(data, validate=False))
    except (ValueError, TypeError):
        n = len(data) * 3 // 4
    return f"{n} bytes" if n < 1024 else f"{n / 1024:.1f} KiB"


def _short(text: str, limit: int) -> str:
    return text if len(text) <= limit else text[: limit - 1] + "…"


def add_mcp_tools(
    registry: ToolRegistry, servers: tuple[McpServer, ...], on_notice: Callable[[str], None]
) -> McpTools:
    """Offer the servers' tools through `registry`, started the first time tools are needed."""
    source = McpTools(servers, on_notice, max_output_chars=registry.ctx.max_output_chars)
    registry.add_source(source.specs)
    registry.mcp = source  # for `/mcp`
    return source
