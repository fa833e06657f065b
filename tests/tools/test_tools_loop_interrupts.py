"""ToolRunner under Ctrl-C at every step of a call: each tool_call_id still gets exactly one
`tool` message and one record, and the interrupt reaches the engine."""

from __future__ import annotations

import threading
from pathlib import Path
from typing import Any

import pytest

from countbot_cli.config.settings import ToolSettings
from countbot_cli.conversation.tool_round import ToolRunner
from countbot_cli.conversation.view import NullView
from countbot_cli.messages import ToolCall
from countbot_cli.tools import (
    PreparedCall,
    ToolContext,
    ToolRegistry,
    ToolResult,
    ToolSpec,
    default_tools,
)
from countbot_cli.tools.approval import ApprovalPolicy, Decision

CALLS = [
    ToolCall("c1", "read_file", '{"path": "a.txt"}'),
    ToolCall("c2", "read_file", '{"path": "a.txt"}'),
    ToolCall("c3", "list_dir", "{}"),
]


class View(NullView):
    """Ctrl-C (KeyboardInterrupt) when call `on_call` starts or ends (`fail_in`)."""

    def __init__(self, fail_in: str = "", on_call: str = "c1") -> None:
        self.fail_in = fail_in
        self.on_call = on_call

    def _maybe(self, where: str, prepared: PreparedCall) -> None:
        if where == self.fail_in and prepared.call.id == self.on_call:
            raise KeyboardInterrupt

    def tool_start(self, prepared: PreparedCall) -> None:
        self._maybe("start", prepared)

    def tool_end(self, prepared: PreparedCall, result: ToolResult, decision: Decision) -> None:
        self._maybe("end", prepared)


def runner(ws: Path, extra: list[ToolSpec] | None = None) -> ToolRunner:
    (ws / "a.txt").write_text("alpha\n", encoding="utf-8")
    ctx = ToolContext(workspace=ws)
    registry = ToolRegistry([*default_tools(ctx), *(extra or [])], ctx)
    return ToolRunner(registry, ApprovalPolicy(), ToolSettings(workspace=ws))


def run(r: ToolRunner, calls: list[ToolCall], view: View) -> tuple[list[Any], list[Any]]:
    convo: list[dict[str, Any]] = []
    records: list[dict[str, Any]] = []
    with pytest.raises(KeyboardInterrupt):
        r.run_calls(calls, convo, view, records)
    return convo, records


def answered_once(calls: list[ToolCall], convo: list[dict[str, Any]]) -> None:
    assert [m["tool_call_id"] for m in convo] == [c.id for c in calls]
    assert all(m["role"] == "tool" and m["content"] for m in convo)


def test_ctrl_c_while_the_view_shows_a_result(tmp_path: Path) -> None:
    convo, records = run(runner(tmp_path), CALLS, View("end", "c1"))
    answered_once(CALLS, convo)
    assert convo[0]["content"].startswith("[File: a.txt | Lines: 1]")
    assert [r["outcome"] for r in records] == ["ok", "interrupted", "interrupted"]


def test_ctrl_c_while_the_view_announces_a_call(tmp_path: Path) -> None:
    convo, records = run(runner(tmp_path), CALLS, View("start", "c2"))
    answered_once(CALLS, convo)
    assert convo[1]["content"] == "Interrupted by the user before it ran."
    assert [r["outcome"] for r in records] == ["ok", "interrupted", "interrupted"]


def test_ctrl_c_while_a_preview_is_computed(tmp_path: Path) -> None:
    def slow_preview(args: dict[str, Any], ctx: ToolContext, may_read: bool) -> str:
        raise KeyboardInterrupt  # e.g. a diff of a big file, cut short

    def never(args: dict[str, Any], ctx: ToolContext, cancel: threading.Event) -> ToolResult:
        raise AssertionError("must not run")

    spec = ToolSpec(
        name="zz_slow",
        description="a tool with a slow preview",
        parameters={"type": "object", "properties": {}},
        run=never,
        kind="write",
        preview=slow_preview,
    )
    calls = [CALLS[0], ToolCall("c9", "zz_slow", "{}"), CALLS[2]]
    convo, records = run(runner(tmp_path, [spec]), calls, View())
    answered_once(calls, convo)
    assert [r["outcome"] for r in records] == ["ok", "interrupted", "interrupted"]
    assert records[1]["approval"] == "not-run"
