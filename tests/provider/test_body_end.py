"""A streamed answer's body after its [DONE] (provider/openai_compat.py): read to its end in
the background so its connection serves the next request, and never waited for by the answer
when a server holds it back; the events decoded before a failure are still shown."""

from __future__ import annotations

import json
import socket
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

import pytest
from cbenv import provider_settings
from fakeserver import FakeServer, text
from waits import returns_within

from countbot_cli.messages import ChatRequest, Finished, TextDelta
from countbot_cli.provider.assemble import Assembler
from countbot_cli.provider.openai_compat import OpenAICompatProvider


def _chunk(piece: str, finish: str | None = None) -> bytes:
    delta = {"content": piece} if piece else {}
    body = {"choices": [{"index": 0, "delta": delta, "finish_reason": finish}]}
    return f"data: {json.dumps(body)}\n\n".encode()


class _HeldOpen(BaseHTTPRequestHandler):
    """A chunked body, one event a chunk, whose end is held back after [DONE] until `release`
    is set."""

    protocol_version = "HTTP/1.1"
    pieces = ["a ", "b ", "c "]
    release = threading.Event()
    peers: set[tuple[str, int]] = set()  # the client's connections

    def log_message(self, format: str, *args: Any) -> None:
        pass

    def do_POST(self) -> None:
        self.peers.add(self.client_address)
        self.rfile.read(int(self.headers.get("content-length") or 0))
        self.send_response(200)
        self.send_header("Content-Type", "text/event-stream")
        self.send_header("Transfer-Encoding", "chunked")
        self.end_headers()
        self.connection.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        parts = [_chunk(p) for p in self.pieces] + [_chunk("", "stop"), b"data: [DONE]\n\n"]
        self.wfile.write(b"".join(f"{len(p):x}\r\n".encode() + p + b"\r\n" for p in parts))
        self.wfile.flush()
        self.release.wait(60)  # a hang bound
        self.wfile.write(b"0\r\n\r\n")
        self.wfile.flush()


@contextmanager
def _provider_on(handler: type[BaseHTTPRequestHandler]) -> Iterator[OpenAICompatProvider]:
    """A provider streaming from a loopback server with `handler`."""
    server = ThreadingHTTPServer(("127.0.0.1", 0), handler)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    base = f"http://127.0.0.1:{server.server_address[1]}/v1"
    provider = OpenAICompatProvider(provider_settings(api_base=base, api_key="k", model="m"))
    try:
        yield provider
    finally:
        provider.close()
        server.shutdown()
        server.server_close()


def test_a_streamed_answer_read_to_its_end_leaves_its_connection_for_the_next_request() -> None:
    with FakeServer() as server:
        provider = OpenAICompatProvider(
            provider_settings(api_base=server.base_url, api_key="k", model="m")
        )
        try:
            for n in range(3):  # a REPL's turns, a tool round's calls: one connection
                server.add(text(f"answer {n}", chunk_size=3))
                events = list(provider.stream(ChatRequest(model="m", messages=[])))
                assert isinstance(events[-1], Finished) and events[-1].content == f"answer {n}"
        finally:
            provider.close()
        peers = {req.peer for req in server.requests}
    assert len(peers) == 1  # 3 when the body is left at [DONE], unread, and closed


def test_the_end_of_a_body_is_not_waited_for_after_done() -> None:
    # a server that holds its body's end back: the answer is complete at [DONE], not later
    try:
        with _provider_on(_HeldOpen) as provider:
            for _ in range(2):
                events = returns_within(
                    lambda: list(provider.stream(ChatRequest(model="m", messages=[]))),
                    "an answer whose body's end is held back",
                )
                assert isinstance(events[-1], Finished) and events[-1].content == "a b c "
    finally:
        _HeldOpen.release.set()
    assert len(_HeldOpen.peers) == 2  # that connection could not be kept


class _Interrupted:
    """Chunks, then Ctrl-C in the read for the next one."""

    def __init__(self, chunks: list[bytes]) -> None:
        self.chunks = chunks

    def __iter__(self) -> Iterator[bytes]:
        yield from self.chunks
        raise KeyboardInterrupt


def test_a_body_that_ends_without_done_still_gives_its_answer() -> None:
    provider = OpenAICompatProvider(provider_settings(api_base="http://x/v1", api_key="k"))
    acc = Assembler(api_key="k")
    body = iter([_chunk("too"), _chunk("", "stop")])  # a finish, then the end: no [DONE]
    stream = provider._decode_stream(_chunk("kept "), body, acc)
    events = list(stream)
    assert [e.text for e in events if isinstance(e, TextDelta)] == ["kept ", "too"]
    assert acc.finish(False).content == "kept too"


def test_ctrl_c_in_a_read_still_shows_the_events_before_it() -> None:
    provider = OpenAICompatProvider(provider_settings(api_base="http://x/v1", api_key="k"))
    chunks = iter(_Interrupted([_chunk("too")]))
    stream = provider._decode_stream(_chunk("kept "), chunks, Assembler(api_key="k"))
    got = []
    with pytest.raises(KeyboardInterrupt):
        for event in stream:
            got.append(event)
    assert [e.text for e in got if isinstance(e, TextDelta)] == ["kept ", "too"]
