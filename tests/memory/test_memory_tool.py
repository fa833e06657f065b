"""The `memory` tool: CountBot's parameters, write/search/read outputs, approval for writes, and
its registration in the engine built by `app.build_engine` (driven as `countbot ask`)."""

from __future__ import annotations

import io
import json
import threading
from datetime import date
from pathlib import Path

import fakeserver as fs
import pytest
from cbenv import make_cb

from countbot_cli.commands.memory import memory_show
from countbot_cli.memory.store import DEFAULT_HEADER, MemoryStore
from countbot_cli.memory.tool import memory_tool
from countbot_cli.messages import ToolCall
from countbot_cli.tools.approval import HOW_DENIED_POLICY, HOW_NOT_NEEDED, ApprovalPolicy
from countbot_cli.tools.registry import ToolContext, ToolRegistry, ToolResult

DAY = date(2026, 3, 4)
L1 = len(DEFAULT_HEADER.splitlines()) + 1  # the file line of the first entry (not its number)


@pytest.fixture
def store(tmp_path: Path) -> MemoryStore:
    return MemoryStore(tmp_path / "MEMORY.md")


@pytest.fixture
def registry(tmp_path: Path, store: MemoryStore) -> ToolRegistry:
    return ToolRegistry([memory_tool(store, today=lambda: DAY)], ToolContext(workspace=tmp_path))


def call(registry: ToolRegistry, **args: object) -> ToolResult:
    prepared = registry.prepare(ToolCall("c1", "memory", json.dumps(args)))
    assert prepared.error is None, prepared.error
    return registry.run(prepared, threading.Event())


def test_schema_has_countbots_parameters(registry: ToolRegistry) -> None:
    (schema,) = registry.schemas()
    params = schema["function"]["parameters"]
    assert schema["function"]["name"] == "memory"
    assert set(params["properties"]) == {
        "action",
        "content",
        "keywords",
        "max_results",
        "match_mode",
        "start_line",
        "end_line",
        "recent_count",
    }
    assert params["properties"]["action"]["enum"] == ["write", "search", "read"]
    assert params["required"] == ["action"]


def test_write_needs_approval_and_reads_do_not(registry: ToolRegistry) -> None:
    write = registry.prepare(ToolCall("c1", "memory", '{"action":"write","content":"likes tea"}'))
    assert write.needs_approval and write.reasons == ["writes to long-term memory (MEMORY.md)"]
    assert write.preview.endswith("2026-03-04|tool|likes tea")
    denied = ApprovalPolicy().decide(write)
    assert not denied.approved and "non-interactive" in (denied.reason or "")
    # neither --yes nor /tools auto approves it: only a person does
    assert ApprovalPolicy(yes_writes=True).decide(write).how == HOW_DENIED_POLICY
    assert ApprovalPolicy(mode="auto").decide(write).how == HOW_DENIED_POLICY
    for args in ('{"action":"search","keywords":"tea"}', '{"action":"read"}'):
        prepared = registry.prepare(ToolCall("c2", "memory", args))
        assert not prepared.needs_approval
        assert ApprovalPolicy().decide(prepared).how == HOW_NOT_NEEDED


def test_write_outputs(registry: ToolRegistry, store: MemoryStore) -> None:
    res = call(registry, action="write", content="The user prefers tabs；editor: Helix")
    assert res.ok and res.content == "Saved to memory as entry 1 (1 entry)."
    assert store.entries()[0].line == "2026-03-04|tool|The user prefers tabs；editor: Helix"
    assert store.path.read_text("utf-8").splitlines()[L1 - 1] == store.entries()[0].line
    again = call(registry, action="write", content="The user prefers tabs；editor: Helix")
    assert again.ok and again.content == "Already in memory; not added again (1 entry)."
    missing = call(registry, action="write")
    assert not missing.ok and "needs 'content'" in missing.content
    long = call(registry, action="write", content="x" * 2500)
    assert not long.ok and "2500 characters" in long.content


def test_the_preview_shows_exactly_the_line_that_is_stored(
    registry: ToolRegistry, store: MemoryStore
) -> None:
    content = "likes\n  tea \x1b[31mred\x1b[0m\tand\rcoffee"
    prepared = registry.prepare(
        ToolCall("c1", "memory", json.dumps({"action": "write", "content": content}))
    )
    assert registry.run(prepared, threading.Event()).ok
    assert prepared.preview.split("\n")[-1] == store.entries()[0].line


def seed(store: MemoryStore) -> None:
    store.add("Redis runs on port 6380", "user", date="2026-01-01")
    store.add("The user likes green tea", "auto-memory", date="2026-01-02")
    store.add("Redis password rotates monthly", "tool", date="2026-01-03")
    store.add("项目使用 PostgreSQL 16 数据库", "auto-overflow", date="2026-01-04")


def test_search_outputs(registry: ToolRegistry, store: MemoryStore) -> None:
    assert call(registry, action="search", keywords="redis").content == "Memory is empty."
    seed(store)
    res = call(registry, action="search", keywords="redis port")
    lines = res.content.split("\n")
    assert lines[0] == "Memory holds 4 entries, dates 2026-01-01 ~ 2026-01-04."
    assert lines[2] == "[1] 2026-01-01|user|Redis runs on port 6380"  # both words first
    assert lines[3] == "[3] 2026-01-03|tool|Redis password rotates monthly"
    both = call(registry, action="search", keywords="redis port", match_mode="and")
    assert both.content.split("\n")[2:] == ["[1] 2026-01-01|user|Redis runs on port 6380"]
    capped = call(registry, action="search", keywords="redis", max_results=1)
    assert capped.content.endswith("\n... 2 matches, showing the best 1")
    cjk = call(registry, action="search", keywords="数据库")
    assert "PostgreSQL 16" in cjk.content
    none = call(registry, action="search", keywords="kubernetes")
    assert none.ok and none.content.endswith("No entry matches: kubernetes")
    assert not call(registry, action="search").ok


def test_read_outputs(registry: ToolRegistry, store: MemoryStore) -> None:
    assert call(registry, action="read").content == "Memory is empty."
    seed(store)
    recent = call(registry, action="read", recent_count=2).content.split("\n")
    assert recent[2:] == [
        "[3] 2026-01-03|tool|Redis password rotates monthly",
        "[4] 2026-01-04|auto-overflow|项目使用 PostgreSQL 16 数据库",
    ]
    assert len(call(registry, action="read").content.split("\n")) == 2 + 4  # default 10
    ranged = call(registry, action="read", start_line=2, end_line=3).content.split("\n")
    assert [ln.split("]")[0] for ln in ranged[2:]] == ["[2", "[3"]
    one = call(registry, action="read", start_line=1).content.split("\n")
    assert one[2:] == ["[1] 2026-01-01|user|Redis runs on port 6380"]  # that one entry
    clamped = call(registry, action="read", start_line=9, end_line=2).content.split("\n")
    assert clamped[2:] == ["[4] 2026-01-04|auto-overflow|项目使用 PostgreSQL 16 数据库"]


def test_the_models_numbers_are_the_users_entry_numbers(
    registry: ToolRegistry, store: MemoryStore
) -> None:
    """A header comment, blank lines and an unparsed line shift file lines, not the numbers the
    tool shows the model: [N] is the entry `memory show`, why, pin, delete ... call N."""
    store.path.write_text(
        "# my notes\n\n2026-01-01|user|Redis runs on port 6380\n\nnot an entry\n"
        "# more\n2026-01-02|user|The user likes green tea\n",
        encoding="utf-8",
    )
    tea = call(registry, action="search", keywords="tea").content.split("\n")[2]
    assert tea == "[2] 2026-01-02|user|The user likes green tea"
    assert store.entry(2).content == "The user likes green tea"
    read = call(registry, action="read", start_line=2, end_line=2).content.split("\n")
    assert read[2:] == [tea]
    saved = call(registry, action="write", content="Deploys use Ansible 9")
    assert saved.content == "Saved to memory as entry 3 (3 entries)."
    assert store.entry(3).content == "Deploys use Ansible 9"
    recent = call(registry, action="read", recent_count=2).content.split("\n")
    assert [ln.split("]")[0] for ln in recent[2:]] == ["[2", "[3"]
    out = io.StringIO()
    memory_show(store, out)
    row = next(ln for ln in out.getvalue().splitlines() if "green tea" in ln)
    assert row.split()[0] == "2"  # the number memory show gives that entry


def test_bad_arguments_are_reported(registry: ToolRegistry) -> None:
    bad = registry.prepare(ToolCall("c1", "memory", '{"action":"forget"}'))
    assert bad.error and "must be one of write, search, read" in bad.error
    extra = registry.prepare(ToolCall("c1", "memory", '{"action":"read","path":"x"}'))
    assert extra.error and "unknown argument 'path'" in extra.error


def _memory_turn(tmp_path: Path, *flags: str) -> tuple[fs.FakeServer, Path, str]:
    with fs.FakeServer() as server:
        args = {"action": "write", "content": "The user deploys with Ansible 9"}
        server.add(fs.tool_calls([("memory", args)]), fs.text("Noted."))
        cb = make_cb(tmp_path, server.base_url, tools={"enabled": True})
        proc = cb.invoke("ask", *flags, "remember that I deploy with Ansible 9")
        assert proc.returncode == 0, proc.stderr
        assert proc.stdout == "Noted.\n"
        bodies = server.chat_bodies()
    names = [t["function"]["name"] for t in bodies[0]["tools"]]
    assert "memory" in names and "read_file" in names
    tool_msg = bodies[1]["messages"][-1]
    assert tool_msg["role"] == "tool"
    return server, cb.memory_file, tool_msg["content"]


def test_ask_with_yes_still_denies_the_memory_write(tmp_path: Path) -> None:
    _, memory_file, result = _memory_turn(tmp_path, "--yes")
    assert result.startswith("Denied: writing to long-term memory needs the user's approval")
    assert not memory_file.exists()


def test_ask_without_yes_denies_the_write(tmp_path: Path) -> None:
    _, memory_file, result = _memory_turn(tmp_path)
    assert result.startswith("Denied: ")
    assert not memory_file.exists()
