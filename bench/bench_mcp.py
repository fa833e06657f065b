"""Benchmark of MCP servers (issue 14): the extra start-up of a turn with one stdio server.

The server is `mcp-server-time` (a real MCP server from PyPI, a test dependency), over stdio.

1. Whole `countbot ask --no-save` processes against a loopback model server, with tools on:
   no MCP server configured, then one. The difference is what a user waits for on a first
   turn (`ask` is always a first turn): the server's start, `initialize` and `tools/list`,
   plus stopping it at exit.
2. In process, as the REPL runs turns: the first `registry.schemas()` (which starts the server)
   and the later ones (the server is kept: nothing to do), and one tool call's round trip.

Run: .venv/bin/python bench/bench_mcp.py [--runs N]
"""

from __future__ import annotations

import argparse
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "tests" / "helpers"))

import fakeserver as fs  # noqa: E402
from cbenv import COUNTBOT, make_cb  # noqa: E402

from countbot_cli.config.mcp_server import McpServer  # noqa: E402
from countbot_cli.tools.mcp import add_mcp_tools  # noqa: E402
from countbot_cli.tools.registry import ToolContext, ToolRegistry, default_tools  # noqa: E402

TIME_BIN = str(Path(sys.executable).parent / "mcp-server-time")
SERVER = {"command": TIME_BIN, "args": ["--local-timezone", "UTC"]}


def whole_asks(runs: int) -> tuple[list[float], list[float]]:
    plain, with_mcp = [], []
    with fs.FakeServer() as server, tempfile.TemporaryDirectory() as tmp:
        server.default = fs.text("ok")
        none = make_cb(Path(tmp) / "none", server.base_url, tools={"enabled": True})
        one = make_cb(
            Path(tmp) / "one",
            server.base_url,
            tools={"enabled": True},
            mcp={"servers": {"time": SERVER}},
        )
        for _ in range(runs):
            for cb, out in ((none, plain), (one, with_mcp)):
                started = time.perf_counter()
                proc = subprocess.run(
                    [COUNTBOT, "ask", "--no-save", "hi"],
                    cwd=cb.work,
                    env=cb.env,
                    capture_output=True,
                    text=True,
                    timeout=120,
                )
                out.append(time.perf_counter() - started)
                assert proc.returncode == 0, proc.stderr
    return plain, with_mcp


def in_process(turns: int) -> tuple[float, list[float], float]:
    with tempfile.TemporaryDirectory() as tmp:
        ctx = ToolContext(workspace=Path(tmp))
        registry = ToolRegistry(default_tools(ctx), ctx)
        source = add_mcp_tools(
            registry,
            (McpServer("time", command=TIME_BIN, args=("--local-timezone", "UTC")),),
            print,
        )
        try:
            started = time.perf_counter()
            registry.schemas()
            first = time.perf_counter() - started
            later = []
            for _ in range(turns):
                started = time.perf_counter()
                registry.schemas()
                later.append(time.perf_counter() - started)
            started = time.perf_counter()
            outcome = source.hub.call("time", "get_current_time", {"timezone": "UTC"})
            call = time.perf_counter() - started
            assert outcome.error is None, outcome.error
        finally:
            source.close()
    return first, later, call


def main() -> int:
    parser = argparse.ArgumentParser()
    parser.add_argument("--runs", type=int, default=3)
    args = parser.parse_args()
    plain, with_mcp = whole_asks(args.runs)
    p, m = statistics.median(plain), statistics.median(with_mcp)
    print(f"whole `ask` (first turn), median of {args.runs}:")
    print(f"  no MCP server        {p:6.2f} s")
    print(f"  one stdio server     {m:6.2f} s   (+{m - p:.2f} s: start, initialize, list, stop)")
    first, later, call = in_process(20)
    print("in process (the REPL's turns):")
    print(f"  first turn's tools   {first * 1000:8.1f} ms  (starts the server)")
    print(f"  later turns' tools   {statistics.median(later) * 1e6:8.1f} us  (median of 20)")
    print(f"  one call round trip  {call * 1000:8.1f} ms  (get_current_time)")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
