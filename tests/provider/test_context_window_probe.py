"""The context window of a model countbot does not know, asked of its server
(provider/context_window_probe.py) over a real loopback HTTP server: llama.cpp's /props, vLLM's and
OpenRouter's /models, Ollama's /api/show; missing, malformed or implausible answers are no
answer; the answer is cached per base URL and model."""

from __future__ import annotations

import json
import threading
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import pytest
from waits import returns_within

from countbot_cli.provider.context_window_probe import (
    UNKNOWN_TTL,
    ContextWindowCache,
    cache_path,
    discover_context_window,
    probe_context_window,
)

Route = tuple[int, bytes]


class Routes(ThreadingHTTPServer):
    routes: dict[tuple[str, str], Route]
    seen: list[tuple[str, str, Any]]


class _Handler(BaseHTTPRequestHandler):
    server: Routes

    def log_message(self, format: str, *args: Any) -> None:
        pass

    def _answer(self) -> None:
        raw = self.rfile.read(int(self.headers.get("content-length") or 0))
        body = json.loads(raw) if raw else None
        self.server.seen.append((self.command, self.path, body))
        code, data = self.server.routes.get((self.command, self.path), (404, b"not found"))
        self.send_response(code)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)

    do_GET = do_POST = _answer


@pytest.fixture
def http() -> Iterator[Routes]:
    srv = Routes(("127.0.0.1", 0), _Handler)
    srv.routes, srv.seen = {}, []
    t = threading.Thread(target=srv.serve_forever, args=(0.05,), daemon=True)
    t.start()
    yield srv
    srv.shutdown()
    srv.server_close()


def base(srv: Routes) -> str:
    return f"http://127.0.0.1:{srv.server_address[1]}/v1"


def js(obj: Any) -> Route:
    return 200, json.dumps(obj).encode()


MODELS = ("GET", "/v1/models")
PROPS = ("GET", "/props")
SHOW = ("POST", "/api/show")


LLAMA_ROWS = js({"data": [{"id": "m", "owned_by": "llamacpp"}]})
OLLAMA_ROWS = js({"data": [{"id": "m", "owned_by": "library"}]})


@pytest.mark.parametrize(
    ("routes", "kind", "want"),
    [
        (
            {MODELS: LLAMA_ROWS, PROPS: js({"default_generation_settings": {"n_ctx": 16384}})},
            None,
            16384,
        ),
        ({PROPS: js({"n_ctx": 4096})}, "llamacpp", 4096),  # older llama.cpp, by its preset
        (
            {
                MODELS: js(
                    {
                        "data": [
                            {"id": "other", "max_model_len": 1},
                            {"id": "m", "max_model_len": 32768},
                        ]
                    }
                )
            },
            None,
            32768,
        ),  # vLLM
        (
            {MODELS: js({"data": [{"id": "m", "context_length": 200000}]})},
            None,
            200000,
        ),  # OpenRouter
        (
            {MODELS: js({"data": [{"id": "m", "top_provider": {"context_length": 65536}}]})},
            None,
            65536,
        ),
        (
            {
                MODELS: OLLAMA_ROWS,
                SHOW: js({"model_info": {"general.arch": "qwen2", "qwen2.context_length": 32768}}),
            },
            None,
            32768,
        ),  # Ollama, by its model list
        (
            {SHOW: js({"model_info": {"llama.context_length": 8192}})},
            "ollama",
            8192,
        ),  # Ollama, by its preset
    ],
    ids=[
        "llama.cpp",
        "llama.cpp-old",
        "vllm",
        "openrouter",
        "openrouter-top",
        "ollama",
        "ollama-preset",
    ],
)
def test_each_server_shape_is_read(
    http: Routes, routes: dict[tuple[str, str], Route], kind: str | None, want: int
) -> None:
    http.routes = {MODELS: js({"data": [{"id": "m"}]}), **routes}
    assert probe_context_window(base(http), "m", {"Authorization": "Bearer k"}, kind=kind) == want
    show = [b for (method, path, b) in http.seen if path == "/api/show"]
    assert all(b == {"model": "m"} for b in show)


def test_a_server_of_no_known_kind_is_asked_only_its_model_list(http: Routes) -> None:
    """Ollama's POST goes only to Ollama, llama.cpp's /props only to llama.cpp (issue 25 point 5):
    any other server is asked its model list and nothing more, whatever it would answer."""
    http.routes = {
        MODELS: js({"data": [{"id": "m", "owned_by": "someone"}]}),
        PROPS: js({"n_ctx": 4096}),
        SHOW: js({"model_info": {"llama.context_length": 8192}}),
    }
    assert probe_context_window(base(http), "m", {}) is None
    assert [(m, p) for (m, p, _) in http.seen] == [MODELS]


def test_llamacpp_by_its_server_header_is_asked_props(http: Routes) -> None:
    orig = _Handler.send_header

    def with_server(self: _Handler, name: str, value: str) -> None:
        orig(self, name, value)
        if name == "Content-Type":
            orig(self, "Server", "llama.cpp")

    _Handler.send_header = with_server  # type: ignore[method-assign]
    try:
        http.routes = {
            PROPS: js({"n_ctx": 2048}),
            SHOW: js({"model_info": {"a.context_length": 9}}),
        }
        assert probe_context_window(base(http), "m", {}) == 2048
    finally:
        _Handler.send_header = orig  # type: ignore[method-assign]
    assert [p for (_, p, _) in http.seen] == ["/v1/models", "/props"]


@pytest.mark.parametrize(
    "routes",
    [
        {},  # nothing: every place 404
        {PROPS: (200, b"{not json"), MODELS: (200, b"<html>"), SHOW: (200, b"[]")},
        {PROPS: js({"n_ctx": "big"}), MODELS: js({"data": "x"}), SHOW: js({"model_info": 3})},
        {PROPS: js({"n_ctx": 0}), MODELS: js({"data": [{"id": "m", "max_model_len": -1}]})},
        {PROPS: js({"n_ctx": True}), SHOW: js({"model_info": {"x.context_length": 10**12}})},
        {PROPS: (500, b'{"n_ctx": 4096}')},  # an error status is no answer, whatever its body
        {MODELS: js({"data": [{"id": "another-model", "max_model_len": 4096}]})},
    ],
    ids=["missing", "not-json", "wrong-types", "zero-negative", "bool-huge", "status", "other"],
)
@pytest.mark.parametrize("kind", ["llamacpp", "ollama"])
def test_missing_or_malformed_answers_are_no_answer(
    http: Routes, routes: dict[tuple[str, str], Route], kind: str
) -> None:
    http.routes = routes
    assert probe_context_window(base(http), "m", {}, kind=kind) is None
    own = "/props" if kind == "llamacpp" else "/api/show"
    assert [p for (_, p, _) in http.seen] == ["/v1/models", own]


def test_an_unreachable_server_is_no_answer_quickly() -> None:
    import socket

    with socket.socket() as s:  # a port nobody listens on
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    url = f"http://127.0.0.1:{port}/v1"
    assert returns_within(lambda: probe_context_window(url, "m", {}), "a probe of no one") is None


def test_a_server_that_hangs_is_given_up_on(http: Routes) -> None:
    gate = threading.Event()
    orig = _Handler._answer

    def slow(self: _Handler) -> None:
        gate.wait(60)
        orig(self)

    _Handler.do_GET = _Handler.do_POST = slow  # type: ignore[method-assign]
    try:
        asked = returns_within(  # a hang bound: the server waits 60 s
            lambda: probe_context_window(base(http), "m", {}, timeout=0.2), "a hung probe", 20
        )
        assert asked is None
    finally:
        gate.set()
        _Handler.do_GET = _Handler.do_POST = orig  # type: ignore[method-assign]


def test_the_answer_is_cached_per_base_url_and_model(http: Routes, tmp_path: Path) -> None:
    http.routes = {PROPS: js({"n_ctx": 4096})}
    url = base(http)
    assert discover_context_window(url, "m", {}, tmp_path, kind="llamacpp") == 4096
    asked = len(http.seen)
    assert discover_context_window(url, "m", {}, tmp_path, kind="llamacpp") == 4096
    assert len(http.seen) == asked  # from the cache: no request
    assert discover_context_window(url, "m2", {}, tmp_path, kind="llamacpp") == 4096
    assert len(http.seen) > asked  # another model is asked
    cached = json.loads(cache_path(tmp_path).read_text(encoding="utf-8"))
    assert cached[f"{url} m"]["n"] == 4096


def test_no_answer_is_cached_for_a_day(tmp_path: Path) -> None:
    calls: list[str] = []

    def probe(api_base: str, model: str, headers: Any, kind: str | None) -> int | None:
        calls.append(model)
        return None

    assert discover_context_window("http://x/v1", "m", {}, tmp_path, probe=probe) is None
    assert discover_context_window("http://x/v1", "m", {}, tmp_path, probe=probe) is None
    assert calls == ["m"]
    now = [0.0]
    cache = ContextWindowCache(cache_path(tmp_path), now=lambda: now[0])
    cache.put("http://x/v1", "m", None)
    now[0] = UNKNOWN_TTL + 1
    assert cache.get("http://x/v1", "m") == (False, None)  # asked again after a day
    cache_path(tmp_path).write_text("{damaged", encoding="utf-8")
    assert (
        discover_context_window("http://x/v1", "m", {}, tmp_path, probe=lambda *a, **k: 2048)
        == 2048
    )
