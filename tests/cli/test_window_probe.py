"""The context-window question, end to end with `ask` against a loopback server that is slow to
answer POSTs it does not know: Ollama's `POST /api/show` is sent only to a server known to be
Ollama (here by its model list), and another server's question runs beside the chat request.
Everything is ordered by what the server saw: the server holds its /api/show answer until the
chat answer has been written."""

from __future__ import annotations

import json
import threading
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import pytest
from cbenv import CB, make_cb

from countbot_cli.config.own_files import CONTEXT_WINDOWS_FILE
from countbot_cli.provider import context_window_probe

HANG_BOUND = 30.0  # seconds: a generous bound, never reached when the code is right


class SlowPosts(ThreadingHTTPServer):
    owner: str  # owned_by in its model list
    events: list[str]
    answered: threading.Event
    lock: threading.Lock

    def log(self, what: str) -> None:
        with self.lock:
            self.events.append(what)


class _Handler(BaseHTTPRequestHandler):
    server: SlowPosts
    protocol_version = "HTTP/1.1"

    def log_message(self, format: str, *args: Any) -> None:
        pass

    def _send(self, code: int, body: bytes, ctype: str = "application/json") -> None:
        self.send_response(code)
        self.send_header("Content-Type", ctype)
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)
        self.wfile.flush()

    def do_GET(self) -> None:
        srv = self.server
        srv.log(f"GET {self.path}")
        if self.path == "/v1/models":
            rows = [{"id": "test-model", "object": "model", "owned_by": srv.owner}]
            self._send(200, json.dumps({"object": "list", "data": rows}).encode())
        else:
            self._send(404, b'{"error": {"message": "not found"}}')

    def do_POST(self) -> None:
        srv = self.server
        self.rfile.read(int(self.headers.get("content-length") or 0))
        srv.log(f"POST {self.path}")
        if self.path == "/v1/chat/completions":
            self._chat()
            return
        # slow to answer a POST it does not know: only once the chat answer is out
        srv.answered.wait(HANG_BOUND)
        body = {"model_info": {"llama.context_length": 32768}} if self.path == "/api/show" else {}
        srv.log(f"answered POST {self.path}")
        self._send(200 if body else 404, json.dumps(body).encode())

    def _chat(self) -> None:
        events = [
            {"choices": [{"index": 0, "delta": {"role": "assistant", "content": "Hello "}}]},
            {"choices": [{"index": 0, "delta": {"content": "there"}, "finish_reason": "stop"}]},
        ]
        data = "".join(f"data: {json.dumps(e)}\n\n" for e in events) + "data: [DONE]\n\n"
        self._send(200, data.encode(), "text/event-stream")
        self.server.log("answered POST /v1/chat/completions")
        self.server.answered.set()


@pytest.fixture
def slow_posts() -> Iterator[SlowPosts]:
    srv = SlowPosts(("127.0.0.1", 0), _Handler)
    srv.owner, srv.events = "someone", []
    srv.answered, srv.lock = threading.Event(), threading.Lock()
    t = threading.Thread(target=srv.serve_forever, args=(0.05,), daemon=True)
    t.start()
    yield srv
    srv.answered.set()
    srv.shutdown()
    srv.server_close()


def _base(srv: SlowPosts) -> str:
    return f"http://127.0.0.1:{srv.server_address[1]}/v1"


QUIET = {"auto_memory": False, "overflow_summary": False}


def _cached(cb: CB) -> dict[str, Any]:
    """The windows learned, kept in the cache folder (nothing derived in the data folder)."""
    assert not (cb.work / CONTEXT_WINDOWS_FILE).exists()
    return dict(json.loads(cb.derived(cb.work, CONTEXT_WINDOWS_FILE).read_text(encoding="utf-8")))


def test_a_server_not_known_to_be_ollama_is_never_sent_its_post(
    tmp_path: Path, slow_posts: SlowPosts
) -> None:
    cb = make_cb(tmp_path, _base(slow_posts), memory=QUIET)
    proc = cb.invoke("ask", "--plain", "hi")
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.strip() == "Hello there"
    assert not [e for e in slow_posts.events if e.startswith("POST /api/show")]
    assert [e for e in slow_posts.events if e.startswith("POST")] == ["POST /v1/chat/completions"]
    assert _cached(cb)[f"{_base(slow_posts)} test-model"]["n"] is None  # it cannot tell


def test_ollama_is_asked_the_window_it_runs_before_the_request(
    tmp_path: Path, slow_posts: SlowPosts, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Ollama's window depends on how it loaded the model, so it is asked before the request,
    a GET; its slow POST /api/show (asked only when the model is not loaded) holds the request
    back by at most the probe's timeout, and the request then fits Ollama's default."""
    monkeypatch.setattr(context_window_probe, "PROBE_TIMEOUT", 0.3)
    slow_posts.owner = "library"  # how Ollama's /v1/models names a model's namespace
    cb = make_cb(tmp_path, _base(slow_posts), memory=QUIET)
    proc = cb.invoke("ask", "--plain", "hi")
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.strip() == "Hello there"
    ev = slow_posts.events
    assert ev.index("GET /api/ps") < ev.index("POST /v1/chat/completions")
    assert ev.index("POST /api/show") < ev.index("POST /v1/chat/completions")
    # Ollama's answer is never cached as the model's window: it changes with what is loaded
    assert not cb.derived(cb.work, CONTEXT_WINDOWS_FILE).exists()
