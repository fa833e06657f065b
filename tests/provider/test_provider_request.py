"""Pure parts of the provider: request bodies, status -> error mapping, transport errors."""

from __future__ import annotations

import json
from email.utils import formatdate
from functools import partial

import httpx
import pytest
from cbenv import provider_settings

from countbot_cli.errors import (
    AuthError,
    ConnectError,
    ContextLengthError,
    ModelNotFoundError,
    ProviderError,
    QuotaExceededError,
    RateLimitError,
    ReadTimeoutError,
    ServerError,
    StreamError,
    TransientError,
)
from countbot_cli.messages import ChatRequest, Message, ToolCall
from countbot_cli.provider.openai_compat import (
    build_request,
    error_from_exception,
    error_from_response,
    parse_retry_after,
    short_tool_call_id,
)

KEY = "sk-proj-AbCdEf0123456789"


Cfg = partial(
    provider_settings,
    name="t",
    api_base="https://api.example.com/v1/",
    api_key=KEY,
    model="cfg-model",
)


TOOL = {"type": "function", "function": {"name": "read_file", "parameters": {"type": "object"}}}


def test_streamed_body_exact() -> None:
    url, headers, body = build_request(
        Cfg(),
        ChatRequest(
            model="m",
            messages=[{"role": "user", "content": "hi"}],
            tools=[TOOL],
            temperature=0.0,
            max_tokens=64,
            tool_choice="auto",
        ),
    )
    assert url == "https://api.example.com/v1/chat/completions"
    assert headers == {
        "Accept": "text/event-stream",
        "Content-Type": "application/json",
        "Authorization": f"Bearer {KEY}",
    }
    assert body == {
        "model": "m",
        "messages": [{"role": "user", "content": "hi"}],
        "tools": [TOOL],
        "tool_choice": "auto",
        "temperature": 0.0,
        "max_tokens": 64,
        "stream": True,
        "stream_options": {"include_usage": True},
    }


def test_empty_tools_none_values_and_no_usage_option() -> None:
    cfg = Cfg(include_usage=False, api_key="")
    _, headers, body = build_request(
        cfg, ChatRequest(model="", messages=[], tools=[], tool_choice="auto")
    )
    assert body == {"model": "cfg-model", "messages": [], "stream": True}
    assert "Authorization" not in headers


def test_tool_choice_auto_only_for_servers_without_streamed_tools() -> None:
    req = ChatRequest(
        model="m", messages=[{"role": "user", "content": "hi"}], tools=[TOOL], stream=False
    )
    assert "tool_choice" not in build_request(Cfg(), req)[2]
    assert build_request(Cfg(stream_tools=False), req)[2]["tool_choice"] == "auto"
    forced = {"type": "function", "function": {"name": "read_file"}}
    req.tool_choice = forced
    assert build_request(Cfg(stream_tools=False), req)[2]["tool_choice"] == forced
    no_tools = ChatRequest(model="m", messages=[{"role": "user", "content": "hi"}], stream=False)
    assert "tool_choice" not in build_request(Cfg(stream_tools=False), no_tools)[2]


def test_non_streamed_body_and_headers_override() -> None:
    cfg = Cfg(headers={"authorization": "Bearer other", "api-key": "azure"})
    _, headers, body = build_request(cfg, ChatRequest(model="m", messages=[], stream=False))
    assert body == {"model": "m", "messages": [], "stream": False}
    assert headers == {
        "Accept": "application/json",
        "Content-Type": "application/json",
        "authorization": "Bearer other",
        "api-key": "azure",
    }


def test_tool_call_messages_content_and_ids() -> None:
    long_id = "call_" + "x" * 60
    calls = [ToolCall(long_id, "read_file", '{"path":"a"}'), ToolCall("call_ok", "ls", "{}")]
    messages = [
        {"role": "assistant", "content": None, "tool_calls": [c.to_api() for c in calls]},
        Message("tool", "data", tool_call_id=long_id, name="read_file").to_api(),
        Message("tool", "files", tool_call_id="call_ok", name="ls").to_api(),
        {"role": "assistant", "content": "plain", "tool_calls": []},
    ]
    original = json.dumps(messages)
    _, _, body = build_request(Cfg(), ChatRequest(model="m", messages=messages))
    sent = body["messages"]
    short = short_tool_call_id(long_id)
    assert short.startswith("call_") and len(short) <= 40 and short == short_tool_call_id(long_id)
    assert sent[0] == {
        "role": "assistant",
        "content": "",
        "tool_calls": [
            {
                "id": short,
                "type": "function",
                "function": {"name": "read_file", "arguments": '{"path":"a"}'},
            },
            {"id": "call_ok", "type": "function", "function": {"name": "ls", "arguments": "{}"}},
        ],
    }
    assert sent[1] == {
        "role": "tool",
        "content": "data",
        "tool_call_id": short,
        "name": "read_file",
    }
    assert sent[2]["tool_call_id"] == "call_ok"
    assert sent[3] == {"role": "assistant", "content": "plain"}
    assert json.dumps(messages) == original  # the caller's dicts are not modified


def test_short_ids_differ_for_different_long_ids() -> None:
    a, b = "call_" + "a" * 50, "call_" + "b" * 50
    assert short_tool_call_id(a) != short_tool_call_id(b)
    assert short_tool_call_id("x" * 40) == "x" * 40


# ---- status mapping ----


def _oa(message: str, code: str | None = None, type_: str = "invalid_request_error") -> str:
    return json.dumps({"error": {"message": message, "type": type_, "param": None, "code": code}})


@pytest.mark.parametrize(
    ("status", "body", "cls", "needle"),
    [
        (401, _oa("Invalid token"), AuthError, "authentication failed (401): Invalid token"),
        (403, _oa("Country not supported"), AuthError, "permission denied (403)"),
        (
            404,
            _oa("The model `m` does not exist", "model_not_found"),
            ModelNotFoundError,
            "model 'gpt-x' was not found (404)",
        ),
        (404, '{"detail":"Not Found"}', ModelNotFoundError, "not found (404): Not Found"),
        (
            400,
            _oa(
                "This model's maximum context length is 128000 tokens. However, your "
                "messages resulted in 130000 tokens.",
                "context_length_exceeded",
            ),
            ContextLengthError,
            "too long for the model (400)",
        ),
        (
            400,
            _oa(
                "This model's maximum context length is 131072 tokens. However, you "
                "requested 140000 tokens",
                "invalid_request_error",
            ),
            ContextLengthError,
            "131072",
        ),  # DeepSeek: generic code, telling message
        (
            429,
            _oa("Rate limit reached for requests", "rate_limit_exceeded", "requests"),
            RateLimitError,
            "rate limited (429): Rate limit reached",
        ),
        (
            429,
            _oa("You exceeded your current quota", "insufficient_quota", "insufficient_quota"),
            QuotaExceededError,
            "out of quota",
        ),
        (402, '{"error":{"message":"Insufficient Balance"}}', QuotaExceededError, "Balance"),
        (
            500,
            _oa("The server had an error", None, "server_error"),
            ServerError,
            "server error (500): The server had an error",
        ),
        (503, "upstream connect error", ServerError, "(503): upstream connect error"),
        (502, "<html><body>Bad Gateway</body></html>", ServerError, "(502): HTTP 502"),
        (408, "", TransientError, "(408)"),
        (
            422,
            json.dumps(
                {
                    "detail": [
                        {
                            "loc": ["body", "messages", 2, "content"],
                            "msg": "none is not an allowed value",
                        }
                    ]
                }
            ),
            ProviderError,
            "body.messages.2.content: none is not an allowed value",
        ),
        (
            400,
            '{"object":"error","message":"bad tool schema","type":"BadRequestError"}',
            ProviderError,
            "rejected the request (400): bad tool schema",
        ),
    ],
)
def test_error_from_response(status: int, body: str, cls: type, needle: str) -> None:
    err = error_from_response(status, body, {}, model="gpt-x")
    assert type(err) is cls
    assert needle in str(err)
    assert err.status == status
    assert "\n" not in err.user_message()


def test_retryable_flags() -> None:
    assert error_from_response(429, "", {}).retryable
    assert error_from_response(503, "", {}).retryable
    assert error_from_response(409, "", {}).retryable
    assert not error_from_response(429, _oa("x", "insufficient_quota"), {}).retryable
    for status in (400, 401, 403, 404, 422):
        assert not error_from_response(status, "", {}).retryable


def test_messages_are_one_line_trimmed_and_never_show_a_key() -> None:
    body = _oa(f"line one\nline two {KEY} " + "z" * 500)
    err = error_from_response(400, body, {}, api_key=KEY)
    text = err.user_message()
    assert "\n" not in text and KEY not in text and "line one line two" in text
    assert len(str(err)) < 360
    # an unknown key-like token is masked too
    err = error_from_response(401, _oa("Incorrect API key provided: sk-abc123***xyz9."), {})
    assert "abc123" not in str(err)


def test_404_hint_depends_on_the_body() -> None:
    with_model = error_from_response(404, _oa("model 'llama9' not found"), {}, model="llama9")
    assert with_model.hint == "run `countbot models` to list available models"
    without = error_from_response(404, "", {})
    assert without.hint is not None and "/v1" in without.hint


def test_parse_retry_after() -> None:
    assert parse_retry_after({"Retry-After": "3"}) == 3.0
    assert parse_retry_after({"retry-after-ms": "250", "retry-after": "9"}) == 0.25
    assert parse_retry_after({"retry-after": "soon"}) is None
    assert parse_retry_after({}) is None
    now = 1_800_000_000.0
    assert parse_retry_after({"retry-after": formatdate(now + 30, usegmt=True)}, now=now) == 30.0
    assert parse_retry_after({"retry-after": formatdate(now - 30, usegmt=True)}, now=now) == 0.0
    err = error_from_response(429, "", {"retry-after": "7"})
    assert err.retry_after == 7.0


# ---- transport errors ----

BASE = "http://user:pw@127.0.0.1:1234/v1/"


@pytest.mark.parametrize(
    ("exc", "started", "cls", "message"),
    [
        (
            httpx.ConnectError("[Errno 111] Connection refused"),
            False,
            ConnectError,
            "could not connect to http://127.0.0.1:1234/v1: connection refused",
        ),
        (
            httpx.ConnectTimeout("timed out"),
            False,
            ConnectError,
            "could not connect to http://127.0.0.1:1234/v1: connection timed out",
        ),
        (
            httpx.ReadTimeout("timed out"),
            False,
            ReadTimeoutError,
            "timed out: http://127.0.0.1:1234/v1 did not answer within 30 s",
        ),
        (
            httpx.ReadTimeout("timed out"),
            True,
            StreamError,
            "timed out: the stream from http://127.0.0.1:1234/v1 stalled with no data within 30 s",
        ),
        (
            httpx.RemoteProtocolError("Server disconnected without sending a response."),
            False,
            ConnectError,
            "failed before an answer arrived: Server disconnected",
        ),
        (
            httpx.ReadError("Connection reset by peer"),
            True,
            StreamError,
            "broke during the answer: Connection reset by peer",
        ),
        (
            httpx.UnsupportedProtocol("Request URL is missing a scheme"),
            False,
            ProviderError,
            "cannot use api_base",
        ),
    ],
)
def test_error_from_exception(exc: Exception, started: bool, cls: type, message: str) -> None:
    err = error_from_exception(exc, BASE, started=started, read_timeout=30)
    assert type(err) is cls
    assert message in str(err)
    assert "pw" not in str(err)
