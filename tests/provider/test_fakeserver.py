"""The scriptable OpenAI-compatible test server, driven over real loopback HTTP with httpx."""

from __future__ import annotations

import json
import select
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest
from fakeserver import (
    EMPTY_QUEUE_MESSAGE,
    FakeServer,
    Reply,
    cut,
    empty_stream,
    error_mid_stream,
    hang,
    json_to_stream,
    openai_error,
    prompt_tokens_at_least,
    reply_from_spec,
    status,
    text,
    tool_calls,
)
from waits import returns_within

from countbot_cli.conversation.tokens import DEFAULT_LOADER

STREAM = {"model": "test-model", "messages": [{"role": "user", "content": "hi"}], "stream": True}
PLAIN = {"model": "test-model", "messages": [{"role": "user", "content": "hi"}]}
USAGE = {"prompt_tokens": 7, "completion_tokens": 3, "total_tokens": 10}
FAKESERVER = Path(__file__).resolve().parents[1] / "helpers" / "fakeserver.py"


@pytest.fixture
def client(server: FakeServer) -> Iterator[httpx.Client]:
    with httpx.Client(base_url=server.base_url, timeout=5.0) as c:
        yield c


def events(raw: str) -> list[Any]:
    """SSE data payloads of a body: JSON objects, or the raw string for [DONE]."""
    out: list[Any] = []
    for block in raw.replace("\r\n", "\n").split("\n\n"):
        data = [ln[6:] for ln in block.split("\n") if ln.startswith("data: ")]
        if data:
            out.append(data[0] if data[0] == "[DONE]" else json.loads(data[0]))
    return out


def deltas(evs: list[Any]) -> list[dict[str, Any]]:
    return [e["choices"][0]["delta"] for e in evs if isinstance(e, dict) and e.get("choices")]


def tool_entries(evs: list[Any]) -> list[dict[str, Any]]:
    return [tc for d in deltas(evs) for tc in d.get("tool_calls", [])]


def chat(client: httpx.Client, reply: Reply, fake: FakeServer, body: Any = None) -> httpx.Response:
    fake.add(reply)
    return client.post("/chat/completions", json=STREAM if body is None else body)


# ---------------------------------------------------------------- text


def test_text_stream_wire_shape(client: httpx.Client, server: FakeServer) -> None:
    r = chat(client, text("Hello world!", usage=USAGE), server)
    assert r.status_code == 200
    assert r.headers["content-type"].startswith("text/event-stream")
    assert r.headers["transfer-encoding"] == "chunked"
    assert r.text.endswith("data: [DONE]\n\n") and "\r" not in r.text
    evs = events(r.text)
    ds = deltas(evs)
    assert ds[0] == {"role": "assistant", "content": ""}
    assert [d["content"] for d in ds[1:-1]] == ["Hello", " worl", "d!"]
    assert evs[-3]["choices"][0] == {
        "index": 0,
        "delta": {},
        "logprobs": None,
        "finish_reason": "stop",
    }
    assert evs[-2]["choices"] == [] and evs[-2]["usage"] == USAGE
    assert all(e["usage"] is None for e in evs[:-2])
    assert {e["object"] for e in evs[:-1]} == {"chat.completion.chunk"}
    assert len({e["id"] for e in evs[:-1]}) == 1
    assert '"object":"chat.completion.chunk"' in r.text  # compact JSON, like OpenAI


def test_text_reasoning_streams_first(client: httpx.Client, server: FakeServer) -> None:
    r = chat(client, text("Yes.", reasoning="Let me think", chunk_size=4), server)
    ds = deltas(events(r.text))
    assert [d.get("reasoning_content") for d in ds[1:4]] == ["Let ", "me t", "hink"]
    assert ds[4] == {"content": "Yes."}
    r = chat(client, text("ok", reasoning="hm", reasoning_field="reasoning"), server)
    assert deltas(events(r.text))[1] == {"reasoning": "hm"}


def test_text_options_without_usage_or_done(client: httpx.Client, server: FakeServer) -> None:
    r = chat(client, text("abc", done=False, finish_reason="length", model="m2"), server)
    evs = events(r.text)
    assert "[DONE]" not in evs and "usage" not in evs[0]
    assert evs[-1]["choices"][0]["finish_reason"] == "length"
    assert {e["model"] for e in evs} == {"m2"}


def test_text_crlf_and_keepalive(client: httpx.Client, server: FakeServer) -> None:
    r = chat(client, text("abcdefgh", crlf=True, keepalive=True), server)
    assert "\n" not in r.text.replace("\r\n", "")
    assert r.text.startswith(": keep-alive\r\n\r\ndata: ")
    assert r.text.count(": keep-alive\r\n\r\n") == len(events(r.text)) == 5
    assert "".join(d.get("content", "") for d in deltas(events(r.text))) == "abcdefgh"


def test_periodic_keepalive_beats_a_short_read_timeout(server: FakeServer) -> None:
    server.add(text("late", first_delay=0.7, keepalive=0.1))
    timeout = httpx.Timeout(5.0, read=0.35)
    with httpx.Client(base_url=server.base_url, timeout=timeout) as c:
        r = c.post("/chat/completions", json=STREAM)
    assert r.text.count(": keep-alive") >= 5
    assert "".join(d.get("content", "") for d in deltas(events(r.text))) == "late"


def test_text_non_stream_is_one_completion(client: httpx.Client, server: FakeServer) -> None:
    reply = text("Hello world!", usage=USAGE, reasoning="hmm")
    for body in (PLAIN, {**PLAIN, "stream": False}):
        r = chat(client, reply, server, body)
        assert r.headers["content-type"] == "application/json"
        got = r.json()
        assert got["object"] == "chat.completion" and got["usage"] == USAGE
        choice = got["choices"][0]
        assert choice["finish_reason"] == "stop"
        assert choice["message"]["role"] == "assistant"
        assert choice["message"]["content"] == "Hello world!"
        assert choice["message"]["reasoning_content"] == "hmm"
        assert "tool_calls" not in choice["message"]


def test_delays_really_space_the_chunks(client: httpx.Client, server: FakeServer) -> None:
    """Each chunk leaves the server first_delay + k * delay after the request at the earliest,
    so the client cannot have it sooner: lower bounds only, which a loaded machine can only
    make later (an upper bound on arrival would be a timing assertion)."""
    server.add(text("abcdef", chunk_size=3, delay=0.12, first_delay=0.3))
    start = time.monotonic()
    arrivals: list[float] = []
    with client.stream("POST", "/chat/completions", json=STREAM) as r:
        for line in r.iter_lines():
            if line.startswith("data: "):
                arrivals.append(time.monotonic() - start)
    assert len(arrivals) == 5
    earliest = [0.3 + k * 0.12 - 0.01 for k in range(5)]  # 10 ms for the clocks' granularity
    assert all(at >= low for at, low in zip(arrivals, earliest, strict=True)), arrivals


# ---------------------------------------------------------------- tool calls

CALLS = [("get_weather", '{"city":"Paris","unit":"c"}'), ("list_dir", '{"path":"."}')]


def joined_args(entries: list[dict[str, Any]], key: str = "index") -> dict[Any, str]:
    out: dict[Any, str] = {}
    for e in entries:
        out[e[key]] = out.get(e[key], "") + e["function"].get("arguments", "")
    return out


def test_tool_calls_openai_shape(client: httpx.Client, server: FakeServer) -> None:
    reply = tool_calls(CALLS, usage=USAGE)
    evs = events(chat(client, reply, server).text)
    ds = deltas(evs)
    assert ds[0]["role"] == "assistant" and ds[0]["content"] is None
    entries = tool_entries(evs)
    heads = [e for e in entries if "id" in e]
    assert heads == [
        {
            "index": i,
            "id": reply.ids[i],
            "type": "function",
            "function": {"name": CALLS[i][0], "arguments": ""},
        }
        for i in (0, 1)
    ]
    rest = [e for e in entries if "id" not in e]
    assert all(
        set(e) == {"index", "function"} and set(e["function"]) == {"arguments"} for e in rest
    )
    assert joined_args(entries) == {0: CALLS[0][1], 1: CALLS[1][1]}
    assert entries.index(heads[1]) > entries.index(rest[0])  # index 1 starts after index 0
    assert evs[-3]["choices"][0]["finish_reason"] == "tool_calls"
    assert evs[-2]["usage"] == USAGE and evs[-1] == "[DONE]"
    assert all(len(i) <= 40 for i in reply.ids) and len(set(reply.ids)) == 2


def test_tool_calls_qwen_shape(client: httpx.Client, server: FakeServer) -> None:
    reply = tool_calls(CALLS, shape="qwen")
    entries = tool_entries(events(chat(client, reply, server).text))
    assert all(e["id"] == reply.ids[e["index"]] for e in entries)  # id on every chunk
    named = [e for e in entries if "name" in e["function"]]
    assert [e["function"] for e in named] == [{"name": "get_weather"}, {"name": "list_dir"}]
    assert all("name" not in e["function"] for e in entries if e not in named)
    assert joined_args(entries) == {0: CALLS[0][1], 1: CALLS[1][1]}


def test_tool_calls_ollama_shape(client: httpx.Client, server: FakeServer) -> None:
    reply = tool_calls(CALLS, shape="ollama")
    evs = events(chat(client, reply, server).text)
    entries = tool_entries(evs)
    assert [e["index"] for e in entries] == [0, 0]  # every parallel call says index 0
    assert [e["id"] for e in entries] == reply.ids and reply.ids[0] != reply.ids[1]
    assert [(e["function"]["name"], e["function"]["arguments"]) for e in entries] == CALLS
    assert sum(1 for d in deltas(evs) if "tool_calls" in d) == 2  # each call whole in one chunk


def test_tool_calls_llamacpp_shape(client: httpx.Client, server: FakeServer) -> None:
    reply = tool_calls(CALLS, shape="llamacpp")
    entries = tool_entries(events(chat(client, reply, server).text))
    assert len(entries) > 4
    for e in entries:
        assert e["id"] == reply.ids[e["index"]] and len(e["id"]) > 40
        assert e["function"]["name"] == CALLS[e["index"]][0] and e["type"] == "function"
    assert joined_args(entries) == {0: CALLS[0][1], 1: CALLS[1][1]}


def test_tool_calls_after_content_and_custom_ids(client: httpx.Client, server: FakeServer) -> None:
    reply = tool_calls([("f", {"a": 1})], content="Let me look.", ids=["call_x"])
    ds = deltas(events(chat(client, reply, server).text))
    assert ds[0] == {"role": "assistant", "content": ""}
    assert "".join(d.get("content") or "" for d in ds) == "Let me look."
    first_tool = next(i for i, d in enumerate(ds) if "tool_calls" in d)
    assert all("content" not in d for d in ds[first_tool:])
    assert ds[first_tool]["tool_calls"][0]["id"] == "call_x"
    assert joined_args([tc for d in ds for tc in d.get("tool_calls", [])]) == {0: '{"a":1}'}


def test_tool_calls_non_stream(client: httpx.Client, server: FakeServer) -> None:
    reply = tool_calls(CALLS, shape="qwen", usage=USAGE)
    got = chat(client, reply, server, PLAIN).json()
    choice = got["choices"][0]
    assert choice["finish_reason"] == "tool_calls" and got["usage"] == USAGE
    assert choice["message"]["content"] is None
    assert choice["message"]["tool_calls"] == [
        {"id": reply.ids[i], "type": "function", "function": {"name": n, "arguments": a}}
        for i, (n, a) in enumerate(CALLS)
    ]


def test_tool_calls_rejects_bad_arguments() -> None:
    with pytest.raises(ValueError, match="shape"):
        tool_calls(CALLS, shape="anthropic")  # type: ignore[arg-type]
    with pytest.raises(ValueError, match="ids"):
        tool_calls(CALLS, ids=["only-one"])


# ---------------------------------------------------------------- status and odd answers


def test_status_any_code_and_headers(client: httpx.Client, server: FakeServer) -> None:
    quota = openai_error(
        "You exceeded your current quota", "insufficient_quota", "insufficient_quota"
    )
    r = chat(client, status(429, quota, {"retry-after": "2", "x-request-id": "req_1"}), server)
    assert r.status_code == 429 and r.headers["retry-after"] == "2"
    assert r.headers["x-request-id"] == "req_1" and r.json() == quota
    r = chat(client, status(404, "no such model"), server)
    assert r.status_code == 404 and r.text == "no such model"
    assert r.headers["content-type"].startswith("text/plain")
    r = chat(client, status(401), server, PLAIN)
    assert r.status_code == 401 and r.json()["error"]["message"] == "fakeserver: HTTP 401"
    r = chat(client, status(503), server)
    assert r.json()["error"]["type"] == "server_error"


def test_error_mid_stream(client: httpx.Client, server: FakeServer) -> None:
    err = {"message": "overloaded", "type": "server_error", "code": "overloaded"}
    evs = events(chat(client, error_mid_stream("partial answer", err), server).text)
    assert "".join(d.get("content", "") for d in deltas(evs)) == "partial answer"
    assert evs[-2] == {"error": err} and evs[-1] == "[DONE]"
    assert not any(e["choices"][0]["finish_reason"] for e in evs[:-2])
    r = chat(client, error_mid_stream("x", err), server, PLAIN)
    assert r.status_code == 500 and r.json() == {"error": err}


def test_cut_mid_answer(client: httpx.Client, server: FakeServer) -> None:
    server.add(cut("abcdefghij", after_chunks=1))
    lines: list[str] = []
    with (
        pytest.raises(httpx.RemoteProtocolError, match="incomplete chunked read"),
        client.stream("POST", "/chat/completions", json=STREAM) as r,
    ):
        lines.extend(r.iter_lines())
    ds = deltas(events("\n".join(lines) + "\n"))
    assert ds == [{"role": "assistant", "content": ""}, {"content": "abcde"}]
    assert "[DONE]" not in lines
    r = chat(client, text("next"), server)  # the server is fine afterwards
    assert r.status_code == 200


def test_cut_of_a_non_streamed_answer(client: httpx.Client, server: FakeServer) -> None:
    with pytest.raises(httpx.RemoteProtocolError):
        chat(client, cut("some answer"), server, PLAIN)


def test_json_to_stream(client: httpx.Client, server: FakeServer) -> None:
    r = chat(client, json_to_stream("whole answer", usage=USAGE), server)
    assert r.headers["content-type"] == "application/json"
    got = r.json()
    assert got["object"] == "chat.completion" and got["usage"] == USAGE
    assert got["choices"][0]["message"]["content"] == "whole answer"


def test_empty_stream(client: httpx.Client, server: FakeServer) -> None:
    r = chat(client, empty_stream(), server)
    assert r.status_code == 200 and r.headers["content-type"].startswith("text/event-stream")
    assert r.content == b"data: [DONE]\n\n"


def test_hang_times_out_the_client_and_not_the_shutdown() -> None:
    server = FakeServer(hang(30)).start()
    timeout = httpx.Timeout(5.0, read=0.3)
    with (
        httpx.Client(base_url=server.base_url, timeout=timeout) as c,
        c.stream("POST", "/chat/completions", json=STREAM) as r,
    ):
        assert r.status_code == 200  # headers came at once
        with pytest.raises(httpx.ReadTimeout):
            r.read()
    assert server.wait_disconnects(1, timeout=2.0)
    server.add(hang(30, after_text="partial"), hang(30, send_headers=False))
    with httpx.Client(base_url=server.base_url, timeout=timeout) as c:
        lines: list[str] = []
        with (
            pytest.raises(httpx.ReadTimeout),
            c.stream("POST", "/chat/completions", json=STREAM) as r,
        ):
            lines.extend(r.iter_lines())
        assert "".join(d.get("content", "") for d in deltas(events("\n".join(lines)))) == "partial"
        with pytest.raises(httpx.ReadTimeout):
            c.post("/chat/completions", json=STREAM)
    server.add(hang(30))
    c = httpx.Client(base_url=server.base_url, timeout=5.0)
    resp = c.send(c.build_request("POST", "/chat/completions", json=STREAM), stream=True)
    returns_within(server.stop, "stop with a handler asleep in a 30 s hang")
    resp.close()
    c.close()


# ---------------------------------------------------------------- queue, recording, routes


def test_queue_order_then_loud_failure(client: httpx.Client, server: FakeServer) -> None:
    server.add(text("one"), text("two"))
    assert server.pending == 2
    got = [client.post("/chat/completions", json=PLAIN).json() for _ in range(2)]
    assert [g["choices"][0]["message"]["content"] for g in got] == ["one", "two"]
    r = client.post("/chat/completions", json=STREAM)
    assert r.status_code == 500 and r.json()["error"]["message"] == EMPTY_QUEUE_MESSAGE


def test_default_and_responder(client: httpx.Client, server: FakeServer) -> None:
    def responder(body: dict[str, Any]) -> Reply | None:
        last = body["messages"][-1]["content"]
        if last == "boom":
            raise RuntimeError("scripted failure")
        return text("SUMMARY") if "Summarize" in last else None

    server.responder = responder
    server.default = text("ANSWER")
    server.add(text("QUEUED"))
    asks = ["Summarize this", "Summarize this", "hello", "hello"]
    answers = [
        client.post(
            "/chat/completions", json={"messages": [{"role": "user", "content": a}]}
        ).json()["choices"][0]["message"]["content"]
        for a in asks
    ]
    assert answers == ["QUEUED", "SUMMARY", "ANSWER", "ANSWER"]
    r = client.post("/chat/completions", json={"messages": [{"role": "user", "content": "boom"}]})
    assert r.status_code == 500 and "scripted failure" in r.json()["error"]["message"]
    assert isinstance(server.errors[0], RuntimeError)


def test_a_prompt_over_the_context_window_is_refused(
    client: httpx.Client, server: FakeServer
) -> None:
    server.context_window = 40
    server.add(text("fits"))
    over = {"messages": [{"role": "user", "content": "alpha " * 40}]}  # 40 words + its role
    r = client.post("/chat/completions", json=over)
    assert r.status_code == 400
    error = r.json()["error"]
    assert error["code"] == "context_length_exceeded"
    assert error["message"].startswith("This model's maximum context length is 40 tokens.")
    assert server.refused == [41] and server.pending == 1  # no scripted reply was taken
    fits = {"messages": [{"role": "user", "content": "alpha " * 39}]}
    assert client.post("/chat/completions", json=fits).status_code == 200
    assert server.refused == [41]


@pytest.mark.parametrize("encoding", ["cl100k_base", "o200k_base"])
@pytest.mark.parametrize(
    "content",
    [
        "The quick brown fox, 12345 times: don't stop!",
        '{"path":"src/main.py","start_line":120,"content":"def f(x):\\n    return x**2"}',
        "数据库端口是 5432，用户名 admin；Ünïcödé wörds and emoji 🎉 too",
        "aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa 1234567890123 ........",
        "camelCaseIdentifier snake_case_name HTTPServer2Client v1.2.3-rc4",
    ],
)
def test_the_prompt_count_is_a_lower_bound_of_real_tokenizers(encoding: str, content: str) -> None:
    """Each run of letters or digits is at least one token: the bound never exceeds a real
    count (the message's own one token, its role, aside)."""
    enc = DEFAULT_LOADER.load(encoding)
    assert enc is not None
    body = {"messages": [{"role": "tool", "content": content, "name": "read_file"}]}
    tokens = len(enc.encode_ordinary(content)) + len(enc.encode_ordinary("read_file"))
    assert prompt_tokens_at_least(body) - 1 <= tokens


def test_records_every_request(client: httpx.Client, server: FakeServer) -> None:
    server.add(text("ok"))
    raw = json.dumps(STREAM).encode()
    client.post(
        "/chat/completions?x=1",
        content=raw,
        headers={"Authorization": "Bearer sk-test", "Content-Type": "application/json"},
    )
    client.get("/models")
    reqs = server.requests
    assert [(q.method, q.path) for q in reqs] == [
        ("POST", "/v1/chat/completions?x=1"),
        ("GET", "/v1/models"),
    ]
    assert reqs[0].body == raw and reqs[0].json == STREAM
    assert reqs[0].headers["authorization"] == "Bearer sk-test"
    assert reqs[1].body == b"" and reqs[1].json is None
    assert server.chat_bodies() == [STREAM]
    assert server.disconnects == 0 and not reqs[0].disconnected


def test_models_route(client: httpx.Client, server: FakeServer) -> None:
    assert [m["id"] for m in client.get("/models").json()["data"]] == ["test-model"]
    server.models = ["a", "b"]
    assert client.get("/models").json()["object"] == "list"
    assert [m["id"] for m in client.get("/models").json()["data"]] == ["a", "b"]
    server.models_reply = status(401, openai_error("bad key", code="invalid_api_key"))
    r = client.get("/models")
    assert r.status_code == 401 and r.json()["error"]["code"] == "invalid_api_key"


def test_unknown_route_and_bad_body(client: httpx.Client, server: FakeServer) -> None:
    with httpx.Client(base_url=server.url) as root:  # base URL without /v1
        r = root.post("/chat/completions", json=STREAM)
    assert r.status_code == 404 and r.json()["error"]["code"] == "unknown_url"
    r = client.post("/chat/completions", content=b"{not json")
    assert r.status_code == 400 and r.json()["error"]["type"] == "invalid_request_error"
    assert server.pending == 0 and len(server.requests) == 2


def test_client_hanging_up_is_counted(client: httpx.Client, server: FakeServer) -> None:
    server.add(text("x" * 200, chunk_size=1, delay=0.02))
    with client.stream("POST", "/chat/completions", json=STREAM) as r:
        for line in r.iter_lines():
            if '"content":"x"' in line:
                break  # leaving the block closes the connection mid-stream
    assert server.wait_disconnects(1, timeout=2.0)
    assert server.requests[0].disconnected and server.disconnects == 1


def test_stop_is_quick_with_idle_keepalive_connections() -> None:
    server = FakeServer(text("hi")).start()
    with httpx.Client(base_url=server.base_url) as c:
        assert c.post("/chat/completions", json=STREAM).status_code == 200
        returns_within(server.stop, "stop with an idle keep-alive connection")
        returns_within(server.stop, "a second stop")  # idempotent
        with pytest.raises(httpx.TransportError):
            c.post("/chat/completions", json=STREAM)


def test_reply_from_spec() -> None:
    r = reply_from_spec({"kind": "tool_calls", "calls": [["f", {"a": 1}]], "shape": "ollama"})
    assert r.kind == "tool_calls" and r.calls == [("f", '{"a":1}')] and r.shape == "ollama"
    assert reply_from_spec({"kind": "status", "code": 429}).status == 429
    assert reply_from_spec({"kind": "text", "content": "x", "delay": 0.1}).delay == 0.1
    with pytest.raises(ValueError, match="unknown reply kind"):
        reply_from_spec({"kind": "nope"})
    with pytest.raises(ValueError, match="bad reply spec"):
        reply_from_spec({"kind": "text", "content": "x", "dealy": 1})


# ---------------------------------------------------------------- as a process


def start_process(*args: str) -> tuple[subprocess.Popen[str], str]:
    proc = subprocess.Popen(
        [sys.executable, str(FAKESERVER), "--port", "0", *args],
        stdout=subprocess.PIPE,
        text=True,
    )
    assert proc.stdout is not None
    ready, _, _ = select.select([proc.stdout], [], [], 10.0)
    line = proc.stdout.readline() if ready else ""
    if not line.startswith("READY "):
        proc.kill()
        pytest.fail(f"fakeserver did not start: {line!r}")
    return proc, line.split()[1]


def stop_process(proc: subprocess.Popen[str]) -> None:
    proc.terminate()
    assert proc.wait(timeout=5) == 0


def test_process_mode_text(tmp_path: Path) -> None:
    proc, url = start_process("--text", "hello", "--chunk", "2", "--delay", "0.01")
    try:
        assert url.startswith("http://127.0.0.1:") and url.endswith("/v1")
        with httpx.Client(base_url=url, timeout=5.0) as c:
            r = c.post("/chat/completions", json=STREAM)
            assert [d.get("content") for d in deltas(events(r.text))][1:4] == ["he", "ll", "o"]
            assert c.post("/chat/completions", json=STREAM).status_code == 500
    finally:
        stop_process(proc)


def test_process_mode_script_default_and_record(tmp_path: Path) -> None:
    script = tmp_path / "script.json"
    script.write_text(
        json.dumps(
            [
                {"kind": "status", "code": 429, "headers": {"retry-after": "0"}},
                {"kind": "tool_calls", "calls": [["f", "{}"]], "shape": "llamacpp"},
                {"kind": "text", "content": "again"},
            ]
        )
    )
    record = tmp_path / "requests.jsonl"
    proc, url = start_process(
        "--script", str(script), "--default", "--record", str(record), "--model", "m1"
    )
    try:
        with httpx.Client(base_url=url, timeout=5.0) as c:
            assert c.post("/chat/completions", json=STREAM).status_code == 429
            entries = tool_entries(events(c.post("/chat/completions", json=STREAM).text))
            assert entries[0]["function"]["name"] == "f" and len(entries[0]["id"]) > 40
            for _ in range(3):
                got = c.post("/chat/completions", json=PLAIN).json()
                assert got["choices"][0]["message"]["content"] == "again"
            assert [m["id"] for m in c.get("/models").json()["data"]] == ["m1"]
    finally:
        stop_process(proc)
    lines = [json.loads(ln) for ln in record.read_text().splitlines()]
    assert len(lines) == 6 and lines[0] == {
        "method": "POST",
        "path": "/v1/chat/completions",
        "json": STREAM,
    }
    assert lines[-1]["path"] == "/v1/models"
