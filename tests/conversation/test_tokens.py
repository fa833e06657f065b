"""Token counting: offline encoding loading (no network ever), exact counts against the OpenAI
cookbook's published numbers, per-message cache, calibration, context windows, estimate."""

from __future__ import annotations

import os
import subprocess
import sys
import threading
from pathlib import Path
from typing import Any

import pytest
from bpe_files import PKG_DATA, seed_cache

from countbot_cli.conversation.tokens import (
    CL100K,
    DATA_ENV,
    DEFAULT_CONTEXT_WINDOW,
    DEFAULT_LOADER,
    O200K,
    SOURCE_CACHE,
    SOURCE_ESTIMATE,
    SOURCE_PACKAGE,
    EncodingLoader,
    TokenCounter,
    cache_file_for,
    context_window_for,
    encoding_for_model,
    estimate_tokens,
    is_openai_model,
)
from countbot_cli.messages import Message, ToolCall

# OpenAI cookbook "How_to_count_tokens_with_tiktoken" (openai-cookbook @ c81359c)
COOKBOOK_MESSAGES: list[dict[str, Any]] = [
    {
        "role": "system",
        "content": "You are a helpful, pattern-following assistant that translates corporate jargon into plain English.",
    },
    {
        "role": "system",
        "name": "example_user",
        "content": "New synergies will help drive top-line growth.",
    },
    {
        "role": "system",
        "name": "example_assistant",
        "content": "Things working well together will increase revenue.",
    },
    {
        "role": "system",
        "name": "example_user",
        "content": "Let's circle back when we have more bandwidth to touch base on opportunities for increased leverage.",
    },
    {
        "role": "system",
        "name": "example_assistant",
        "content": "Let's talk later when we're less busy about how to do better.",
    },
    {
        "role": "user",
        "content": "This late pivot means we don't have time to boil the ocean for the client deliverable.",
    },
]
COOKBOOK_TOOLS: list[dict[str, Any]] = [
    {
        "type": "function",
        "function": {
            "name": "get_current_weather",
            "description": "Get the current weather in a given location",
            "parameters": {
                "type": "object",
                "properties": {
                    "location": {
                        "type": "string",
                        "description": "The city and state, e.g. San Francisco, CA",
                    },
                    "unit": {
                        "type": "string",
                        "description": "The unit of temperature to return",
                        "enum": ["celsius", "fahrenheit"],
                    },
                },
                "required": ["location"],
            },
        },
    }
]
COOKBOOK_TOOL_MESSAGES = [
    {
        "role": "system",
        "content": "You are a helpful assistant that can answer to questions about the weather.",
    },
    {"role": "user", "content": "What's the weather like in San Francisco?"},
]


# ---- loading ----


def test_import_loads_nothing() -> None:
    code = "import sys, countbot_cli.conversation.tokens, countbot_cli.conversation.trim; print({'tiktoken', 'regex'} & set(sys.modules))"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "set()"


def test_offline_load_uses_package_and_never_the_network(
    no_network: list[str], monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    monkeypatch.delenv(DATA_ENV, raising=False)
    monkeypatch.setenv("TIKTOKEN_CACHE_DIR", str(tmp_path / "no-such-cache"))
    loader = EncodingLoader()
    counter = TokenCounter("gpt-4", loader=loader)
    assert not counter.ready
    assert counter.count_text("hello world") == 2
    assert counter.ready and counter.source == SOURCE_PACKAGE and counter.exact
    assert no_network == []
    assert not (tmp_path / "no-such-cache").exists()  # nothing written into tiktoken's cache


def test_tiktoken_cache_is_used_when_present(no_network: list[str], tmp_path: Path) -> None:
    seed_cache(tmp_path / "cache", CL100K)
    loader = EncodingLoader(data_dir=tmp_path / "missing", cache_dir=tmp_path / "cache")
    counter = TokenCounter("gpt-3.5-turbo", loader=loader)
    assert counter.count_text("hello world") == 2
    assert counter.source == SOURCE_CACHE
    assert no_network == []


def test_corrupt_cache_file_is_ignored_not_refetched(no_network: list[str], tmp_path: Path) -> None:
    bad = cache_file_for(CL100K, tmp_path)
    bad.write_bytes(b"aGVsbG8= 0\n")  # parses, but not tiktoken's sha256
    loader = EncodingLoader(data_dir=tmp_path / "missing", cache_dir=tmp_path)
    counter = TokenCounter("gpt-4", loader=loader)
    assert counter.count_text("hello world") == estimate_tokens("hello world") == 3
    assert counter.source == SOURCE_ESTIMATE and not counter.exact
    assert bad.exists() and no_network == []


def test_estimate_fallback_through_env_seam(
    no_network: list[str], monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    monkeypatch.setenv(DATA_ENV, str(tmp_path / "missing"))
    monkeypatch.setenv("TIKTOKEN_CACHE_DIR", str(tmp_path / "empty"))
    counter = TokenCounter("gpt-4o", loader=EncodingLoader())
    assert counter.count_text("你好，世界") == 5  # 4 ideographs + 1 full-width comma
    assert counter.count_message(Message("user", "hello world")) == 3 + 1 + 3
    assert counter.source == SOURCE_ESTIMATE
    assert no_network == []


def test_estimate_rules() -> None:
    assert estimate_tokens("") == 0
    assert estimate_tokens("abcd") == 1 and estimate_tokens("abcde") == 2
    assert estimate_tokens("こんにちは") == 5
    assert estimate_tokens("привет") == 3  # 12 UTF-8 bytes / 4
    assert estimate_tokens("a\U0001f600") == 2  # 1 + 4 bytes


def test_concurrent_first_use_loads_once(tmp_path: Path) -> None:
    loader = EncodingLoader(data_dir=PKG_DATA, cache_dir=tmp_path)
    results: list[Any] = []
    threads = [
        threading.Thread(target=lambda: results.append(loader.load(CL100K))) for _ in range(4)
    ]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert len(results) == 4 and results[0] is not None
    assert all(r is results[0] for r in results)


def test_preload_in_background() -> None:
    counter = TokenCounter("gpt-4o-mini")
    thread = counter.preload()
    assert thread is not None
    thread.join(timeout=30)
    assert counter.ready and counter.exact


def test_same_tokens_as_stock_tiktoken(tmp_path: Path) -> None:
    """Stock tiktoken reading a seeded cache is the oracle for our directly built encodings."""
    sample = "def f(x):\n    return x ** 2  # 平方\n\nnaïve café — 🙂 <|endoftext|> 12345678"
    for name in (O200K, CL100K):
        seed_cache(tmp_path, name)
    code = (
        "import sys, tiktoken\n"
        "for n in ('o200k_base', 'cl100k_base'):\n"
        "    print(tiktoken.get_encoding(n).encode_ordinary(sys.argv[1]))\n"
    )
    env = {**os.environ, "TIKTOKEN_CACHE_DIR": str(tmp_path)}
    out = subprocess.run(
        [sys.executable, "-c", code, sample], capture_output=True, text=True, env=env, check=True
    )
    ours = [DEFAULT_LOADER.load(n).encode_ordinary(sample) for n in (O200K, CL100K)]  # type: ignore[union-attr]
    assert out.stdout.splitlines() == [str(t) for t in ours]


# ---- exact counts ----


@pytest.mark.parametrize(
    ("name", "text", "ids"),
    [
        (O200K, "tiktoken is great!", [83, 8251, 2488, 382, 2212, 0]),
        (O200K, "antidisestablishmentarianism", [493, 129901, 376, 160388, 21203, 2367]),
        (O200K, "2 + 2 = 4", [17, 659, 220, 17, 314, 220, 19]),
        (O200K, "お誕生日おめでとう", [8930, 9697, 243, 128225, 8930, 17693, 4344, 48669]),
        (CL100K, "antidisestablishmentarianism", [519, 85342, 34500, 479, 8997, 2191]),
        (CL100K, "2 + 2 = 4", [17, 489, 220, 17, 284, 220, 19]),
        (
            CL100K,
            "お誕生日おめでとう",
            [33334, 45918, 243, 21990, 9080, 33334, 62004, 16556, 78699],
        ),
    ],
)
def test_cookbook_encodings(name: str, text: str, ids: list[int]) -> None:
    enc = DEFAULT_LOADER.load(name)
    assert enc is not None and enc.encode(text) == ids
    assert TokenCounter("x", encoding_name=name).count_text(text) == len(ids)


def test_hello_world_and_special_token_text() -> None:
    assert TokenCounter("gpt-4o").count_text("hello world") == 2
    assert TokenCounter("gpt-4").count_text("hello world") == 2
    assert TokenCounter("gpt-4o").count_text("<|endoftext|>") > 1  # plain text, no error


@pytest.mark.parametrize(
    ("model", "expected"),
    [("gpt-4o", 124), ("gpt-4o-mini", 124), ("gpt-4", 129), ("gpt-3.5-turbo", 129)],
)
def test_cookbook_message_overhead(model: str, expected: int) -> None:
    counter = TokenCounter(model)
    assert counter.count_messages(COOKBOOK_MESSAGES) == expected  # = the API's prompt_tokens
    as_messages = [Message(d["role"], d["content"], name=d.get("name")) for d in COOKBOOK_MESSAGES]
    assert TokenCounter(model).count_messages(as_messages) == expected


@pytest.mark.parametrize(
    ("model", "expected"),
    [("gpt-4o", 101), ("gpt-4o-mini", 101), ("gpt-4", 105), ("gpt-3.5-turbo", 105)],
)
def test_cookbook_tools(model: str, expected: int) -> None:
    counter = TokenCounter(model)
    assert (
        counter.count_messages(COOKBOOK_TOOL_MESSAGES) + counter.count_tools(COOKBOOK_TOOLS)
        == expected
    )
    assert counter.count_tools([]) == 0


def test_message_parts_and_tool_calls() -> None:
    counter = TokenCounter("gpt-4o")
    assert counter.count_message(Message("user", "hello world")) == 3 + 1 + 2
    assert counter.count_messages([Message("user", "hello world")]) == 3 + 1 + 2 + 3
    assert counter.count_messages([]) == 3
    call = ToolCall("call_1", "read_file", '{"path": "README.md"}')
    with_call = Message("assistant", "", tool_calls=[call])
    expected = 3 + 1 + 3 + counter.count_text("read_file") + counter.count_text(call.arguments)
    assert counter.count_message(with_call) == expected
    assert counter.count_message(with_call.to_api()) == expected
    result = Message("tool", "file text", tool_call_id="call_1", name="read_file")
    assert counter.count_message(result) == counter.count_message(result.to_api())
    parts = {
        "role": "user",
        "content": [{"type": "text", "text": "hello world"}, {"type": "image_url"}],
    }
    assert counter.count_message(parts) == 3 + 1 + 2 + 85


def test_nested_tool_schema_counts_more() -> None:
    counter = TokenCounter("gpt-4o")
    flat = {"name": "f", "description": "d", "parameters": {"properties": {"a": {"type": "array"}}}}
    nested = {
        "name": "f",
        "description": "d",
        "parameters": {"properties": {"a": {"type": "array", "items": {"type": "string"}}}},
    }
    assert counter.count_tools([nested]) > counter.count_tools([flat]) > 0


# ---- cache ----


def test_cache_hits_and_invalidation() -> None:
    counter = TokenCounter("gpt-4o")
    msgs = [Message("user" if i % 2 else "assistant", f"message number {i}") for i in range(1000)]
    first = counter.count_messages(msgs)
    assert (counter.misses, counter.hits) == (1000, 0)
    assert counter.count_messages(msgs) == first
    assert (counter.misses, counter.hits) == (1000, 1000)
    msgs[10].content += " and a few more words"  # an edited message is counted again
    assert counter.count_messages(msgs) > first
    assert (counter.misses, counter.hits) == (1001, 1999)


def test_ten_thousand_message_recount_is_cheap(monkeypatch: pytest.MonkeyPatch) -> None:
    counter = TokenCounter("gpt-4o")
    counter.preload(background=False)
    text = "The quick brown fox jumps over the lazy dog; 敏捷的棕色狐狸跳过了懒狗. " * 3
    msgs = [Message("user" if i % 2 else "assistant", f"{i}: {text}") for i in range(10_000)]
    encoded: list[int] = []
    real_text = counter._text
    monkeypatch.setattr(counter, "_text", lambda t: encoded.append(len(t)) or real_text(t))
    cold = counter.count_messages(msgs)
    assert len(encoded) == 20_000  # role and content of each message, once
    encoded.clear()
    warm = counter.count_messages(msgs)
    assert cold == warm and counter.hits == 10_000
    assert encoded == []  # lookups only: nothing is tokenized again


# ---- calibration ----


def test_calibration_for_non_openai_model() -> None:
    counter = TokenCounter("deepseek-chat")
    assert counter.encoding_name == CL100K and not counter.exact and counter.ratio == 1.0
    msgs = [Message("user", "word " * 200)]
    raw = counter.count_messages(msgs)
    assert counter.calibrate(raw, int(raw * 1.5)) == pytest.approx(1.5, rel=0.01)
    scaled = counter.count_messages(msgs)
    assert scaled == pytest.approx(raw * 1.5, abs=2)
    # the provider agrees with the scaled estimate: the ratio stays
    before = counter.ratio
    assert counter.calibrate(scaled, scaled) == pytest.approx(before)
    # a later sample is averaged in, not taken as is
    ratio = counter.calibrate(scaled, raw)  # observed ratio 1.0
    assert ratio == pytest.approx((1.5 + 1.0) / 2, rel=0.01)


def test_calibration_clamp_small_samples_and_openai() -> None:
    counter = TokenCounter("qwen-plus")
    assert counter.calibrate(10, 40) == 1.0  # under 64 tokens: ignored
    assert counter.calibrate(100, 1000) == 2.0  # clamped
    assert TokenCounter("llama3.1").calibrate(1000, 10) == 0.5
    exact = TokenCounter("gpt-4o")
    before = exact.count_text("hello world " * 50)
    assert exact.calibrate(200, 300) == 1.5  # learned, but the tokenizer is exact: not applied
    assert exact.count_text("hello world " * 50) == before


# ---- model families and context windows ----


def test_encoding_for_model() -> None:
    for model in (
        "gpt-4o",
        "gpt-4o-mini",
        "gpt-4.1-nano",
        "gpt-5",
        "o1",
        "o3-mini",
        "o4-mini",
        "chatgpt-4o-latest",
        "openai/gpt-4o",
        "ft:gpt-4o-mini:org::x",
    ):
        assert encoding_for_model(model) == O200K, model
    for model in (
        "gpt-4",
        "gpt-4-turbo",
        "gpt-3.5-turbo",
        "deepseek-chat",
        "qwen-plus",
        "llama3.1:8b",
        "glm-4",
        "",
    ):
        assert encoding_for_model(model) == CL100K, model
    assert is_openai_model("gpt-4o") and is_openai_model("gpt-35-turbo")
    assert not is_openai_model("deepseek-chat") and not is_openai_model("SmolLM2-135M")


@pytest.mark.parametrize(
    ("model", "window"),
    [
        ("gpt-4o", 128_000),
        ("gpt-4o-mini", 128_000),
        ("openai/gpt-4o-mini", 128_000),
        ("gpt-4.1-mini", 1_047_576),
        ("gpt-5-mini", 400_000),
        ("o1-mini", 128_000),
        ("o1", 200_000),
        ("o3-mini", 200_000),
        ("o4-mini", 200_000),
        ("gpt-4", 8_192),
        ("gpt-4-turbo-preview", 128_000),
        ("gpt-4-32k", 32_768),
        ("gpt-3.5-turbo", 16_385),
        ("deepseek-chat", 128_000),
        ("deepseek-reasoner", 128_000),
        ("qwen-max", 32_768),
        ("qwen-plus", 131_072),
        ("qwen-turbo", 131_072),
        ("moonshot-v1-8k", 8_192),
        ("moonshot-v1-32k", 32_768),
        ("moonshot-v1-128k", 131_072),
        ("glm-4-plus", 128_000),
        ("glm-4.6", 200_000),
        ("llama3.1:8b", 131_072),
        ("meta-llama/Llama-3.3-70B-Instruct", 131_072),
        ("llama3:8b", 8_192),
        ("SmolLM2-135M-Instruct", 8_192),
        ("/models/SmolLM2-135M-Instruct.Q4_1.gguf", 8_192),
        ("some-unknown-model", DEFAULT_CONTEXT_WINDOW),
    ],
)
def test_context_window_lookup(model: str, window: int) -> None:
    assert context_window_for(model) == window


def test_context_window_override() -> None:
    assert DEFAULT_CONTEXT_WINDOW == 8192
    assert context_window_for("gpt-4o", 32_000) == 32_000
    assert context_window_for("unknown", 65_536) == 65_536
    assert context_window_for("gpt-4o", None) == context_window_for("gpt-4o", 0) == 128_000


def test_counters_of_one_model_share_their_counts() -> None:
    """The budget's, the toolbar's and the memory keeper's counters: a message counted by one
    is a lookup for the others, and so is a long text."""
    msgs = [Message("user", f"shared message {i} " * 20) for i in range(50)]
    first, second = TokenCounter("gpt-4o"), TokenCounter("gpt-4o")
    total = first.count_messages(msgs)
    assert second.count_messages(msgs) == total and (second.hits, second.misses) == (50, 0)
    long_text = "a fairly long text to count once. " * 500
    n = first.count_text(long_text)
    assert TokenCounter("gpt-4o").count_text(long_text) == n  # the default loader's share


def test_a_text_over_the_exact_limit_is_estimated_from_samples(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    from countbot_cli.conversation import tokens

    counter = TokenCounter("gpt-4o")
    counter.preload(background=False)
    enc = counter._encoding()
    assert enc is not None
    real = enc.encode_ordinary
    seen: list[int] = []

    def encode_ordinary(text: str) -> list[int]:
        seen.append(len(text))
        return real(text)

    for text in (
        "q" * (tokens.EXACT_MAX_CHARS + 1),  # one run of a letter: about 2 characters a token
        "The quick brown fox jumps over the lazy dog. " * 7000,  # prose: about 4.5
    ):
        exact = len(real(text))
        seen.clear()
        with monkeypatch.context() as m:
            m.setattr(enc, "encode_ordinary", encode_ordinary)
            n = counter.count_text(text)
        assert abs(n - exact) <= exact * 0.01, (n, exact)
        assert len(seen) == tokens.SAMPLES and max(seen) <= tokens.SAMPLE_CHARS
