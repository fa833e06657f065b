"""An installation with tools on, and what the tool tests read back: the tool results and the
calls on the wire, and a workspace with every way out of it (a `..` path, an absolute path, a
link out, a look-alike sibling folder) for the escape tests; text of a known token count.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import fakeserver as fs
from cbenv import CB, make_cb

# a shell that starts a background child and records both pids, then waits: what a timeout or
# a Ctrl-C must end, the child included
SPAWN_SCRIPT = "sleep 300 &\necho $! > child.pid\necho $$ > shell.pid\nsleep 300\n"

# words of one token each (cl100k), for tool results and history of a known size
ONE_TOKEN_WORDS = ("alpha", "beta", "gamma", "delta", "river", "stone", "cloud", "green",
                   "house", "paper", "table", "light", "water", "north")  # fmt: skip


def words(n: int, seed: int = 0) -> str:
    """`n` words of one token each (cl100k), on one line: so many tokens, at least."""
    return " ".join(ONE_TOKEN_WORDS[(seed + i * 5) % len(ONE_TOKEN_WORDS)] for i in range(n))


def tools_cb(tmp_path: Path, server: fs.FakeServer, **tools: Any) -> CB:
    """An installation on `server` with tools on; `tools` adds to its `tools:` section and
    `config=` to the top level."""
    extra = tools.pop("config", {})
    return make_cb(tmp_path, server.base_url, tools={"enabled": True, **tools}, **extra)


def tool_messages(body: dict[str, Any]) -> list[dict[str, Any]]:
    """The tool results in one chat request body."""
    return [m for m in body["messages"] if m["role"] == "tool"]


def assistant_calls(body: dict[str, Any]) -> list[dict[str, Any]]:
    """The tool calls of the assistant messages in one chat request body."""
    calls = [m for m in body["messages"] if m["role"] == "assistant" and m.get("tool_calls")]
    return [c for m in calls for c in m["tool_calls"]]


def escape_workspace(cb: CB) -> Path:
    """workspace <work>/p/ws with a canary two levels up, a link out and a look-alike sibling."""
    ws = cb.work / "p" / "ws"
    ws.mkdir(parents=True)
    (cb.work / "etc").mkdir()
    (cb.work / "etc" / "passwd").write_text("SECRET-DOTDOT\n", encoding="utf-8")
    outside = cb.work / "outside"
    outside.mkdir()
    (outside / "secret.txt").write_text("SECRET-LINK\n", encoding="utf-8")
    (ws / "link").symlink_to(outside)
    sibling = cb.work / "p" / "ws-evil"
    sibling.mkdir()
    (sibling / "secret.txt").write_text("SECRET-SIBLING\n", encoding="utf-8")
    return ws


def escape_calls(cb: CB) -> list[tuple[str, dict[str, Any]]]:
    """One tool call per way out of `escape_workspace`."""
    sibling = cb.work / "p" / "ws-evil"
    return [
        ("read_file", {"path": "../../etc/passwd"}),
        ("read_file", {"path": "/etc/passwd"}),
        ("read_file", {"path": "link/secret.txt"}),
        ("read_file", {"path": str(sibling / "secret.txt")}),
        ("write_file", {"path": "../ws-evil/planted.txt", "content": "x"}),
        ("write_file", {"path": "link/planted.txt", "content": "x"}),
        ("exec", {"command": "touch pwned", "working_dir": str(sibling)}),
    ]


def assert_untouched(cb: CB, server: fs.FakeServer, *, approved: tuple[str, ...] = ()) -> None:
    """No secret outside the workspace reached the model (but `approved`), nothing was written."""
    wire = json.dumps(server.chat_bodies(), ensure_ascii=False)
    for secret in ("SECRET-DOTDOT", "SECRET-LINK", "SECRET-SIBLING", "root:x:0:0"):
        if secret not in approved:
            assert secret not in wire, secret
    sibling = cb.work / "p" / "ws-evil"
    assert not (sibling / "planted.txt").exists()
    assert not (cb.work / "outside" / "planted.txt").exists()
    assert not (sibling / "pwned").exists()
