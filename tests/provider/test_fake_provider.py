"""The scripted provider: queued replies come out as a real provider's events, requests recorded."""

from __future__ import annotations

import ast
import sys
from pathlib import Path

import pytest

from countbot_cli.errors import RateLimitError
from countbot_cli.messages import (
    ChatRequest,
    Finished,
    ReasoningDelta,
    TextDelta,
    ToolCall,
    ToolCallDelta,
    Usage,
)
from countbot_cli.provider import fake
from countbot_cli.provider.fake import Reply, ScriptedProvider, tool_call


def request(text: str = "hi", *, stream: bool = True) -> ChatRequest:
    return ChatRequest(
        model="fake-model", messages=[{"role": "user", "content": text}], stream=stream
    )


def test_a_string_reply_streams_one_delta_then_finished() -> None:
    provider = ScriptedProvider().enqueue("Hello!")
    events = list(provider.stream(request()))
    assert events == [
        TextDelta("Hello!"),
        Finished(content="Hello!", tool_calls=[], finish_reason="stop"),
    ]


def test_deltas_come_in_order_reasoning_text_tool_calls_then_finished() -> None:
    calls = [tool_call("read_file", {"path": "a.txt"}), tool_call("exec", '{"cmd": "ls"}', "c2")]
    usage = Usage(prompt_tokens=12, completion_tokens=3, total_tokens=15)
    reply = Reply(text=["Let me ", "look."], reasoning=["hm", "m"], tool_calls=calls, usage=usage)
    events = list(ScriptedProvider().enqueue(reply).stream(request()))
    assert events[:6] == [
        ReasoningDelta("hm"),
        ReasoningDelta("m"),
        TextDelta("Let me "),
        TextDelta("look."),
        ToolCallDelta(0, "read_file"),
        ToolCallDelta(1, "exec"),
    ]
    assert events[6] == Finished(
        content="Let me look.",
        tool_calls=[
            ToolCall(id="call_read_file", name="read_file", arguments='{"path": "a.txt"}'),
            ToolCall(id="c2", name="exec", arguments='{"cmd": "ls"}'),
        ],
        finish_reason="tool_calls",
        usage=usage,
        reasoning="hmm",
    )
    assert len(events) == 7


def test_an_explicit_finish_reason_and_model_are_kept() -> None:
    provider = ScriptedProvider().enqueue(Reply(text="cut", finish_reason="length", model="m-2"))
    fin = provider.complete(request(stream=False))
    assert (fin.content, fin.finish_reason, fin.model) == ("cut", "length", "m-2")


def test_replies_are_used_in_order_and_every_request_is_recorded() -> None:
    provider = ScriptedProvider().enqueue("one", "two")
    provider.enqueue(Reply(text="three"))
    first, second = request("a"), request("b", stream=False)
    assert list(provider.stream(first))[-1] == Finished("one", [], "stop")
    assert provider.complete(second).content == "two"
    assert provider.requests == [first, second]
    assert provider.pending == 1


def test_the_request_is_recorded_when_the_call_is_made_not_when_the_stream_is_read() -> None:
    provider = ScriptedProvider().enqueue("x")
    provider.stream(request("asked"))
    assert [r.messages[-1]["content"] for r in provider.requests] == ["asked"]


def test_an_error_is_raised_mid_stream_after_the_deltas() -> None:
    err = RateLimitError("slow down", status=429)
    stream = ScriptedProvider().enqueue(Reply(text=["Half of ", "it"], error=err)).stream(request())
    assert next(stream) == TextDelta("Half of ")
    assert next(stream) == TextDelta("it")
    with pytest.raises(RateLimitError) as info:
        next(stream)
    assert info.value is err


def test_an_interrupt_arrives_as_keyboard_interrupt_mid_stream() -> None:
    stream = ScriptedProvider().enqueue(Reply(text="partial", error=KeyboardInterrupt()))
    received = []
    with pytest.raises(KeyboardInterrupt):
        for event in stream.stream(request()):
            received.append(event)
    assert received == [TextDelta("partial")]


def test_complete_raises_the_error_of_a_failing_reply() -> None:
    provider = ScriptedProvider().enqueue(Reply(text="ignored", error=ValueError("bug")))
    with pytest.raises(ValueError, match="bug"):
        provider.complete(request(stream=False))
    assert len(provider.requests) == 1


def test_a_request_with_nothing_queued_fails_loudly() -> None:
    provider = ScriptedProvider().enqueue("only one")
    provider.complete(request())
    with pytest.raises(AssertionError, match="request 2 came but no reply is queued"):
        provider.stream(request())


def test_models_capabilities_and_close() -> None:
    provider = ScriptedProvider(name="p", model="m", supports_tools=False)
    assert (provider.name, provider.model, provider.supports_tools) == ("p", "m", False)
    assert provider.list_models() == ["m"]
    assert ScriptedProvider(models=["a", "b"]).list_models() == ["a", "b"]
    assert not provider.closed
    provider.close()
    assert provider.closed


def test_the_fake_imports_no_http_library() -> None:
    """It must stay usable where httpx is absent or forbidden: stdlib + countbot_cli only."""
    tree = ast.parse(Path(fake.__file__).read_text(encoding="utf-8"))
    roots = {
        (node.module or "").split(".")[0]
        for node in ast.walk(tree)
        if isinstance(node, ast.ImportFrom)
    } | {
        alias.name.split(".")[0]
        for node in ast.walk(tree)
        if isinstance(node, ast.Import)
        for alias in node.names
    }
    outside = {r for r in roots if r not in sys.stdlib_module_names and r != "countbot_cli"}
    assert outside == set()
