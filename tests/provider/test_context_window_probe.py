"""The context window a server runs a model with (provider/context_window_probe.py), asked over a
real loopback HTTP server: llama.cpp's /props, vLLM's and OpenRouter's /models, Ollama's /api/ps
(then a Modelfile's num_ctx, then its default; never the model's maximum), LM Studio's loaded
instances; missing, malformed or implausible answers are no answer (Ollama's default for Ollama);
the answer of a server that does not load models is cached per base URL and model."""

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
    ContextWindow,
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
PS = ("GET", "/api/ps")
TRAINED = js({"model_info": {"general.architecture": "llama", "llama.context_length": 131072}})


def ps(*rows: tuple[str, int]) -> Route:
    """Ollama's /api/ps with these (name, context_length) loaded."""
    return js({"models": [{"name": n, "model": n, "context_length": c} for n, c in rows]})


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
        ({MODELS: OLLAMA_ROWS, PS: ps(("m:latest", 8192)), SHOW: TRAINED}, None, 8192),
        ({PS: ps(("other:latest", 2048), ("m:latest", 4096)), SHOW: TRAINED}, "ollama", 4096),
    ],
    ids=[
        "llama.cpp",
        "llama.cpp-old",
        "vllm",
        "openrouter",
        "openrouter-top",
        "ollama-by-its-list",
        "ollama-preset",
    ],
)
def test_each_server_shape_is_read(
    http: Routes, routes: dict[tuple[str, str], Route], kind: str | None, want: int
) -> None:
    http.routes = {MODELS: js({"data": [{"id": "m"}]}), **routes}
    w = probe_context_window(base(http), "m", {"Authorization": "Bearer k"}, kind=kind)
    assert w is not None and w.n == want and w.loaded


def test_ollama_is_never_taken_at_the_models_maximum(http: Routes) -> None:
    """/api/show's model_info says what the model was trained for (131,072); Ollama runs what
    it loaded the model with (/api/ps), else a Modelfile's num_ctx, else its default."""
    http.routes = {PS: ps(("m:latest", 4096)), SHOW: TRAINED}
    w = probe_context_window(base(http), "m", {}, kind="ollama")
    assert w == (4096, "the window Ollama runs m with (/api/ps)", True)
    assert [p for (_, p, _) in http.seen] == ["/api/ps"]  # loaded: nothing more asked

    http.seen.clear()
    modelfile = 'num_ctx                        8192\nstop                           "<|im_end|>"'
    http.routes = {
        PS: ps(),
        SHOW: js({"parameters": modelfile, "model_info": {"a.context_length": 131072}}),
    }
    w = probe_context_window(base(http), "m", {}, kind="ollama")
    assert w is not None and (w.n, w.loaded) == (8192, False) and "Modelfile" in w.source
    assert [b for (_, p, b) in http.seen if p == "/api/show"] == [{"model": "m"}]

    http.routes = {PS: ps(), SHOW: TRAINED}
    w = probe_context_window(base(http), "m", {}, kind="ollama")
    assert w is not None and (w.n, w.loaded) == (4096, False)
    assert w.source == "Ollama's default window (it has not loaded the model yet)"


@pytest.mark.parametrize(
    "routes",
    [
        {},  # nothing: every place 404
        {PS: (200, b"{not json"), SHOW: (200, b"[]")},
        {PS: js({"models": [{"name": "m", "context_length": "big"}]}), SHOW: js({"parameters": 3})},
        {PS: js({"models": [{"name": "m", "context_length": 10**12}]}), SHOW: TRAINED},
        {PS: ps(("mm:latest", 8192), ("m:7b", 8192))},  # other models (and another tag)
    ],
    ids=["missing", "not-json", "wrong-types", "huge", "other-models"],
)
def test_ollama_without_a_usable_answer_is_its_default(
    http: Routes, routes: dict[tuple[str, str], Route]
) -> None:
    http.routes = routes
    w = probe_context_window(base(http), "m", {}, kind="ollama")
    assert w is not None and (w.n, w.loaded) == (4096, False)


def test_an_ollama_name_without_a_tag_is_its_latest(http: Routes) -> None:
    http.routes = {PS: ps(("library/Qwen3:latest", 2048), ("qwen3:latest", 16384))}
    w = probe_context_window(base(http), "qwen3", {}, kind="ollama")
    assert w is not None and w.n == 16384


LMS_V1 = ("GET", "/api/v1/models")


def lms_row(key: str, *lengths: int) -> dict[str, Any]:
    instances = [{"id": key, "config": {"context_length": n}} for n in lengths]
    return {"type": "llm", "key": key, "loaded_instances": instances, "max_context_length": 262144}


def test_lm_studio_says_what_it_loaded_the_model_with(http: Routes) -> None:
    http.routes = {LMS_V1: js({"models": [lms_row("other", 9999), lms_row("m", 8192)]})}
    w = probe_context_window(base(http), "m", {}, kind="lmstudio")
    assert w is not None and (w.n, w.loaded) == (8192, True) and "LM Studio" in w.source
    http.routes = {LMS_V1: js({"models": [lms_row("m")]})}  # not loaded: never its maximum
    w = probe_context_window(base(http), "m", {}, kind="lmstudio")
    assert w is not None and (w.n, w.loaded) == (4096, False)
    # before LM Studio 0.4: no v1 API; v0 says the loaded context length of a loaded model
    http.seen.clear()
    row = {
        "id": "m",
        "state": "loaded",
        "max_context_length": 131072,
        "loaded_context_length": 6000,
    }
    http.routes = {("GET", "/api/v0/models/m"): js(row)}
    w = probe_context_window(base(http), "m", {}, kind="lmstudio")
    assert w is not None and w.n == 6000
    assert [p for (_, p, _) in http.seen] == ["/api/v1/models", "/api/v0/models/m"]


def test_a_server_of_no_known_kind_is_asked_only_its_model_list(http: Routes) -> None:
    """Ollama's POST goes only to Ollama, llama.cpp's /props only to llama.cpp:
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
        w = probe_context_window(base(http), "m", {})
        assert w is not None and w.n == 2048
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
def test_missing_or_malformed_answers_are_no_answer(
    http: Routes, routes: dict[tuple[str, str], Route]
) -> None:
    http.routes = routes
    assert probe_context_window(base(http), "m", {}, kind="llamacpp") is None
    assert [p for (_, p, _) in http.seen] == ["/v1/models", "/props"]


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
    first = discover_context_window(url, "m", {}, tmp_path, kind="llamacpp")
    assert first is not None and first.n == 4096
    asked = len(http.seen)
    assert discover_context_window(url, "m", {}, tmp_path, kind="llamacpp") == first
    assert len(http.seen) == asked  # from the cache, with its source: no request
    other = discover_context_window(url, "m2", {}, tmp_path, kind="llamacpp")
    assert other is not None and other.n == 4096
    assert len(http.seen) > asked  # another model is asked
    cached = json.loads(cache_path(tmp_path).read_text(encoding="utf-8"))
    assert cached[f"{url} m"]["n"] == 4096


def test_no_answer_is_cached_for_a_day(tmp_path: Path) -> None:
    calls: list[str] = []

    def probe(api_base: str, model: str, headers: Any, kind: str | None) -> ContextWindow | None:
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
    found = ContextWindow(2048, "said")
    assert (
        discover_context_window("http://x/v1", "m", {}, tmp_path, probe=lambda *a, **k: found)
        == found
    )
