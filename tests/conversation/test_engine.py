"""The engine alone: no store, no conversation, a scripted provider. Each turn
is read back from the `TurnRecord` it returns, field by field: an answered turn with a tool
round, a failed one, an interrupted one, a bug, and the signals that stop the program once the
conversation has saved the turn (SIGTERM during a tool, a closed output)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from cbenv import make_cb

from countbot_cli.config.settings import load_settings
from countbot_cli.conversation.engine import Engine
from countbot_cli.conversation.sessions.session import Session, new_session
from countbot_cli.conversation.turn_record import ModelCall, ToolRecord, TurnRecord
from countbot_cli.conversation.view import NullView
from countbot_cli.errors import Interrupted, OutputClosed, StreamError, Terminated, UnexpectedError
from countbot_cli.messages import STATUS_FAILED, STATUS_INTERRUPTED, Message, Usage
from countbot_cli.provider.fake import Reply, ScriptedProvider, tool_call
from countbot_cli.tools.registry import PreparedCall, ToolContext, ToolRegistry, default_tools

QUESTION = "what is in a.txt?"


class Rig:
    """An engine with the file tools on a scripted provider; a session that is never saved."""

    def __init__(self, tmp_path: Path, *, streaming: bool = True) -> None:
        cb = make_cb(tmp_path, "http://127.0.0.1:9/v1")
        settings = load_settings(config_path=cb.config_file, env=cb.env, cwd=cb.work)
        (cb.work / "a.txt").write_text("alpha\n", encoding="utf-8")
        ctx = ToolContext(workspace=settings.tools.workspace)
        self.provider = ScriptedProvider(model="fake-model")
        self.engine = Engine(
            settings=settings,
            provider=self.provider,
            tools=ToolRegistry(default_tools(ctx), ctx),
            streaming=streaming,
        )
        self.session: Session = new_session(provider="fake", model="fake-model")
        self.started: list[tuple[Message, int]] = []  # the question, requests sent by then

    def turn(self, *replies: Reply | str, view: NullView | None = None) -> TurnRecord:
        self.provider.enqueue(*replies)
        return self.engine.run_turn(
            self.session, QUESTION, view or NullView(), started=self.on_started
        )

    def on_started(self, user: Message) -> None:
        self.started.append((user, len(self.provider.requests)))


class Terminating(NullView):
    """SIGTERM (Terminated) arrives while the view announces a tool call."""

    def tool_start(self, prepared: PreparedCall) -> None:
        raise Terminated


class ClosedOutput(NullView):
    """`ask`'s reader went away (`head -1`): writing the answer raises OutputClosed."""

    def text(self, delta: str) -> None:
        raise OutputClosed


READ_A = Reply(
    text="Reading it.",
    tool_calls=[tool_call("read_file", {"path": "a.txt"}, "call_1")],
    usage=Usage(prompt_tokens=100, completion_tokens=10, total_tokens=110),
    model="fake-model-0613",
)


def test_an_answered_turn_with_a_tool_round_is_recorded_field_by_field(tmp_path: Path) -> None:
    rig = Rig(tmp_path)
    answer = Reply(
        text=["The file ", "says alpha."],
        usage=Usage(prompt_tokens=130, completion_tokens=5, total_tokens=135, cached_tokens=100),
        model="fake-model-0613",
    )
    record = rig.turn(READ_A, answer)
    assert (record.user.role, record.user.content, record.user.status) == ("user", QUESTION, None)
    assert rig.started == [(record.user, 0)]  # the question, before any request left
    assert record.status == "ok"
    assert record.answer == "The file says alpha."
    assert record.reasoning == ""
    assert record.model == "fake-model-0613"  # as the provider named the model that answered
    assert record.finish_reason == "stop"
    assert record.calls == [
        ModelCall("fake-model-0613", READ_A.usage),
        ModelCall(answer.model, answer.usage),
    ]
    assert record.usage == Usage(
        prompt_tokens=230, completion_tokens=15, total_tokens=245, cached_tokens=100
    )
    assert record.usage_reported
    [tool] = record.tools
    assert isinstance(tool, ToolRecord)
    assert (tool.tool_call_id, tool.tool, tool.arguments) == (
        "call_1",
        "read_file",
        {"path": "a.txt"},
    )
    assert (tool.outcome, tool.error, tool.approval) == ("ok", None, "not-needed")
    assert tool.result.startswith("[File: a.txt | Lines: 1]") and "alpha" in tool.result
    assert record.tool_calls == [
        {"name": "read_file", "arguments": {"path": "a.txt"}, "outcome": "ok"}
    ]
    assert record.error is None and record.stopped_by is None
    assert record.context is not None and record.context.user is record.user
    # the second request carries the call and its answer; the session is left as it was
    sent = rig.provider.requests[1].messages
    assert [m["role"] for m in sent[-2:]] == ["assistant", "tool"]
    assert sent[-1]["tool_call_id"] == "call_1" and "alpha" in sent[-1]["content"]
    assert rig.session.messages == [] and rig.session.tool_conversations == []
    question, reply = record.messages()
    assert (question.id, question.status) == (record.user.id, None)
    assert (reply.role, reply.content, reply.status, reply.model) == (
        "assistant",
        "The file says alpha.",
        None,
        "fake-model-0613",
    )


def test_a_failed_turn_keeps_what_arrived_and_the_error(tmp_path: Path) -> None:
    rig = Rig(tmp_path)
    broke = StreamError("the stream broke")
    record = rig.turn(Reply(text=["Half of ", "an answer"], error=broke))
    assert record.status == "failed"
    assert record.error is broke
    assert record.answer == "Half of an answer"
    assert record.calls == [] and record.usage == Usage() and not record.usage_reported
    assert record.finish_reason is None and record.tools == [] and record.stopped_by is None
    assert len(rig.started) == 1
    question, partial = record.messages()
    assert (question.content, question.status) == (QUESTION, STATUS_FAILED)
    assert (partial.content, partial.status) == ("Half of an answer", STATUS_FAILED)
    assert record.user.status is None  # the question as asked; the saved copy is marked


def test_a_bug_in_a_turn_is_an_unexpected_error_of_a_failed_turn(tmp_path: Path) -> None:
    rig = Rig(tmp_path)
    record = rig.turn(Reply(error=RuntimeError("boom")))
    assert record.status == "failed" and record.answer == ""
    assert isinstance(record.error, UnexpectedError)
    assert record.error.message == "unexpected error: RuntimeError: boom"
    assert [(m.content, m.status) for m in record.messages()] == [(QUESTION, STATUS_FAILED)]


def test_an_interrupted_turn_keeps_what_arrived(tmp_path: Path) -> None:
    rig = Rig(tmp_path)
    record = rig.turn(Reply(text=["Half an ", "answer"], error=KeyboardInterrupt()))
    assert record.status == "interrupted"
    assert isinstance(record.error, Interrupted)
    assert record.error.message == "interrupted by the user"
    assert record.answer == "Half an answer"
    assert record.stopped_by is None  # Ctrl-C ends the turn, not the program
    assert record.calls == [] and record.tools == []
    question, partial = record.messages()
    assert question.status is None  # answered in part: the answer carries the mark
    assert (partial.content, partial.status) == ("Half an answer", STATUS_INTERRUPTED)


def test_ctrl_c_before_anything_arrived_keeps_the_question_marked(tmp_path: Path) -> None:
    rig = Rig(tmp_path)
    record = rig.turn(Reply(error=KeyboardInterrupt()))
    assert (record.status, record.answer) == ("interrupted", "")
    assert [(m.content, m.status) for m in record.messages()] == [(QUESTION, STATUS_INTERRUPTED)]


def test_ctrl_c_while_the_question_is_saved_interrupts_before_the_model(tmp_path: Path) -> None:
    rig = Rig(tmp_path)

    def held_ctrl_c(user: Message) -> None:  # delivered when the save's signal hold ends
        raise KeyboardInterrupt

    rig.provider.enqueue("never asked")
    record = rig.engine.run_turn(rig.session, QUESTION, NullView(), started=held_ctrl_c)
    assert record.status == "interrupted" and record.answer == ""
    assert rig.provider.requests == [] and rig.provider.pending == 1


@pytest.mark.parametrize(
    ("stop", "status"),
    [
        (KeyboardInterrupt(), "interrupted"),
        (Terminated("SIGTERM"), "interrupted"),
        (OSError("x"), "failed"),
    ],
)
def test_what_stops_the_set_up_ends_the_turn_with_the_question(
    tmp_path: Path, stop: BaseException, status: str
) -> None:
    """Ctrl-C (or a termination, or an error) while the request is built, here while a tool
    source loads (MCP servers start then): the turn ends as one before the first token, its
    question in the record; nothing is asked. The question was "started" (saved) before."""
    rig = Rig(tmp_path)

    def source() -> list[Any]:
        raise stop

    assert rig.engine.tools is not None
    rig.engine.tools.add_source(source)
    record = rig.turn("never asked")
    assert (record.status, record.answer, record.context) == (status, "", None)
    assert rig.provider.requests == [] and rig.started == [(record.user, 0)]
    assert [(m.content, m.status) for m in record.messages()] == [(QUESTION, status)]
    assert record.stopped_by is (stop if isinstance(stop, Terminated) else None)


def test_sigterm_during_a_tool_stops_the_turn_and_is_kept_for_after_the_save(
    tmp_path: Path,
) -> None:
    rig = Rig(tmp_path)
    record = rig.turn(READ_A, view=Terminating())
    assert record.status == "interrupted"
    assert type(record.stopped_by) is Terminated  # the conversation raises it once saved
    assert record.error is not None
    assert record.error.message == "interrupted: countbot was terminated (SIGTERM)"
    assert record.answer == "Reading it."  # the text that came with the calls
    assert [(t.tool, t.outcome) for t in record.tools] == [("read_file", "interrupted")]
    assert record.calls == [ModelCall("fake-model-0613", READ_A.usage)]
    assert len(rig.provider.requests) == 1  # no request after the interrupted round


def test_a_closed_output_ends_the_turn_and_is_kept_for_after_the_save(tmp_path: Path) -> None:
    rig = Rig(tmp_path)
    record = rig.turn(Reply(text="An answer nobody reads."), view=ClosedOutput())
    assert record.status == "interrupted"
    assert isinstance(record.stopped_by, OutputClosed)
    assert isinstance(record.error, Interrupted)
    assert record.error.message == "interrupted: the output was closed"


@pytest.mark.parametrize("streaming", [True, False])
def test_a_turn_needs_no_store_streamed_or_not(tmp_path: Path, streaming: bool) -> None:
    rig = Rig(tmp_path, streaming=streaming)
    record = rig.turn(Reply(text="Hello.", usage=Usage(3, 2, 5)))
    assert (record.status, record.answer, record.usage.total_tokens) == ("ok", "Hello.", 5)
    assert rig.provider.requests[0].stream is streaming
