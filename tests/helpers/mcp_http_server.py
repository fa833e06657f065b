"""A small MCP server over streamable HTTP on a loopback port, for the transport's tests.

    python mcp_http_server.py PORTFILE HEADERLOG

Built with the `mcp` SDK's own server (`MCPServer.streamable_http_app()`, served by uvicorn,
both installed with the `[mcp]` extra). Two tools: `add(a, b)` and `shout(text)`. The port it
got from the kernel is written to PORTFILE once it listens; every HTTP request's headers are
appended to HEADERLOG as one JSON object a line, so a test can check what the client sent.

Tests use `serving(folder)`: the server in a child process, its URL and its header log.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import logging
import socket
import subprocess
import sys
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any


@dataclass
class Served:
    url: str
    log: Path

    def requests(self) -> list[dict[str, Any]]:
        text = self.log.read_text(encoding="utf-8") if self.log.exists() else ""
        return [json.loads(line) for line in text.splitlines()]


@contextlib.contextmanager
def serving(folder: Path, timeout: float = 20.0) -> Iterator[Served]:
    """This script in a child process until the block ends."""
    portfile, log = folder / "mcp-http.port", folder / "mcp-http.headers"
    proc = subprocess.Popen(
        [sys.executable, __file__, str(portfile), str(log)],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    try:
        deadline = time.monotonic() + timeout
        while not (portfile.exists() and portfile.read_text().strip()):
            if proc.poll() is not None or time.monotonic() > deadline:
                raise RuntimeError("the MCP HTTP server did not start")
            time.sleep(0.02)
        yield Served(f"http://127.0.0.1:{portfile.read_text().strip()}/mcp", log)
    finally:
        proc.terminate()
        try:
            proc.wait(5)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()


def make_server() -> Any:
    from mcp.server.mcpserver import MCPServer

    server = MCPServer("loopback-tools", log_level="WARNING")

    @server.tool()
    def add(a: int, b: int) -> str:
        """Add two integers."""
        return str(a + b)

    @server.tool()
    def shout(text: str) -> str:
        """The text in capitals."""
        return text.upper()

    return server


def recording(app: Any, log: Path) -> Any:
    async def wrapped(scope: dict[str, Any], receive: Any, send: Any) -> None:
        if scope["type"] == "http":
            headers = {k.decode("latin-1"): v.decode("latin-1") for k, v in scope["headers"]}
            with log.open("a", encoding="utf-8") as f:
                f.write(json.dumps({"path": scope["path"], "headers": headers}) + "\n")
        await app(scope, receive, send)

    return wrapped


def main() -> None:
    import uvicorn

    logging.disable(logging.INFO)
    portfile, log = Path(sys.argv[1]), Path(sys.argv[2])
    sock = socket.socket()
    sock.bind(("127.0.0.1", 0))
    app = recording(make_server().streamable_http_app(), log)
    config = uvicorn.Config(app, log_level="warning", lifespan="on")
    uv = uvicorn.Server(config)

    async def serve() -> None:
        task = asyncio.create_task(uv.serve(sockets=[sock]))
        while not uv.started:
            await asyncio.sleep(0.02)
        tmp = portfile.with_suffix(".tmp")
        tmp.write_text(str(sock.getsockname()[1]))
        tmp.replace(portfile)
        await task

    asyncio.run(serve())


if __name__ == "__main__":
    main()
