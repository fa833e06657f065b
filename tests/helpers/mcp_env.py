"""MCP servers for the tests, over stdio, each started through `sh -c 'echo $$ > PIDFILE; exec
…'` so a test knows its pid (to kill or freeze it, and to check that countbot stopped it):
`mcp-server-time` from PyPI (installed by the test extras, offline), a server that never
answers (`sleep`: countbot waits for it to start), and one that never answers the first time
it is started and is `mcp-server-time` from then on.
"""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Any

import fakeserver as fs
from cbenv import CB, make_cb
from waits import file_text

TIME_BIN = str(Path(sys.executable).parent / "mcp-server-time")
TIME_TOOL = "mcp__time__get_current_time"  # one of its tools as the model is offered it
NEVER = 60  # seconds a server that never answers takes to start: far over any hang bound


def time_server(pidfile: Path, **extra: Any) -> dict[str, Any]:
    """`mcp-server-time`; its pid in `pidfile`."""
    script = f'echo $$ > "{pidfile}"; exec "{TIME_BIN}" --local-timezone UTC'
    return {"command": "sh", "args": ["-c", script], **extra}


def silent_server(pidfile: Path) -> dict[str, Any]:
    """A program that never answers MCP's first request; countbot waits up to its
    `start_timeout` (longer than any test) for it to start."""
    script = f'echo $$ > "{pidfile}"; exec sleep {NEVER}'
    return {"command": "sh", "args": ["-c", script], "start_timeout": NEVER}


def silent_once_server(first: Path, then: Path) -> dict[str, Any]:
    """Silent the first time it is started (its pid in `first`), `mcp-server-time` every time
    after that (its pid in `then`)."""
    script = (
        f'if [ -e "{first}" ]; then echo $$ > "{then}"; '
        f'exec "{TIME_BIN}" --local-timezone UTC; fi; echo $$ > "{first}"; exec sleep {NEVER}'
    )
    return {"command": "sh", "args": ["-c", script], "start_timeout": NEVER}


def mcp_cb(tmp_path: Path, server: fs.FakeServer, **servers: dict[str, Any]) -> CB:
    """An installation on `server` with tools on and `servers` under `mcp: servers:`."""
    return make_cb(tmp_path, server.base_url, tools={"enabled": True}, mcp={"servers": servers})


def pid_of(pidfile: Path) -> int:
    """The MCP server's pid, once it has started and written it."""
    return int(file_text(pidfile))


def tool_names(body: dict[str, Any]) -> list[str]:
    """The names of the tools one chat request offers."""
    return [t["function"]["name"] for t in body.get("tools") or []]
