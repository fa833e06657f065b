"""MCP over streamable HTTP end to end: the installed `countbot` against a server built with the
`mcp` SDK's own server side (tests/helpers/mcp_http_server.py, uvicorn on a loopback port),
configured with `url` and `headers`: its tools listed, a call the config allows run, one it
does not denied without a terminal, the headers sent on every request and never printed."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import fakeserver as fs
import pytest
from cbenv import CB, make_cb
from mcp_http_server import Served, serving

TOKEN = "Bearer tok-9f8e7d6c5b4a"
HEADERS = {"Authorization": TOKEN, "X-Team": "blue-team"}


@pytest.fixture
def calc(tmp_path: Path) -> Iterator[Served]:
    with serving(tmp_path) as served:
        yield served


def calc_cb(tmp_path: Path, server: fs.FakeServer, url: str) -> CB:
    entry: dict[str, Any] = {"url": url, "headers": HEADERS, "allow": ["add"]}
    return make_cb(
        tmp_path, server.base_url, tools={"enabled": True}, mcp={"servers": {"calc": entry}}
    )


def test_mcp_list_over_http_shows_the_tools_and_sends_the_headers(
    tmp_path: Path, server: fs.FakeServer, calc: Served
) -> None:
    cb = calc_cb(tmp_path, server, calc.url)
    proc = cb.invoke("mcp", "list")
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.splitlines() == [
        f"calc  running  (http: {calc.url})",
        "  mcp__calc__add(a*: integer, b*: integer)  [allowed without asking]",
        "      Add two integers.",
        "  mcp__calc__shout(text*: string)",
        "      The text in capitals.",
    ]
    seen = calc.requests()
    assert seen and all(r["path"] == "/mcp" for r in seen)
    for r in seen:
        assert r["headers"]["authorization"] == TOKEN and r["headers"]["x-team"] == "blue-team"
    assert "tok-9f8e" not in proc.stdout + proc.stderr


def test_an_allowed_call_runs_over_http_and_one_not_allowed_is_denied_without_a_terminal(
    tmp_path: Path, server: fs.FakeServer, calc: Served
) -> None:
    cb = calc_cb(tmp_path, server, calc.url)
    server.add(
        fs.tool_calls(
            [("mcp__calc__add", {"a": 2, "b": 40}), ("mcp__calc__shout", {"text": "hi"})]
        ),
        fs.text("The sum is 42."),
    )
    proc = cb.invoke("ask", "add 2 and 40, and shout hi")
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.endswith("The sum is 42.\n")
    first, second = server.chat_bodies()
    names = [t["function"]["name"] for t in first["tools"]]
    assert {"mcp__calc__add", "mcp__calc__shout"} <= set(names)
    added, shouted = [m for m in second["messages"] if m["role"] == "tool"]
    assert added["content"] == "42"
    assert "HI" not in shouted["content"] and "denied" in shouted["content"].lower()
    record = cb.only_session()["tool_conversations"][0]
    assert (record["tool"], record["approval"], record["outcome"]) == (
        "mcp__calc__add",
        "allow-rule",
        "ok",
    )
    assert all(r["headers"]["authorization"] == TOKEN for r in calc.requests())
    assert "tok-9f8e" not in proc.stdout + proc.stderr
    assert "tok-9f8e" not in json.dumps(cb.only_session())
