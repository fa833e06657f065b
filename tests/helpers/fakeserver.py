"""A scriptable OpenAI-compatible HTTP server for countbot's tests (stdlib only).

Real HTTP/1.1 on 127.0.0.1 with a random free port, one daemon thread per connection::

    with FakeServer() as server:
        server.add(text("Hello there", chunk_size=3, delay=0.01))
        ...  # point the client at server.base_url ("http://127.0.0.1:PORT/v1")
        assert server.chat_bodies()[0]["messages"][-1]["content"] == "hi"

Routes: ``POST /v1/chat/completions`` (scripted), ``GET /v1/models`` (``server.models``, or
``server.models_reply`` to answer with e.g. ``status(401)``), any ``(method, path)`` of
``server.routes`` (a server's own places: an Ollama's ``GET /api/ps``); anything else is a 404
with an OpenAI-shaped body. Every request is recorded in ``server.requests``.

Which reply answers a chat request: the FIFO queue (``server.add(...)``) first, then
``server.responder(body)`` (may return None), then ``server.default``; with none of them the
answer is a 500 whose error message is "fakeserver: no scripted reply left".

Reply constructors (all return a ``Reply``; a ``"stream": false`` or stream-less request gets the
same answer as one ``chat.completion`` JSON object, with usage and tool_calls when present):

- ``text(content, *, chunk_size=5, delay=0.0, first_delay=0.0, usage=None, finish_reason="stop",
  reasoning=None, reasoning_field="reasoning_content", model="test-model", keepalive=False,
  crlf=False, done=True, headers=None)``: role chunk, reasoning deltas, content deltas of
  ``chunk_size`` characters, a finish chunk, a usage chunk with ``choices: []`` when ``usage`` is
  given (other chunks then carry ``"usage": null``), ``[DONE]`` unless ``done=False``.
  ``keepalive=True`` puts a ``: keep-alive`` comment before every event; a number also sends one
  every that many seconds while waiting. ``crlf`` uses CRLF line ends.
- ``tool_calls(calls, *, shape="openai", content="", ids=None, chunk_size=5, ...)``: ``calls`` is
  a list of ``(name, arguments_json)`` (a dict is dumped compactly); ``shape`` is the provider's delta layout: "openai" (head
  with index/id/type/name/arguments "", then index + argument pieces), "qwen" (head with id and
  name but no arguments, then id + argument pieces), "ollama" (each call whole in one chunk, all
  with index 0), "llamacpp" (id, type and name repeated on every chunk, ids over 40 chars).
  ``finish_reason`` "tool_calls". The ids used are in ``reply.ids``.
- ``status(code, body=None, headers=None)``: any status; a dict body is JSON, a str is text/plain,
  None is an OpenAI error body ``{"error": {"message": "fakeserver: HTTP <code>", ...}}``.
- ``error_mid_stream(text_before, error=None, *, chunk_size=5, delay=0.0, done=True)``: text
  deltas, then ``{"error": {...}}``, then ``[DONE]``. Non-streamed: HTTP 500 with that error.
- ``cut(text_before, *, after_chunks=None, chunk_size=5, delay=0.0)``: role chunk and content
  deltas (only the first ``after_chunks`` if given), then the socket is shut down: no finish
  reason, no [DONE], no chunked terminator. Non-streamed: half of the JSON body, then the cut.
- ``json_to_stream(content, *, model="test-model", usage=None)``: a plain ``application/json``
  chat.completion body even when the request asked for a stream.
- ``hang(seconds, *, after_text="", send_headers=True)``: headers (plus, when streamed and
  ``after_text`` is set, a role chunk and its deltas), then silence for ``seconds`` (cut short by
  ``stop()``), then a cut. ``send_headers=False`` is silent from the start (no response at all).
- ``empty_stream()``: a 200 SSE stream holding only ``data: [DONE]``.
- ``reply_from_spec({"kind": "text", "content": "..", ...})`` builds any of them from JSON.

``cached_usage(prompt_tokens, completion_tokens, cached_tokens)`` is an OpenAI-shaped ``usage``
object (``prompt_tokens_details.cached_tokens``) for the ``usage=`` of a reply.

A small model's window: with ``server.context_window = N`` a chat request whose prompt is over N
tokens is answered with OpenAI's 400 ``context_length_exceeded`` (before any scripted reply is
taken) and its count kept in ``server.refused``. The prompt is counted by
``prompt_tokens_at_least``, a lower bound under every byte-level BPE tokenizer (so a refused
request is too long for any of them; its docstring says why).

Streams use ``Transfer-Encoding: chunked`` and one write per event, so clients see them
incrementally. A client that goes away mid-answer is counted in ``server.disconnects`` and marks
its ``RecordedRequest.disconnected``; ``server.wait_disconnects(n, timeout)`` waits for that.
It is noticed only while the server still has something to send or wait for (a delay or hang).

As a process (pexpect, benches)::

    python tests/helpers/fakeserver.py --port 0 --text hello [--delay 0.05 --chunk 3] [--script FILE.json]
        [--default] [--model NAME ...] [--record FILE.jsonl]

prints ``READY http://127.0.0.1:PORT/v1`` and serves until killed. ``--script`` holds a JSON list
of reply specs; ``--default`` repeats the last reply forever; ``--record`` appends one JSON line
per request (method, path, json).
"""

from __future__ import annotations

import argparse
import collections
import hashlib
import itertools
import json
import re
import select
import signal
import socket
import sys
import threading
import time
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any, Literal

Kind = Literal["text", "tool_calls", "status", "error", "cut", "json", "hang", "empty"]
Shape = Literal["openai", "qwen", "ollama", "llamacpp"]
Payload = dict[str, Any] | str  # one SSE data event: a JSON object or raw text such as "[DONE]"
SHAPES = ("openai", "qwen", "ollama", "llamacpp")
EMPTY_QUEUE_MESSAGE = "fakeserver: no scripted reply left"
_ids = itertools.count(1)


def _dumps(obj: Any) -> str:
    return json.dumps(obj, separators=(",", ":"))  # compact, like OpenAI's wire


@dataclass
class Reply:
    """One scripted answer. Build it with the constructors below rather than directly."""

    kind: Kind
    content: str = ""
    reasoning: str | None = None
    reasoning_field: str = "reasoning_content"
    calls: list[tuple[str, str]] = field(default_factory=list)
    shape: Shape = "openai"
    ids: list[str] = field(default_factory=list)
    chunk_size: int = 5
    delay: float = 0.0
    first_delay: float = 0.0
    usage: dict[str, Any] | None = None
    finish_reason: str | None = "stop"
    model: str = "test-model"
    keepalive: bool | float = False
    crlf: bool = False
    done: bool = True
    status: int = 200
    headers: dict[str, str] = field(default_factory=dict)
    body: dict[str, Any] | str | None = None
    error: dict[str, Any] | None = None
    after_chunks: int | None = None
    seconds: float = 0.0
    send_headers: bool = True


def text(
    content: str,
    *,
    chunk_size: int = 5,
    delay: float = 0.0,
    first_delay: float = 0.0,
    usage: dict[str, Any] | None = None,
    finish_reason: str | None = "stop",
    reasoning: str | None = None,
    reasoning_field: str = "reasoning_content",
    model: str = "test-model",
    keepalive: bool | float = False,
    crlf: bool = False,
    done: bool = True,
    headers: dict[str, str] | None = None,
) -> Reply:
    return Reply(
        "text",
        content=content,
        chunk_size=chunk_size,
        delay=delay,
        first_delay=first_delay,
        usage=usage,
        finish_reason=finish_reason,
        reasoning=reasoning,
        reasoning_field=reasoning_field,
        model=model,
        keepalive=keepalive,
        crlf=crlf,
        done=done,
        headers=dict(headers or {}),
    )


def tool_calls(
    calls: Sequence[tuple[str, str | dict[str, Any]]],
    *,
    shape: Shape = "openai",
    content: str = "",
    ids: list[str] | None = None,
    chunk_size: int = 5,
    delay: float = 0.0,
    first_delay: float = 0.0,
    usage: dict[str, Any] | None = None,
    finish_reason: str | None = "tool_calls",
    model: str = "test-model",
    keepalive: bool | float = False,
    crlf: bool = False,
    done: bool = True,
    headers: dict[str, str] | None = None,
) -> Reply:
    if shape not in SHAPES:
        raise ValueError(f"unknown tool-call shape {shape!r}; expected one of {SHAPES}")
    pairs = [(str(n), a if isinstance(a, str) else _dumps(a)) for n, a in calls]
    if ids is not None and len(ids) != len(pairs):
        raise ValueError("tool_calls: ids must have one entry per call")
    return Reply(
        "tool_calls",
        calls=pairs,
        shape=shape,
        content=content,
        ids=list(ids)
        if ids is not None
        else [_default_id(shape, i, n) for i, (n, _) in enumerate(pairs)],
        chunk_size=chunk_size,
        delay=delay,
        first_delay=first_delay,
        usage=usage,
        finish_reason=finish_reason,
        model=model,
        keepalive=keepalive,
        crlf=crlf,
        done=done,
        headers=dict(headers or {}),
    )


def status(
    code: int, body: dict[str, Any] | str | None = None, headers: dict[str, str] | None = None
) -> Reply:
    return Reply("status", status=code, body=body, headers=dict(headers or {}))


def error_mid_stream(
    text_before: str,
    error: dict[str, Any] | None = None,
    *,
    chunk_size: int = 5,
    delay: float = 0.0,
    done: bool = True,
) -> Reply:
    err = error or {"message": "fakeserver: error mid-stream", "type": "server_error", "code": None}
    return Reply(
        "error", content=text_before, error=err, chunk_size=chunk_size, delay=delay, done=done
    )


def cut(
    text_before: str, *, after_chunks: int | None = None, chunk_size: int = 5, delay: float = 0.0
) -> Reply:
    return Reply(
        "cut", content=text_before, after_chunks=after_chunks, chunk_size=chunk_size, delay=delay
    )


def json_to_stream(
    content: str, *, model: str = "test-model", usage: dict[str, Any] | None = None
) -> Reply:
    return Reply("json", content=content, model=model, usage=usage)


def hang(
    seconds: float, *, after_text: str = "", chunk_size: int = 5, send_headers: bool = True
) -> Reply:
    return Reply(
        "hang",
        seconds=seconds,
        content=after_text,
        chunk_size=chunk_size,
        send_headers=send_headers,
    )


def empty_stream() -> Reply:
    return Reply("empty")


def cached_usage(prompt_tokens: int, completion_tokens: int, cached_tokens: int) -> dict[str, Any]:
    """OpenAI's usage object with the cached part of the prompt in ``prompt_tokens_details``."""
    return {
        "prompt_tokens": prompt_tokens,
        "completion_tokens": completion_tokens,
        "prompt_tokens_details": {"cached_tokens": cached_tokens},
    }


def openai_error(
    message: str, type: str = "invalid_request_error", code: str | None = None
) -> dict[str, Any]:
    """An OpenAI error body: {"error": {"message", "type", "param", "code"}}."""
    return {"error": {"message": message, "type": type, "param": None, "code": code}}


_RUN = re.compile(r"[^\W\d_]+|\d+")  # a run of letters, or of digits


def _named_texts(obj: Any) -> Iterator[str]:
    """The names and descriptions in a tool definition (what every template renders)."""
    if isinstance(obj, dict):
        for key, value in obj.items():
            if key in ("name", "description") and isinstance(value, str):
                yield value
            else:
                yield from _named_texts(value)
    elif isinstance(obj, list):
        for item in obj:
            yield from _named_texts(item)


def _message_texts(m: Any) -> Iterator[str]:
    if not isinstance(m, dict):
        return
    content = m.get("content")
    parts = content if isinstance(content, list) else [{"text": content}]
    yield from (p["text"] for p in parts if isinstance(p, dict) and isinstance(p.get("text"), str))
    if isinstance(m.get("name"), str):
        yield m["name"]
    for call in m.get("tool_calls") or []:
        fn = call.get("function") if isinstance(call, dict) else None
        if isinstance(fn, dict):
            yield from (str(fn.get(k) or "") for k in ("name", "arguments"))


def prompt_tokens_at_least(body: dict[str, Any]) -> int:
    """A lower bound of a chat request's prompt tokens: one a message (its role's marker in any
    chat template), and one for every run of letters and every run of digits in the messages'
    text, names and tool calls and in the tools' names and descriptions. Byte-level BPE
    tokenizers (GPT-2's, cl100k and o200k, Llama 3's, SmolLM2's) cut text into pieces before
    merging, and no piece holds two such runs (a piece is at most one letter run with one
    leading non-letter, a digit run, or neither), so each run is at least one token."""
    messages = body.get("messages") or []
    texts = [t for m in messages for t in _message_texts(m)]
    texts += list(_named_texts(body.get("tools") or []))
    return len(messages) + sum(len(_RUN.findall(t)) for t in texts)


_BUILDERS: dict[str, Callable[..., Reply]] = {
    "text": text,
    "tool_calls": tool_calls,
    "status": status,
    "error_mid_stream": error_mid_stream,
    "cut": cut,
    "json_to_stream": json_to_stream,
    "hang": hang,
    "empty_stream": empty_stream,
}


def reply_from_spec(spec: dict[str, Any]) -> Reply:
    """{"kind": "<constructor name>", **its arguments}; "calls" may be [[name, args], ...]."""
    args = dict(spec)
    kind = str(args.pop("kind", ""))
    if kind not in _BUILDERS:
        raise ValueError(f"unknown reply kind {kind!r}; expected one of {sorted(_BUILDERS)}")
    if kind == "tool_calls":
        args["calls"] = [(c[0], c[1]) for c in args.get("calls", [])]
    try:
        return _BUILDERS[kind](**args)
    except TypeError as exc:
        raise ValueError(f"bad reply spec {spec!r}: {exc}") from None


def _default_id(shape: str, index: int, name: str) -> str:
    digest = hashlib.sha256(f"{shape}/{index}/{name}".encode()).hexdigest()
    if shape == "llamacpp":  # llama-cpp-python: "call__<i>_<name>_" + completion id
        return (
            f"call__{index}_{name}_cmpl-{digest[:8]}-{digest[8:12]}-{digest[12:16]}-{digest[16:28]}"
        )
    return f"call_{digest[:8] if shape == 'ollama' else digest[:24]}"


# ---------------------------------------------------------------- wire payloads


def _pieces(s: str, size: int) -> list[str]:
    size = max(1, size)
    return [s[i : i + size] for i in range(0, len(s), size)]


def _envelope(r: Reply, cid: str, obj: str) -> dict[str, Any]:
    return {
        "id": cid,
        "object": obj,
        "created": int(time.time()),
        "model": r.model,
        "system_fingerprint": "fp_fakeserver",
    }


def _chunk(r: Reply, cid: str, delta: dict[str, Any], finish: str | None = None) -> dict[str, Any]:
    c = _envelope(r, cid, "chat.completion.chunk")
    c["choices"] = [{"index": 0, "delta": delta, "logprobs": None, "finish_reason": finish}]
    if r.usage is not None:
        c["usage"] = None
    return c


def _tool_deltas(r: Reply) -> list[list[dict[str, Any]]]:
    """The `tool_calls` list of every chunk, in the layout of `r.shape`."""
    out: list[list[dict[str, Any]]] = []
    for i, ((name, args), cid) in enumerate(zip(r.calls, r.ids, strict=True)):
        parts = _pieces(args, r.chunk_size)
        base = {"index": i, "id": cid, "type": "function"}
        if r.shape == "ollama":
            out.append([{**base, "index": 0, "function": {"name": name, "arguments": args}}])
        elif r.shape == "qwen":
            out.append([{**base, "function": {"name": name}}])
            out += [[{"index": i, "id": cid, "function": {"arguments": p}}] for p in parts]
        elif r.shape == "llamacpp":
            out += [[{**base, "function": {"name": name, "arguments": p}}] for p in ["", *parts]]
        else:
            out.append([{**base, "function": {"name": name, "arguments": ""}}])
            out += [[{"index": i, "function": {"arguments": p}}] for p in parts]
    return out


def stream_payloads(r: Reply, cid: str = "chatcmpl-fake") -> list[Payload]:
    """Every SSE data event `r` sends to a streamed request (nothing for status/json kinds)."""
    if r.kind == "empty":
        return ["[DONE]"]
    out: list[Payload] = []
    deltas = _tool_deltas(r) if r.kind == "tool_calls" else []
    if r.kind == "hang" and not r.content:
        return out  # headers only: the client has no first byte of the body
    if r.kind != "tool_calls" or r.content or r.reasoning:
        out.append(_chunk(r, cid, {"role": "assistant", "content": ""}))
    if r.reasoning:
        out += [_chunk(r, cid, {r.reasoning_field: p}) for p in _pieces(r.reasoning, r.chunk_size)]
    content = [_chunk(r, cid, {"content": p}) for p in _pieces(r.content, r.chunk_size)]
    if r.kind == "cut" and r.after_chunks is not None:
        content = content[: r.after_chunks]
    out += content
    for n, calls in enumerate(deltas):
        head = {"role": "assistant", "content": None} if n == 0 and not out else {}
        out.append(_chunk(r, cid, {**head, "tool_calls": calls}))
    if r.kind in ("cut", "hang"):
        return out
    if r.kind == "error":
        out.append({"error": r.error})
    else:
        out.append(_chunk(r, cid, {}, r.finish_reason))
        if r.usage is not None:
            out.append(
                {**_envelope(r, cid, "chat.completion.chunk"), "choices": [], "usage": r.usage}
            )
    return out + ["[DONE]"] if r.done else out


def completion(r: Reply, cid: str = "chatcmpl-fake") -> dict[str, Any]:
    """The non-streamed `chat.completion` object for `r`."""
    msg: dict[str, Any] = {"role": "assistant", "content": r.content or None, "refusal": None}
    if r.kind != "tool_calls":
        msg["content"] = r.content
    if r.reasoning:
        msg[r.reasoning_field] = r.reasoning
    if r.calls:
        msg["tool_calls"] = [
            {"id": i, "type": "function", "function": {"name": n, "arguments": a}}
            for (n, a), i in zip(r.calls, r.ids, strict=True)
        ]
    choice = {"index": 0, "message": msg, "logprobs": None, "finish_reason": r.finish_reason}
    out = {**_envelope(r, cid, "chat.completion"), "choices": [choice]}
    if r.usage is not None:
        out["usage"] = r.usage
    return out


def status_body(r: Reply) -> tuple[bytes, str]:
    if isinstance(r.body, str):
        return r.body.encode(), "text/plain; charset=utf-8"
    body = (
        r.body
        if r.body is not None
        else openai_error(
            f"fakeserver: HTTP {r.status}",
            "server_error" if r.status >= 500 else "invalid_request_error",
        )
    )
    return _dumps(body).encode(), "application/json"


# ---------------------------------------------------------------- server


@dataclass
class RecordedRequest:
    method: str
    path: str
    headers: dict[str, str]  # names lower-cased
    body: bytes
    json: Any  # parsed body, None when empty or not JSON
    time: float = field(default_factory=time.monotonic)
    disconnected: bool = False  # the client went away before the answer was complete
    peer: tuple[str, int] | None = None  # the client's end of the connection it came on


class FakeServer:
    """The server; thread-safe. `start()`/`stop()` or use it as a context manager."""

    def __init__(
        self,
        *replies: Reply,
        default: Reply | None = None,
        responder: Callable[[dict[str, Any]], Reply | None] | None = None,
        models: list[str] | None = None,
        port: int = 0,
    ) -> None:
        self.default = default
        self.responder = responder
        self.models: list[str] = list(models) if models is not None else ["test-model"]
        self.models_reply: Reply | None = None
        self.routes: dict[tuple[str, str], Reply] = {}  # (method, path) -> its answer
        self.on_request: Callable[[RecordedRequest], None] | None = None
        self.errors: list[BaseException] = []  # exceptions raised by the responder
        self.context_window: int | None = None  # refuse a prompt over this many tokens
        self.refused: list[int] = []  # the prompt tokens (at least) of each request refused
        self._port = port
        self._queue: collections.deque[Reply] = collections.deque(replies)
        self._requests: list[RecordedRequest] = []
        self._disconnects = 0
        self._cond = threading.Condition()
        self._conns: set[socket.socket] = set()
        self.stopping = threading.Event()
        self._httpd: _HTTPServer | None = None
        self._thread: threading.Thread | None = None

    # lifecycle
    def start(self) -> FakeServer:
        if self._httpd is None:
            self.stopping.clear()
            self._httpd = _HTTPServer(("127.0.0.1", self._port), _Handler, self)
            self._thread = threading.Thread(
                target=self._httpd.serve_forever, args=(0.05,), name="fakeserver", daemon=True
            )
            self._thread.start()
        return self

    def stop(self) -> None:
        if self._httpd is None:
            return
        self.stopping.set()
        self._httpd.shutdown()
        self._httpd.server_close()
        with self._cond:
            conns = list(self._conns)
        for conn in conns:
            try:
                conn.shutdown(socket.SHUT_RDWR)
            except OSError:
                pass
        self._httpd = None

    def __enter__(self) -> FakeServer:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()

    @property
    def port(self) -> int:
        if self._httpd is None:
            raise RuntimeError("FakeServer is not started")
        return int(self._httpd.server_address[1])

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    @property
    def base_url(self) -> str:
        return f"{self.url}/v1"

    # scripting
    def add(self, *replies: Reply) -> FakeServer:
        with self._cond:
            self._queue.extend(replies)
        return self

    @property
    def pending(self) -> int:
        with self._cond:
            return len(self._queue)

    def over_window(self, body: dict[str, Any]) -> Reply | None:
        """OpenAI's 400 for a prompt over `context_window` tokens (counted at least), or None."""
        if self.context_window is None:
            return None
        n = prompt_tokens_at_least(body)
        if n <= self.context_window:
            return None
        with self._cond:
            self.refused.append(n)
        msg = (
            f"This model's maximum context length is {self.context_window} tokens. However, "
            f"your messages resulted in {n} tokens. Please reduce the length of the messages."
        )
        return status(400, openai_error(msg, code="context_length_exceeded"))

    def next_reply(self, body: dict[str, Any]) -> Reply | None:
        with self._cond:
            if self._queue:
                return self._queue.popleft()
        if self.responder is not None:
            try:
                found = self.responder(body)
            except Exception as exc:
                with self._cond:
                    self.errors.append(exc)
                return status(
                    500, openai_error(f"fakeserver: responder raised {exc!r}", "server_error")
                )
            if found is not None:
                return found
        return self.default

    # recording
    @property
    def requests(self) -> list[RecordedRequest]:
        with self._cond:
            return list(self._requests)

    def chat_bodies(self) -> list[Any]:
        with self._cond:
            return [r.json for r in self._chats()]

    @property
    def disconnects(self) -> int:
        with self._cond:
            return self._disconnects

    def wait_disconnects(self, n: int = 1, timeout: float = 2.0) -> bool:
        with self._cond:
            return self._cond.wait_for(lambda: self._disconnects >= n, timeout)

    def wait_chats(self, n: int = 1, timeout: float = 20.0) -> list[Any]:
        """Wait until `n` chat requests have arrived (`timeout` is a hang bound: the test fails
        after it); their bodies."""
        with self._cond:
            if not self._cond.wait_for(lambda: len(self._chats()) >= n, timeout):
                raise AssertionError(f"{len(self._chats())} chat requests, waited for {n}")
        return self.chat_bodies()

    def _chats(self) -> list[RecordedRequest]:
        return [r for r in self._requests if r.path.split("?")[0] == "/v1/chat/completions"]

    def record(self, req: RecordedRequest) -> None:
        with self._cond:
            self._requests.append(req)
            self._cond.notify_all()
        if self.on_request is not None:
            self.on_request(req)

    def mark_disconnect(self, req: RecordedRequest) -> None:
        with self._cond:
            req.disconnected = True
            self._disconnects += 1
            self._cond.notify_all()

    def track(self, conn: socket.socket, alive: bool) -> None:
        with self._cond:
            (self._conns.add if alive else self._conns.discard)(conn)


class _HTTPServer(ThreadingHTTPServer):
    daemon_threads = True

    def __init__(self, addr: tuple[str, int], handler: type[_Handler], fake: FakeServer) -> None:
        self.fake = fake
        super().__init__(addr, handler)

    def handle_error(self, request: Any, client_address: Any) -> None:
        """A client that hangs up (countbot closing a stream, a process killed) is ordinary
        here: say nothing, as the stderr of an in-process countbot run is what tests read."""
        if isinstance(sys.exc_info()[1], (ConnectionError, TimeoutError)):
            return
        super().handle_error(request, client_address)


class _Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"
    server: _HTTPServer
    rec: RecordedRequest | None = None
    chunked = False

    def log_message(self, format: str, *args: Any) -> None:
        pass  # quiet: tests read server.requests instead

    def setup(self) -> None:
        super().setup()
        self.connection.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)  # no Nagle stalls
        self.server.fake.track(self.connection, True)

    def finish(self) -> None:
        try:
            super().finish()
        finally:
            self.server.fake.track(self.connection, False)

    def do_GET(self) -> None:
        self._dispatch()

    def do_POST(self) -> None:
        self._dispatch()

    def _dispatch(self) -> None:
        fake = self.server.fake
        raw = self.rfile.read(int(self.headers.get("content-length") or 0))
        try:
            parsed = json.loads(raw) if raw else None
        except ValueError:
            parsed = None
        headers = {k.lower(): v for k, v in self.headers.items()}
        self.rec = RecordedRequest(
            self.command, self.path, headers, raw, parsed, peer=self.client_address[:2]
        )
        fake.record(self.rec)
        route = (self.command, self.path.split("?")[0])
        if route == ("POST", "/v1/chat/completions"):
            self._chat(parsed)
        elif route == ("GET", "/v1/models"):
            self._serve(fake.models_reply or _models_reply(fake.models), False)
        elif route in fake.routes:
            self._serve(fake.routes[route], False)
        else:
            msg = f"Unknown request URL: {self.command} {self.path}. Please check the URL."
            self._serve(status(404, openai_error(msg, code="unknown_url")), False)

    def _chat(self, body: Any) -> None:
        if not isinstance(body, dict):
            err = openai_error("fakeserver: the request body is not a JSON object")
            self._serve(status(400, err), False)
            return
        reply = self.server.fake.over_window(body) or self.server.fake.next_reply(body)
        if reply is None:
            err = openai_error(EMPTY_QUEUE_MESSAGE, "server_error", "fakeserver_empty")
            reply = status(500, err)
        self._serve(reply, bool(body.get("stream")))

    # ---- answering
    def _serve(self, r: Reply, streamed: bool) -> None:
        cid = f"chatcmpl-fake{next(_ids)}"
        self.chunked = False
        if r.kind == "hang" and not r.send_headers:
            if self._pause(r.seconds, False, "\n"):
                self._cut()
        elif r.kind == "status":
            self._send_whole(r.status, *status_body(r), r.headers)
        elif r.kind == "error" and not streamed:
            self._send_whole(500, _dumps({"error": r.error}).encode(), JSON, r.headers)
        elif r.kind in ("cut", "hang") and not streamed:
            self._serve_partial(r, _dumps(completion(r, cid)).encode())
        elif r.kind == "json" or not streamed:
            self._send_whole(200, _dumps(completion(r, cid)).encode(), JSON, r.headers)
        else:
            self._serve_stream(r, cid)

    def _head(self, code: int, ctype: str, headers: dict[str, str], length: int | None) -> None:
        self.send_response(code)
        if "content-type" not in {k.lower() for k in headers}:
            self.send_header("Content-Type", ctype)
        if length is None:
            self.chunked = True
            self.send_header("Transfer-Encoding", "chunked")
            self.send_header("Cache-Control", "no-cache")
        else:
            self.send_header("Content-Length", str(length))
        for k, v in headers.items():
            self.send_header(k, v)
        self.end_headers()

    def _send_whole(self, code: int, body: bytes, ctype: str, headers: dict[str, str]) -> None:
        self._head(code, ctype, headers, len(body))
        self._write(body)

    def _serve_partial(self, r: Reply, body: bytes) -> None:
        self._head(200, JSON, r.headers, len(body))
        if r.kind == "cut" and not self._write(body[: len(body) // 2]):
            return
        if self._pause(r.seconds if r.kind == "hang" else 0.0, False, "\n"):
            self._cut()

    def _serve_stream(self, r: Reply, cid: str) -> None:
        self._head(200, "text/event-stream; charset=utf-8", r.headers, None)
        nl = "\r\n" if r.crlf else "\n"
        for i, payload in enumerate(stream_payloads(r, cid)):
            if not self._pause(r.first_delay if i == 0 else r.delay, r.keepalive, nl):
                return
            data = payload if isinstance(payload, str) else _dumps(payload)
            ping = f": keep-alive{nl}{nl}" if r.keepalive else ""
            if not self._write(f"{ping}data: {data}{nl}{nl}".encode()):
                return
        if r.kind == "hang" and not self._pause(r.seconds, False, nl):
            return
        if r.kind in ("cut", "hang"):
            self._cut()
        else:
            self._write(b"0\r\n\r\n", raw=True)

    # ---- socket helpers; False means the answer was abandoned (client gone or server stopping)
    def _write(self, data: bytes, raw: bool = False) -> bool:
        frame = b"%x\r\n%s\r\n" % (len(data), data) if self.chunked and not raw else data
        try:
            self.wfile.write(frame)
            self.wfile.flush()
            return True
        except OSError:
            return self._abandon(client_gone=True)

    def _pause(self, seconds: float, keepalive: bool | float, nl: str) -> bool:
        """Wait `seconds`, watching for the client hanging up and for stop()."""
        interval = float(keepalive) if type(keepalive) is not bool and keepalive > 0 else None
        now = time.monotonic()
        end, ping_at = now + seconds, now + (interval or seconds)
        while True:
            if self.server.fake.stopping.is_set():
                return self._abandon(client_gone=False)
            if self._client_gone(max(0.0, min(end, ping_at, now + 0.05) - now)):
                return self._abandon(client_gone=True)
            now = time.monotonic()
            if now >= end:
                return True
            if interval and now >= ping_at:
                ping_at = now + interval
                if not self._write(f": keep-alive{nl}{nl}".encode()):
                    return False

    def _client_gone(self, timeout: float) -> bool:
        try:
            readable, _, _ = select.select([self.connection], [], [], timeout)
            if not readable:
                return False
            if self.connection.recv(1, socket.MSG_PEEK) == b"":
                return True
        except OSError:
            return True
        time.sleep(timeout)  # pipelined bytes, not a hang-up: just wait
        return False

    def _abandon(self, client_gone: bool) -> bool:
        self.close_connection = True
        if client_gone and self.rec is not None and not self.rec.disconnected:
            self.server.fake.mark_disconnect(self.rec)
        return False

    def _cut(self) -> None:
        """End the answer abruptly: FIN with no terminator (a RST could drop unread data)."""
        self.close_connection = True
        try:
            self.connection.shutdown(socket.SHUT_RDWR)
        except OSError:
            pass


JSON = "application/json"


def _models_reply(models: list[str]) -> Reply:
    data = [{"id": m, "object": "model", "created": 0, "owned_by": "fakeserver"} for m in models]
    return status(200, {"object": "list", "data": data})


# ---------------------------------------------------------------- command line


def _script_replies(args: argparse.Namespace) -> list[Reply]:
    replies: list[Reply] = []
    if args.script:
        with open(args.script, encoding="utf-8") as f:
            specs = json.load(f)
        if not isinstance(specs, list):
            raise SystemExit(f"fakeserver: {args.script} must hold a JSON list of reply specs")
        replies += [reply_from_spec(s) for s in specs]
    if args.text is not None:
        replies.append(text(args.text, delay=args.delay, chunk_size=args.chunk))
    return replies


def _record_to(path: str) -> Callable[[RecordedRequest], None]:
    lock = threading.Lock()

    def write(req: RecordedRequest) -> None:
        line = _dumps({"method": req.method, "path": req.path, "json": req.json})
        with lock, open(path, "a", encoding="utf-8") as f:
            f.write(line + "\n")

    return write


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description="Scriptable OpenAI-compatible test server.")
    p.add_argument("--port", type=int, default=0)
    p.add_argument("--text", help="answer with this text")
    p.add_argument("--delay", type=float, default=0.0, help="seconds between --text chunks")
    p.add_argument("--chunk", type=int, default=5, help="characters per --text chunk")
    p.add_argument("--script", help="JSON file: a list of reply specs, served in order")
    p.add_argument("--default", action="store_true", help="repeat the last reply forever")
    p.add_argument("--model", action="append", help="a model for /v1/models (repeatable)")
    p.add_argument("--record", help="append one JSON line per request to this file")
    args = p.parse_args(argv)
    replies = _script_replies(args)
    server = FakeServer(*replies, models=args.model, port=args.port)
    if args.default and replies:
        server = FakeServer(*replies[:-1], default=replies[-1], models=args.model, port=args.port)
    if args.record:
        server.on_request = _record_to(args.record)
    done = threading.Event()
    signal.signal(signal.SIGTERM, lambda *_: done.set())
    with server:
        print(f"READY {server.base_url}", flush=True)
        try:
            while not done.wait(0.5):
                pass
        except KeyboardInterrupt:
            pass
    return 0


if __name__ == "__main__":
    sys.exit(main())
