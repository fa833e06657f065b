"""What a server says about itself (provider/server_facts.py): llama.cpp recognised by each of
its three signs and nothing else, the only model found, the answer cached per base URL."""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path
from typing import Any

import pytest
from cbenv import provider_settings

from countbot_cli.errors import ConfigError
from countbot_cli.provider.server_facts import ServerFacts, facts_from, fit_to_server

BASE = "http://127.0.0.1:9/v1"
ROW = {"id": "m", "object": "model", "owned_by": "someone"}


def fetcher(routes: dict[str, tuple[Any, str]]) -> Any:
    def fetch(method: str, url: str, body: Any) -> tuple[Any, str]:
        return routes.get(url, (None, ""))

    return fetch


@pytest.mark.parametrize(
    "routes",
    [
        {f"{BASE}/models": ({"data": [ROW]}, "llama.cpp")},
        {f"{BASE}/models": ({"data": [{**ROW, "owned_by": "llamacpp"}]}, "")},
        {f"{BASE}/models": ({"data": [{**ROW, "owned_by": "me", "permissions": []}]}, "uvicorn")},
        {
            f"{BASE}/models": ({"data": [ROW]}, "uvicorn"),
            "http://127.0.0.1:9/props": ({"default_generation_settings": {"n_ctx": 4096}}, ""),
        },
    ],
    ids=["server-header", "owned_by-llamacpp", "llama-cpp-python", "props"],
)
def test_llama_cpp_is_recognised_by_each_sign(routes: dict[str, tuple[Any, str]]) -> None:
    assert facts_from(BASE, fetcher(routes)) == ServerFacts(("m",), "llamacpp")


def test_other_servers_are_not_llama_cpp() -> None:
    routes = {f"{BASE}/models": ({"data": [ROW, {**ROW, "id": "n", "owned_by": "me"}]}, "vllm")}
    assert facts_from(BASE, fetcher(routes)) == ServerFacts(("m", "n"), None)
    assert facts_from(BASE, fetcher({})) is None  # no model list: nothing known


def test_fitting_caches_the_kind_and_finds_the_only_model(tmp_path: Path) -> None:
    asked: list[str] = []

    def probe(base: str, headers: Any) -> ServerFacts | None:
        asked.append(base)
        return ServerFacts(("only",), "llamacpp")

    p = provider_settings(api_base=BASE, model="test-model")
    fitted = fit_to_server(p, tmp_path, probe)
    assert fitted.stream_tools is False and fitted.model == "test-model"
    assert fit_to_server(p, tmp_path, probe).stream_tools is False and asked == [BASE]  # cached
    vllm = replace(p, preset="vllm")
    assert fit_to_server(vllm, tmp_path, probe) == vllm  # a preset says what the server is
    nameless = fit_to_server(provider_settings(api_base=BASE, model=""), tmp_path, probe)
    assert nameless.model == "only" and len(asked) == 2  # the model is asked each time


def test_no_single_model_is_a_config_error_naming_them(tmp_path: Path) -> None:
    p = provider_settings(api_base=BASE, model="")
    with pytest.raises(ConfigError) as err:
        fit_to_server(p, tmp_path, lambda b, h: ServerFacts(("a", "b"), None))
    assert "has 2 (a, b)" in str(err.value) and "COUNTBOT_MODEL" in err.value.user_message()
    with pytest.raises(ConfigError) as err:
        fit_to_server(p, tmp_path, lambda b, h: None)
    assert "did not answer" in str(err.value)


def test_the_kind_known_without_asking_comes_from_the_preset_or_what_the_server_said(
    tmp_path: Path,
) -> None:
    from countbot_cli.provider.context_window_probe import ProbeCache
    from countbot_cli.provider.server_facts import cache_path, known_kind

    p = provider_settings(api_base="http://h:1/v1")
    assert known_kind(p, tmp_path) is None
    assert known_kind(replace(p, preset="llamacpp"), tmp_path) == "llamacpp"
    assert known_kind(replace(p, preset="ollama"), tmp_path) == "ollama"
    assert known_kind(replace(p, preset="vllm"), tmp_path) == "vllm"
    assert known_kind(replace(p, preset="lmstudio"), tmp_path) == "lmstudio"
    assert known_kind(replace(p, preset="openai"), tmp_path) is None
    ProbeCache(cache_path(tmp_path)).write_row("http://h:1/v1", {"llamacpp": True})
    assert known_kind(p, tmp_path) == "llamacpp"  # a row written before the kind was kept
    ProbeCache(cache_path(tmp_path)).write_row("http://h:1/v1", {"kind": "ollama"})
    assert known_kind(p, tmp_path) == "ollama"
