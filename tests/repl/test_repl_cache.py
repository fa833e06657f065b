"""`/context` says what changed since the previous request and whether the cache missed:
`/system`, `/model` and an idle gap (fake clock) in the chat, and the usage line's short form
of a miss; with prices, what the cache saved in the usage line and /tokens."""

from __future__ import annotations

from typing import Any

import fakeserver as fs
import pytest
from cbenv import QUIET_MEMORY
from repl_harness import Harness

from countbot_cli.conversation import cache_report

MISS = fs.cached_usage(2000, 5, 0)
HIT = fs.cached_usage(2000, 5, 1900)
PRICES = {"test-model": {"input": 2.0, "cached_input": 0.5, "output": 8.0}}
USAGE = fs.cached_usage(1200, 85, 1100)
SAVED = 1100 * (2.0 - 0.5) / 1_000_000  # what the cache saved a turn


def changes_rows(out: str) -> list[str]:
    return [ln.strip() for ln in out.splitlines() if "since the previous request:" in ln]


def test_context_names_system_and_model_changes(harness: Any, server: fs.FakeServer) -> None:
    h = harness(**QUIET_MEMORY)
    server.add(
        fs.text("one", usage=MISS),
        fs.text("two", usage=HIT),
        fs.text("three", usage=MISS),
        fs.text("four", usage=MISS),
    )
    h.run(
        [
            "hello\r",
            "/context\r",
            "again\r",
            "/context\r",
            "/system Answer in French.\r",
            "and now\r",
            "/context\r",
            "/model other-model\r",
            "last one\r",
            "/context\r",
        ]
    )
    assert changes_rows(h.text()) == [
        "since the previous request: none to compare with (the first of this session)",
        "since the previous request: nothing in the head, history or model changed",
        "since the previous request: system prompt changed — the cache missed",
        "since the previous request: model changed (test/test-model → test/other-model)"
        " — the cache missed",
    ]
    side = h.err.getvalue()
    assert "cache miss: system prompt changed" in side  # the usage line, in short
    assert side.count("cache miss") == 2  # the first turn and the hit say nothing


def test_context_names_an_idle_gap(
    harness: Any, server: fs.FakeServer, monkeypatch: pytest.MonkeyPatch
) -> None:
    h = harness(provider={"preset": "openai"}, **QUIET_MEMORY)
    now = [1_000_000.0]
    monkeypatch.setattr(cache_report, "clock", lambda: now[0])

    def later(h: Harness) -> None:
        h.wait_for("one")
        now[0] += 12 * 60

    server.add(fs.text("one", usage=MISS), fs.text("two", usage=MISS))
    h.run(["hello\r", later, "again\r", "/context\r"])
    assert changes_rows(h.text()) == [
        "since the previous request: idle 12 min > the provider's 5 min cache lifetime"
        " — the cache missed"
    ]


def test_the_chat_shows_what_the_cache_saved(harness: Any, server: fs.FakeServer) -> None:
    h = harness(prices=PRICES)
    server.add(fs.text("one", usage=USAGE), fs.text("two", usage=USAGE))
    h.run(["hi\r", "again\r", "/tokens\r"])
    side = " ".join(h.err.getvalue().split())  # the console wraps at 100 columns
    assert f"cache saved {SAVED:.4f} (today {SAVED:.4f})" in side
    assert f"cache saved {SAVED:.4f} (today {2 * SAVED:.4f})" in side
    out = h.text()
    assert f"· cache saved {2 * SAVED:.4f}" in out.split("this session so far:")[1].splitlines()[0]
    assert "today, all sessions: cost" in out and f"· cache saved {2 * SAVED:.4f}" in out


def test_context_names_a_pinned_line_and_the_window_step(
    harness: Any, server: fs.FakeServer
) -> None:
    from countbot_cli.memory.marks import set_mark
    from countbot_cli.memory.store import MemoryStore

    h = harness(persona={"max_history_messages": 4}, **QUIET_MEMORY)
    server.add(*(fs.text(f"answer {k}", usage=MISS) for k in range(1, 5)))

    def pin(h: Harness) -> None:
        h.wait_for("answer 2")
        set_mark(MemoryStore(h.cb.memory_file), 1, "pinned", True)  # `countbot memory pin 1`

    h.run(
        [
            "/memory add The user likes green tea\r",
            "one\r",
            "two\r",
            pin,
            "three\r",
            "/context\r",
            "four\r",
            "/context\r",
        ]
    )
    assert changes_rows(h.text()) == [
        "since the previous request: pinned line changed — the cache missed",
        "since the previous request: window stepped (4 messages archived) — the cache missed",
    ]
