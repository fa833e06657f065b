"""The OpenAI-compatible provider over httpx.MockTransport: streams, quirks, errors and retries."""

from __future__ import annotations

import json
import socket
import subprocess
import sys
import threading
from collections.abc import Callable, Generator, Iterator
from dataclasses import dataclass
from functools import partial
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

import httpx
import pytest
from cbenv import provider_settings

from countbot_cli.config.providers import ProviderConfig
from countbot_cli.errors import (
    AuthError,
    ConfigError,
    ConnectError,
    ContextLengthError,
    ModelNotFoundError,
    ProviderError,
    QuotaExceededError,
    RateLimitError,
    ReadTimeoutError,
    ServerError,
    StreamError,
)
from countbot_cli.messages import (
    ChatRequest,
    Finished,
    Message,
    ReasoningDelta,
    StreamEvent,
    TextDelta,
    ToolCall,
    ToolCallDelta,
)
from countbot_cli.provider import make_provider
from countbot_cli.provider.openai_compat import OpenAICompatProvider, build_request

KEY = "sk-test-0123456789abcdef"
BASE = "http://127.0.0.1:9/v1"


Cfg = partial(provider_settings, api_base=BASE, api_key=KEY, model="gpt-test")


Reply = Callable[[httpx.Request], httpx.Response]


class Chunks(httpx.SyncByteStream):
    """A response body delivered in the given pieces; an exception instance is raised there."""

    def __init__(self, parts: list[bytes | BaseException]) -> None:
        self.parts = parts
        self.closed = False
        self.sent = 0

    def __iter__(self) -> Iterator[bytes]:
        for part in self.parts:
            if isinstance(part, BaseException):
                raise part
            self.sent += 1
            yield part

    def close(self) -> None:
        self.closed = True


@dataclass
class Rig:
    provider: OpenAICompatProvider
    requests: list[httpx.Request]
    sleeps: list[float]
    notices: list[str]

    def events(self, req: ChatRequest | None = None) -> list[StreamEvent]:
        return list(self.provider.stream(req or chat()))

    def body(self, i: int = -1) -> dict[str, Any]:
        result: dict[str, Any] = json.loads(self.requests[i].content)
        return result


def rig(
    replies: list[Reply | httpx.Response | Exception], cfg: ProviderConfig | None = None
) -> Rig:
    """A provider whose transport answers the requests in order with `replies`."""
    requests: list[httpx.Request] = []
    sleeps: list[float] = []
    notices: list[str] = []
    pending = list(replies)

    def handler(request: httpx.Request) -> httpx.Response:
        requests.append(request)
        reply = pending.pop(0)
        if isinstance(reply, Exception):
            raise reply
        return reply if isinstance(reply, httpx.Response) else reply(request)

    client = httpx.Client(transport=httpx.MockTransport(handler))
    provider = OpenAICompatProvider(
        cfg or Cfg(), client, sleep=sleeps.append, on_notice=notices.append, rand=lambda: 0.0
    )
    return Rig(provider, requests, sleeps, notices)


def chat(**kw: Any) -> ChatRequest:
    kw.setdefault("messages", [{"role": "user", "content": "hi"}])
    return ChatRequest(model=kw.pop("model", "gpt-test"), **kw)


def chunk(delta: dict[str, Any] | None = None, finish: str | None = None, **top: Any) -> dict:
    choice: dict[str, Any] = {"index": 0, "logprobs": None, "finish_reason": finish}
    if delta is not None:
        choice["delta"] = delta
    return {
        "id": "chatcmpl-1",
        "object": "chat.completion.chunk",
        "model": "gpt-test-0613",
        "choices": [choice],
        **top,
    }


def sse(*objs: object, done: bool = True, nl: bytes = b"\n") -> bytes:
    parts = [b"data: " + json.dumps(o).encode() + nl + nl for o in objs]
    if done:
        parts.append(b"data: [DONE]" + nl + nl)
    return b"".join(parts)


def ok_sse(body: bytes | list[bytes | BaseException]) -> httpx.Response:
    parts: list[bytes | BaseException] = body if isinstance(body, list) else [body]
    return httpx.Response(
        200, headers={"content-type": "text/event-stream; charset=utf-8"}, stream=Chunks(parts)
    )


def err(status: int, body: object = None, headers: dict[str, str] | None = None) -> httpx.Response:
    content = body if isinstance(body, str) else json.dumps(body or {})
    return httpx.Response(status, headers=headers or {}, content=content.encode())


def finished(events: list[StreamEvent]) -> Finished:
    assert isinstance(events[-1], Finished)
    assert sum(isinstance(e, Finished) for e in events) == 1
    return events[-1]


def texts(events: list[StreamEvent]) -> list[str]:
    return [e.text for e in events if isinstance(e, TextDelta)]


USAGE = {"prompt_tokens": 12, "completion_tokens": 3, "total_tokens": 15}
TEXT = sse(
    chunk({"role": "assistant", "content": ""}),
    chunk({"content": "Hello"}),
    chunk({"content": None, "refusal": None}),
    chunk({"content": ", world"}),
    chunk({}, "stop"),
    {"id": "chatcmpl-1", "choices": [], "usage": USAGE},
)


# ---- streams ----


def test_openai_text_stream_with_usage_only_final_chunk() -> None:
    r = rig([ok_sse(TEXT)])
    events = r.events()
    assert texts(events) == ["Hello, world"]  # one read: its text goes on as one delta
    done = finished(events)
    assert (done.content, done.finish_reason, done.model) == (
        "Hello, world",
        "stop",
        "gpt-test-0613",
    )
    assert done.usage is not None and done.usage.total_tokens == 15
    assert done.tool_calls == [] and done.reasoning == ""


@pytest.mark.parametrize("encoding", ["gzip", "deflate", "identity"])
def test_an_encoded_stream_is_decoded_and_an_unencoded_one_read_raw(encoding: str) -> None:
    # an unencoded body skips httpx's decoding layer (iter_raw); an encoded one needs it
    import zlib

    packer = zlib.compressobj(wbits=31 if encoding == "gzip" else 15)
    if encoding == "identity":
        parts = [TEXT[i : i + 40] for i in range(0, len(TEXT), 40)]
    else:
        parts = [
            packer.compress(TEXT[i : i + 40]) + packer.flush(zlib.Z_SYNC_FLUSH)
            for i in range(0, len(TEXT), 40)
        ] + [packer.flush()]
    headers = {"content-type": "text/event-stream", "content-encoding": encoding}
    r = rig([httpx.Response(200, headers=headers, stream=Chunks(list(parts)))])
    events = r.events()
    assert texts(events) == ["Hello", ", world"]
    assert finished(events).content == "Hello, world"


def test_stream_split_into_tiny_pieces_gives_the_same_answer() -> None:
    pieces: list[bytes | BaseException] = [TEXT[i : i + 7] for i in range(0, len(TEXT), 7)]
    assert finished(rig([ok_sse(pieces)]).events()).content == "Hello, world"


def test_reasoning_deltas_are_collected_separately() -> None:
    body = sse(
        chunk({"role": "assistant", "reasoning_content": "Think "}),
        chunk({"reasoning": "harder."}),
        chunk({"content": "42"}, "stop"),
    )
    events = rig([ok_sse(body)]).events()
    assert [e.text for e in events if isinstance(e, ReasoningDelta)] == ["Think harder."]
    done = finished(events)
    assert (done.content, done.reasoning) == ("42", "Think harder.")


def test_each_read_hands_on_one_delta_for_each_run_of_text_or_reasoning() -> None:
    first = sse(
        chunk({"reasoning_content": "Think "}),
        chunk({"reasoning_content": "hard. "}),
        chunk({"content": "The "}),
        chunk({"content": "answer "}),
        _tools(_call(0, "c1", "calc", "{}")),
        chunk({"content": "is "}),
        done=False,
    )
    second = sse(chunk({"content": "4"}), chunk({"content": "2."}), chunk({}, "stop"))
    events = rig([ok_sse([first, second])]).events()
    kinds = [(type(e).__name__, getattr(e, "text", None)) for e in events[:-1]]
    assert kinds == [
        ("ReasoningDelta", "Think hard. "),
        ("TextDelta", "The answer "),
        ("ToolCallDelta", None),
        ("TextDelta", "is "),  # a run ends at another kind of event, and at the end of a read
        ("TextDelta", "42."),
    ]
    assert finished(events).content == "The answer is 42."


def test_azure_empty_choices_comments_and_crlf() -> None:
    azure = {"id": "", "model": "", "choices": [], "prompt_filter_results": [{"prompt_index": 0}]}
    body = b": ping\r\n\r\n" + sse(
        azure,
        chunk({"content": "ok"}),
        {"choices": None},
        {"id": "x"},
        chunk(None, "stop"),
        nl=b"\r\n",
    )
    done = finished(rig([ok_sse(body)]).events())
    assert (done.content, done.finish_reason, done.model) == ("ok", "stop", "gpt-test-0613")


def test_usage_inside_the_choice_is_read() -> None:
    last = chunk({}, "stop")
    last["choices"][0]["usage"] = USAGE
    done = finished(rig([ok_sse(sse(chunk({"content": "k"}), last))]).events())
    assert done.usage is not None and done.usage.prompt_tokens == 12


def test_eof_without_done_after_finish_reason_is_fine() -> None:
    body = sse(chunk({"content": "fine"}), chunk({}, "length"), done=False)
    done = finished(rig([ok_sse(body)]).events())
    assert (done.content, done.finish_reason) == ("fine", "length")


# ---- tool calls: the four shapes ----


def _call(
    index: int | None, call_id: str | None = None, name: str | None = None, args: Any = None
) -> dict[str, Any]:
    fn: dict[str, Any] = {}
    if name is not None:
        fn["name"] = name
    if args is not None:
        fn["arguments"] = args
    call: dict[str, Any] = {"type": "function", "function": fn}
    if index is not None:
        call["index"] = index
    if call_id is not None:
        call["id"] = call_id
    return call


def _tools(*calls: dict[str, Any]) -> dict[str, Any]:
    return chunk({"tool_calls": list(calls)})


def test_openai_split_arguments_and_parallel_calls() -> None:
    body = sse(
        chunk({"role": "assistant", "content": None}),
        _tools(_call(0, "call_4Xzl", "get_weather", "")),
        _tools({"index": 0, "function": {"arguments": '{"'}}),
        _tools({"index": 0, "function": {"arguments": "city"}}),
        _tools({"index": 0, "function": {"arguments": '":"Paris"}'}}),
        _tools(_call(1, "call_9Qy", "get_time", "")),
        _tools({"index": 1, "function": {"arguments": '{"tz":"CET"}'}}),
        chunk({}, "tool_calls"),
    )
    events = rig([ok_sse(body)]).events()
    assert {(e.index, e.name) for e in events if isinstance(e, ToolCallDelta)} == {
        (0, "get_weather"),
        (1, "get_time"),
    }
    done = finished(events)
    assert done.finish_reason == "tool_calls"
    assert done.tool_calls == [
        ToolCall("call_4Xzl", "get_weather", '{"city":"Paris"}'),
        ToolCall("call_9Qy", "get_time", '{"tz":"CET"}'),
    ]


def test_qwen_name_first_then_arguments_with_id_repeated() -> None:
    body = sse(
        _tools(_call(0, "call_q1", "read_file")),
        _tools(_call(0, "call_q1", None, '{"path": ')),
        _tools(_call(0, "call_q1", None, '"README.md"}')),
        chunk({}, "tool_calls"),
    )
    done = finished(rig([ok_sse(body)]).events())
    assert done.tool_calls == [ToolCall("call_q1", "read_file", '{"path": "README.md"}')]


def test_ollama_parallel_whole_calls_all_with_index_0() -> None:
    body = sse(
        _tools(_call(0, "call_a", "get_weather", '{"city":"Paris"}')),
        _tools(_call(0, "call_b", "get_weather", '{"city":"Tokyo"}')),
        _tools(_call(None, "call_c", "get_time", {"tz": "UTC"})),  # older Ollama: no index
        chunk({}, "tool_calls"),
    )
    events = rig([ok_sse(body)]).events()
    assert [e.index for e in events if isinstance(e, ToolCallDelta)] == [0, 1, 2]
    assert finished(events).tool_calls == [
        ToolCall("call_a", "get_weather", '{"city":"Paris"}'),
        ToolCall("call_b", "get_weather", '{"city":"Tokyo"}'),
        ToolCall("call_c", "get_time", '{"tz": "UTC"}'),
    ]


LONG_ID = "call__0_get_weather_cmpl-1f3a9c2e-5b7d-4e61-9a0c-7d2b8e4f6a10"


def test_llama_cpp_python_repeats_id_and_name_in_every_chunk() -> None:
    parts = ['{"ci', 'ty": "Pa', 'ris"}']
    body = sse(
        *[_tools(_call(0, LONG_ID, "get_weather", p)) for p in parts], chunk({}, "tool_calls")
    )
    done = finished(rig([ok_sse(body)]).events())
    assert done.tool_calls == [ToolCall(LONG_ID, "get_weather", '{"city": "Paris"}')]
    # the follow-up request carries the same short id in both places
    convo = [
        {"role": "user", "content": "weather?"},
        Message("assistant", "", tool_calls=done.tool_calls).to_api(),
        Message("tool", "sunny", tool_call_id=LONG_ID, name="get_weather").to_api(),
    ]
    _, _, body2 = build_request(Cfg(), chat(messages=convo))
    short = body2["messages"][1]["tool_calls"][0]["id"]
    assert len(short) <= 40 and short != LONG_ID
    assert body2["messages"][2]["tool_call_id"] == short


def test_missing_ids_are_synthesised_and_nameless_fragments_dropped() -> None:
    body = sse(
        _tools(_call(0, None, "list_dir", "")),
        _tools(_call(1, None, None, "{}")),
        chunk({}, "tool_calls"),
    )
    calls = finished(rig([ok_sse(body)]).events()).tool_calls
    assert len(calls) == 1 and calls[0].name == "list_dir" and calls[0].arguments == "{}"
    assert calls[0].id.startswith("call_") and len(calls[0].id) > 5


def test_invalid_json_arguments_are_passed_through_unvalidated() -> None:
    body = sse(_tools(_call(0, "c1", "exec", '{"cmd": "ls')), chunk({}, "tool_calls"))
    assert finished(rig([ok_sse(body)]).events()).tool_calls[0].arguments == '{"cmd": "ls'


# ---- broken and odd streams ----


def test_error_object_mid_stream_keeps_the_partial_text() -> None:
    body = sse(
        chunk({"content": "Part"}),
        {"error": {"message": "Upstream overloaded", "type": "server_error", "code": None}},
        done=False,
    )
    seen: list[StreamEvent] = []
    with pytest.raises(StreamError) as info:
        seen.extend(rig([ok_sse(body)]).provider.stream(chat()))
    assert "Upstream overloaded" in str(info.value)
    assert info.value.partial_text == "Part"
    assert texts(seen) == ["Part"]  # shown before the error that came in the same read


def test_vllm_error_object_shape() -> None:
    body = sse(
        {
            "object": "error",
            "message": "This model's maximum context length is 8192 tokens",
            "type": "BadRequestError",
            "code": 400,
        }
    )
    with pytest.raises(ContextLengthError):
        rig([ok_sse(body)]).events()


def test_cut_stream_raises_with_partial_text() -> None:
    body = sse(chunk({"content": "Once upon"}), chunk({"content": " a time"}), done=False)
    r = rig([ok_sse(body)])
    seen: list[str] = []
    with pytest.raises(StreamError) as info:
        for event in r.provider.stream(chat()):
            if isinstance(event, TextDelta):
                seen.append(event.text)
    assert str(info.value) == "the stream ended before the answer finished"
    assert info.value.partial_text == "Once upon a time" == "".join(seen)


def test_broken_connection_after_text_is_not_retried() -> None:
    stream = Chunks(
        [
            sse(chunk({"content": "half"}), done=False),
            httpx.RemoteProtocolError("peer closed connection"),
        ]
    )
    r = rig([httpx.Response(200, headers={"content-type": "text/event-stream"}, stream=stream)])
    with pytest.raises(StreamError) as info:
        r.events()
    assert info.value.partial_text == "half"
    assert "peer closed connection" in str(info.value) and "127.0.0.1:9" in str(info.value)
    assert len(r.requests) == 1 and r.sleeps == [] and stream.closed


def test_read_timeout_mid_stream_is_a_stream_error() -> None:
    stream = Chunks([sse(chunk({"content": "sl"}), done=False), httpx.ReadTimeout("timed out")])
    r = rig([httpx.Response(200, headers={"content-type": "text/event-stream"}, stream=stream)])
    with pytest.raises(StreamError, match="stalled with no data within 120 s") as info:
        r.events()
    assert info.value.partial_text == "sl" and len(r.requests) == 1


@pytest.mark.parametrize(
    "body", [b"data: [DONE]\n\n", b"", b": keep-alive\n\n", sse(chunk({"role": "assistant"}))]
)
def test_empty_stream_is_an_error(body: bytes) -> None:
    with pytest.raises(StreamError, match="without an answer") as info:
        rig([ok_sse(body)]).events()
    assert "stream_tools" in info.value.user_message()


def test_finish_reason_error_is_an_error() -> None:
    body = sse(chunk({"content": "x"}), chunk({}, "error"))
    with pytest.raises(StreamError) as info:
        rig([ok_sse(body)]).events()
    assert info.value.partial_text == "x"


def test_non_json_data_line() -> None:
    body = b"data: : OPENROUTER PROCESSING\n\n" + sse(chunk({"content": "a"}, "stop"))
    assert finished(rig([ok_sse(body)]).events()).content == "a"
    with pytest.raises(StreamError, match="malformed chunk: <html>"):
        rig([ok_sse(b"data: <html>\n\n")]).events()


def test_json_body_to_a_streamed_request_is_a_complete_answer() -> None:
    answer = {
        "id": "c",
        "object": "chat.completion",
        "model": "m1",
        "choices": [
            {
                "index": 0,
                "finish_reason": "stop",
                "message": {"role": "assistant", "content": "Whole answer"},
            }
        ],
        "usage": USAGE,
    }
    r = rig([httpx.Response(200, json=answer)])
    events = r.events()
    assert events[:-1] == [TextDelta("Whole answer")]
    done = finished(events)
    assert (done.content, done.finish_reason, done.model) == ("Whole answer", "stop", "m1")
    assert r.body()["stream"] is True


def test_json_error_body_to_a_streamed_request() -> None:
    body = {"error": {"message": "model 'qwen9' not found, try pulling it first", "code": 404}}
    with pytest.raises(ModelNotFoundError, match="qwen9"):
        rig([httpx.Response(200, json=body)]).events()
    with pytest.raises(StreamError, match="went wrong"):
        rig([httpx.Response(200, json={"error": "something went wrong"})]).events()


# ---- Ctrl-C and early close ----


def test_keyboard_interrupt_while_reading_closes_the_response() -> None:
    stream = Chunks([sse(chunk({"content": "a"}), done=False), KeyboardInterrupt()])
    r = rig([httpx.Response(200, headers={"content-type": "text/event-stream"}, stream=stream)])
    with pytest.raises(KeyboardInterrupt):
        r.events()
    assert stream.closed and r.sleeps == []


def test_closing_the_generator_early_closes_the_response() -> None:
    stream = Chunks([sse(chunk({"content": "a"}), done=False), sse(chunk({"content": "b"}))])
    r = rig([httpx.Response(200, headers={"content-type": "text/event-stream"}, stream=stream)])
    events = r.provider.stream(chat())
    assert next(events) == TextDelta("a")
    assert isinstance(events, Generator)
    events.close()
    assert stream.closed and stream.sent == 1


# ---- statuses and retries ----


def test_429_with_retry_after_sleeps_that_long_then_succeeds() -> None:
    r = rig(
        [
            err(
                429,
                {"error": {"message": "Rate limit reached", "type": "requests"}},
                {"retry-after": "2"},
            ),
            ok_sse(TEXT),
        ]
    )
    assert finished(r.events()).content == "Hello, world"
    assert r.sleeps == [2.0]
    assert r.notices == ["rate limited (429); retrying in 2.0 s (1/2)"]
    assert len(r.requests) == 2


def test_retry_after_ms_is_honoured() -> None:
    r = rig([err(429, {}, {"retry-after-ms": "1500"}), ok_sse(TEXT)])
    r.events()
    assert r.sleeps == [1.5]


def test_retry_after_over_two_minutes_is_not_waited_for() -> None:
    r = rig([err(429, {"error": {"message": "slow down"}}, {"retry-after": "600"})])
    with pytest.raises(RateLimitError) as info:
        r.events()
    assert info.value.retry_after == 600.0 and r.sleeps == [] and len(r.requests) == 1


def test_insufficient_quota_is_not_retried() -> None:
    body = {
        "error": {
            "message": "You exceeded your current quota, please check your plan",
            "type": "insufficient_quota",
            "code": "insufficient_quota",
        }
    }
    r = rig([err(429, body, {"retry-after": "1"})])
    with pytest.raises(QuotaExceededError) as info:
        r.events()
    assert info.value.exit_code == 5
    assert len(r.requests) == 1 and r.sleeps == [] and r.notices == []


def test_500_twice_then_success_with_exponential_backoff() -> None:
    r = rig(
        [err(500, {"error": {"message": "boom"}}), err(503, "Service Unavailable"), ok_sse(TEXT)]
    )
    assert finished(r.events()).content == "Hello, world"
    assert r.sleeps == [0.5, 1.0]  # rand() = 0: no jitter
    assert r.notices == [
        "server error (500); retrying in 0.5 s (1/2)",
        "server error (503); retrying in 1.0 s (2/2)",
    ]


def test_server_errors_exhaust_the_retries() -> None:
    r = rig([err(502, "<html>bad gateway</html>")] * 3)
    with pytest.raises(ServerError) as info:
        r.events()
    assert len(r.requests) == 3 and len(r.sleeps) == 2
    assert "html" not in str(info.value) and "502" in str(info.value)


def test_jitter_shortens_the_backoff_by_up_to_a_quarter() -> None:
    r = rig([err(500), ok_sse(TEXT)])
    r.provider._rand = lambda: 1.0
    r.events()
    assert r.sleeps == [0.375]


def test_connect_error_is_retried_then_raised() -> None:
    refused = httpx.ConnectError("[Errno 111] Connection refused")
    r = rig([refused, refused, refused])
    with pytest.raises(ConnectError) as info:
        r.events()
    assert str(info.value) == "could not connect to http://127.0.0.1:9/v1: connection refused"
    assert len(r.requests) == 3 and r.sleeps == [0.5, 1.0]
    assert r.notices[0] == "could not connect; retrying in 0.5 s (1/2)"


def test_connect_error_then_success() -> None:
    r = rig([httpx.ConnectTimeout("timed out"), ok_sse(TEXT)])
    assert finished(r.events()).content == "Hello, world"


def test_read_timeout_before_the_first_byte_is_retried() -> None:
    r = rig(
        [
            httpx.ReadTimeout("timed out"),
            httpx.ReadTimeout("timed out"),
            httpx.ReadTimeout("timed out"),
        ]
    )
    with pytest.raises(ReadTimeoutError, match="did not answer within 120 s"):
        r.events()
    assert len(r.requests) == 3


def test_break_before_the_first_body_byte_is_retried() -> None:
    broken = Chunks([httpx.ReadError("connection reset")])
    r = rig(
        [
            httpx.Response(200, headers={"content-type": "text/event-stream"}, stream=broken),
            ok_sse(TEXT),
        ]
    )
    assert finished(r.events()).content == "Hello, world"
    assert broken.closed and len(r.requests) == 2


@pytest.mark.parametrize("status", [400, 401, 403, 404, 422])
def test_client_errors_are_not_retried(status: int) -> None:
    r = rig([err(status, {"error": {"message": "The model `gpt-test` does not exist"}})])
    with pytest.raises(ProviderError):
        r.events()
    assert len(r.requests) == 1 and r.sleeps == []


def test_context_length_error_is_not_retried_even_as_a_500() -> None:
    r = rig(
        [err(500, {"error": {"message": "Requested tokens (9000) exceed context window of 8192"}})]
    )
    with pytest.raises(ContextLengthError):
        r.events()
    assert len(r.requests) == 1


def test_max_retries_zero_disables_retries() -> None:
    r = rig([err(503)], Cfg(max_retries=0))
    with pytest.raises(ServerError):
        r.events()
    assert r.sleeps == []


def test_404_names_the_model() -> None:
    body = {
        "error": {
            "message": "The model `gpt-test` does not exist or you do not have access to it.",
            "type": "invalid_request_error",
            "code": "model_not_found",
        }
    }
    with pytest.raises(ModelNotFoundError) as info:
        rig([err(404, body)]).events()
    assert "model 'gpt-test' was not found" in str(info.value)
    assert "countbot models" in info.value.user_message()


def test_auth_error_never_shows_the_key() -> None:
    body = {
        "error": {
            "message": f"Incorrect API key provided: {KEY}. You can find your key at "
            "https://platform.openai.com/account/api-keys."
        }
    }
    with pytest.raises(AuthError) as info:
        rig([err(401, body)]).events()
    assert KEY not in info.value.user_message() and "sk-test" not in info.value.user_message()
    assert info.value.exit_code == 4 and "API key" in info.value.user_message()


# ---- request plumbing ----


def test_request_url_headers_body_and_timeouts() -> None:
    cfg = Cfg(headers={"X-Title": "countbot"})
    r = rig([ok_sse(TEXT)], cfg)
    r.events(chat(temperature=0))
    req = r.requests[0]
    assert str(req.url) == "http://127.0.0.1:9/v1/chat/completions" and req.method == "POST"
    assert req.headers["authorization"] == f"Bearer {KEY}"
    assert req.headers["accept"] == "text/event-stream"
    assert req.headers["x-title"] == "countbot"
    assert req.extensions["timeout"] == {
        "connect": 10.0,
        "read": 120.0,
        "write": 120.0,
        "pool": 10.0,
    }
    assert r.body() == {
        "model": "gpt-test",
        "messages": [{"role": "user", "content": "hi"}],
        "temperature": 0,
        "stream": True,
        "stream_options": {"include_usage": True},
    }


def test_stream_tools_false_sends_a_non_streamed_request() -> None:
    answer = {
        "model": "m",
        "choices": [
            {
                "index": 0,
                "finish_reason": "tool_calls",
                "message": {
                    "role": "assistant",
                    "content": None,
                    "tool_calls": [
                        {
                            "id": "t1",
                            "type": "function",
                            "function": {"name": "read_file", "arguments": '{"path":"a"}'},
                        },
                        {
                            "type": "function",
                            "function": {"name": "read_file", "arguments": '{"path":"b"}'},
                        },
                    ],
                },
            }
        ],
    }
    tools = [{"type": "function", "function": {"name": "read_file", "parameters": {}}}]
    r = rig([httpx.Response(200, json=answer)], Cfg(stream_tools=False))
    events = r.events(chat(tools=tools))
    body = r.body()
    assert body["stream"] is False and "stream_options" not in body and body["tools"] == tools
    assert r.requests[0].headers["accept"] == "application/json"
    calls = finished(events).tool_calls
    assert [(c.name, c.arguments) for c in calls] == [
        ("read_file", '{"path":"a"}'),
        ("read_file", '{"path":"b"}'),
    ]
    assert calls[0].id == "t1" and calls[1].id.startswith("call_")
    assert [e for e in events if isinstance(e, ToolCallDelta)] == [
        ToolCallDelta(0, "read_file"),
        ToolCallDelta(1, "read_file"),
    ]


def test_stream_tools_false_without_tools_still_streams() -> None:
    r = rig([ok_sse(TEXT)], Cfg(stream_tools=False))
    r.events()
    assert r.body()["stream"] is True


def test_complete_is_non_streamed() -> None:
    answer = {
        "model": "m",
        "usage": USAGE,
        "choices": [
            {
                "index": 0,
                "finish_reason": "stop",
                "message": {"role": "assistant", "content": "done", "reasoning_content": "hm"},
            }
        ],
    }
    r = rig([httpx.Response(200, json=answer)])
    result = r.provider.complete(chat())
    assert (result.content, result.reasoning, result.finish_reason) == ("done", "hm", "stop")
    assert r.body()["stream"] is False


def test_complete_rejects_a_body_that_is_not_json() -> None:
    r = rig([httpx.Response(200, headers={"content-type": "application/json"}, content=b"oops")])
    with pytest.raises(ProviderError, match="not JSON: oops"):
        r.provider.complete(chat())


def test_list_models() -> None:
    models = {"object": "list", "data": [{"id": "qwen"}, {"id": "llama"}, {"id": "qwen"}]}
    r = rig([httpx.Response(200, json=models)])
    assert r.provider.list_models() == ["llama", "qwen"]
    req = r.requests[0]
    assert (req.method, str(req.url)) == ("GET", "http://127.0.0.1:9/v1/models")
    assert req.headers["authorization"] == f"Bearer {KEY}"


def test_list_models_404_points_at_api_base() -> None:
    with pytest.raises(ProviderError, match="does not list models") as info:
        rig([err(404, {"detail": "Not Found"})]).provider.list_models()
    assert not isinstance(info.value, ModelNotFoundError)


def test_no_authorization_header_without_a_key() -> None:
    r = rig([ok_sse(TEXT)], Cfg(api_key=None))
    r.events()
    assert "authorization" not in r.requests[0].headers


def test_lazy_client_for_http_base_and_close() -> None:
    provider = OpenAICompatProvider(Cfg())
    assert provider._client is None  # nothing made until the first request
    client = provider._http()
    assert isinstance(client, httpx.Client) and provider._http() is client
    provider.close()
    assert client.is_closed and provider._client is None


def test_injected_client_is_not_closed() -> None:
    r = rig([])
    r.provider.close()
    assert r.provider._client is not None and not r.provider._client.is_closed


def test_make_provider() -> None:
    provider = make_provider(Cfg(), httpx.Client(transport=httpx.MockTransport(lambda r: err(500))))
    assert isinstance(provider, OpenAICompatProvider)
    assert (provider.name, provider.model) == ("test", "gpt-test")
    with pytest.raises(ConfigError, match="unknown provider type 'grpc'"):
        make_provider(Cfg(type="grpc"))


def test_importing_the_provider_package_does_not_import_httpx() -> None:
    code = (
        "import countbot_cli.provider, countbot_cli.provider.openai_compat, sys; "
        "assert 'httpx' not in sys.modules, 'httpx imported'"
    )
    subprocess.run([sys.executable, "-c", code], check=True)


def test_the_callers_request_is_not_changed() -> None:
    req = chat(tools=[{"type": "function", "function": {"name": "x"}}])
    r = rig(
        [
            httpx.Response(
                200, json={"choices": [{"message": {"content": "y"}, "finish_reason": "stop"}]}
            )
        ],
        Cfg(stream_tools=False),
    )
    r.events(req)
    assert req.stream is True and r.body()["stream"] is False


# ---- a real loopback server (no MockTransport): the lazily made client ----


class _SSEHandler(BaseHTTPRequestHandler):
    def do_POST(self) -> None:  # noqa: N802 (http.server's naming)
        self.rfile.read(int(self.headers["Content-Length"]))
        self.send_response(200)
        self.send_header("Content-Type", "text/event-stream")
        self.end_headers()
        for piece in (TEXT[:10], TEXT[10:50], TEXT[50:]):
            self.wfile.write(piece)
            self.wfile.flush()

    def log_message(self, format: str, *args: Any) -> None:
        pass


def test_real_loopback_stream_and_refused_port() -> None:
    server = ThreadingHTTPServer(("127.0.0.1", 0), _SSEHandler)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        base = f"http://127.0.0.1:{server.server_address[1]}/v1"
        provider = OpenAICompatProvider(Cfg(api_base=base))
        try:
            assert finished(list(provider.stream(chat()))).content == "Hello, world"
        finally:
            provider.close()
    finally:
        server.shutdown()
        server.server_close()
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    sleeps: list[float] = []
    refused = OpenAICompatProvider(Cfg(api_base=f"http://127.0.0.1:{port}/v1"), sleep=sleeps.append)
    with pytest.raises(ConnectError, match=f"could not connect to http://127.0.0.1:{port}/v1"):
        list(refused.stream(chat()))
    refused.close()
    assert len(sleeps) == 2
