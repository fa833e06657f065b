"""ToolRunner under Ctrl-C at every step of a call: each tool_call_id still gets exactly one
`tool` message and one record, and the round's result holds the interrupt for the engine."""

from __future__ import annotations

import threading
from pathlib import Path
from typing import Any

from countbot_cli.config.settings import ToolSettings
from countbot_cli.conversation.tool_round import RoundResult, ToolRunner
from countbot_cli.conversation.view import NullView
from countbot_cli.errors import Terminated
from countbot_cli.messages import ToolCall
from countbot_cli.tools.approval import ApprovalPolicy, Decision
from countbot_cli.tools.registry import (
    PreparedCall,
    ToolContext,
    ToolRegistry,
    ToolResult,
    ToolSpec,
    default_tools,
)

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
    done = r.run_calls(calls, view)
    assert isinstance(done, RoundResult) and isinstance(done.interrupt, KeyboardInterrupt)
    return done.messages, done.records


def answered_once(calls: list[ToolCall], convo: list[dict[str, Any]]) -> None:
    assert [m["tool_call_id"] for m in convo] == [c.id for c in calls]
    assert all(m["role"] == "tool" and m["content"] for m in convo)


def test_ctrl_c_while_the_view_shows_a_result(tmp_path: Path) -> None:
    convo, records = run(runner(tmp_path), CALLS, View("end", "c1"))
    answered_once(CALLS, convo)
    assert convo[0]["content"].startswith("[File: a.txt | Lines: 1]")
    assert [r.outcome for r in records] == ["ok", "interrupted", "interrupted"]


def test_ctrl_c_while_the_view_announces_a_call(tmp_path: Path) -> None:
    convo, records = run(runner(tmp_path), CALLS, View("start", "c2"))
    answered_once(CALLS, convo)
    assert convo[1]["content"] == "Interrupted before it ran: the user interrupted the turn."
    assert [r.outcome for r in records] == ["ok", "interrupted", "interrupted"]


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
    assert [r.outcome for r in records] == ["ok", "interrupted", "interrupted"]
    assert records[1].approval == "not-run"


class Terminating(NullView):
    """SIGTERM (Terminated, a KeyboardInterrupt) while call `on_call` is announced."""

    def __init__(self, on_call: str) -> None:
        self.on_call = on_call

    def tool_start(self, prepared: PreparedCall) -> None:
        if prepared.call.id == self.on_call:
            raise Terminated


def test_a_termination_in_a_round_is_kept_as_what_stopped_it(tmp_path: Path) -> None:
    calls = list(CALLS)
    done = runner(tmp_path).run_calls(calls, Terminating("c2"))
    assert type(done.interrupt) is Terminated  # the engine stops the program once it is saved
    answered_once(CALLS, done.messages)
    assert [r.outcome for r in done.records] == ["ok", "interrupted", "interrupted"]
    assert calls == CALLS  # the calls it was handed are left as they were


def test_a_round_without_interrupt_records_every_call_by_its_outcome(tmp_path: Path) -> None:
    calls = [CALLS[0], ToolCall("c4", "read_file", '{"path": "missing.txt"}'), CALLS[2]]
    done = runner(tmp_path).run_calls(calls, NullView())
    assert done.interrupt is None
    answered_once(calls, done.messages)
    first, missing, listing = done.records
    assert (first.tool_call_id, first.tool, first.arguments) == (
        "c1",
        "read_file",
        {"path": "a.txt"},
    )
    assert (first.outcome, first.error, first.approval) == ("ok", None, "not-needed")
    assert first.result.startswith("[File: a.txt | Lines: 1]")
    assert missing.outcome == "error" and missing.error and "missing.txt" in missing.result
    assert listing.outcome == "ok" and listing.arguments == {}
    assert first.stored("m1") == {
        "tool_call_id": "c1",
        "tool": "read_file",
        "arguments": {"path": "a.txt"},
        "result": first.result,
        "error": None,
        "outcome": "ok",
        "duration_ms": first.duration_ms,
        "approval": "not-needed",
        "timestamp": first.timestamp,
        "message_id": "m1",
    }
