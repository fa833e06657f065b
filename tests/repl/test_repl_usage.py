"""The REPL's usage line and /tokens with cached prompt tokens and prices (issue 11 items 3, 4)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import fakeserver as fs
import pytest
from test_repl import Harness

OPENAI = {
    "prompt_tokens": 1234,
    "completion_tokens": 56,
    "prompt_tokens_details": {"cached_tokens": 1100},
}
DEEPSEEK = {
    "prompt_tokens": 1234,
    "completion_tokens": 56,
    "prompt_cache_hit_tokens": 1100,
    "prompt_cache_miss_tokens": 134,
}


@pytest.mark.parametrize("usage", [OPENAI, DEEPSEEK], ids=["openai", "deepseek"])
def test_usage_line_and_tokens_show_the_cached_prompt(
    tmp_path: Path, server: fs.FakeServer, usage: dict[str, Any]
) -> None:
    h = Harness(tmp_path, server)
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


def test_a_provider_reporting_no_cache_shows_none(tmp_path: Path, server: fs.FakeServer) -> None:
    h = Harness(tmp_path, server)
    server.add(fs.text("one", usage={"prompt_tokens": 1234, "completion_tokens": 56}))
    h.run(["hi\r", "/tokens\r"])
    assert "1,234 in · 56 out tokens" in h.err.getvalue()
    assert "cached" not in h.err.getvalue() and "cached" not in h.text()
    assert "cached_tokens" not in h.session_data()["usage"]


def test_prices_show_turn_session_and_day_cost(tmp_path: Path, server: fs.FakeServer) -> None:
    prices = {"test-model": {"input": 3.0, "cached_input": 0.3, "output": 15.0}}
    h = Harness(tmp_path, server, prices=prices)
    server.add(fs.text("one", usage=OPENAI), fs.text("two", usage=OPENAI))
    h.run(["hi\r", "again\r", "/tokens\r"])
    turn = (134 * 3.0 + 1100 * 0.3 + 56 * 15.0) / 1_000_000  # 0.001572
    assert h.err.getvalue().count(f"1,234 in (1,100 cached) · 56 out tokens · cost {turn:.4f}") == 2
    out = h.text()
    assert f"this session so far: 2,468 in (2,200 cached) · 112 out · cost {2 * turn:.4f}" in out
    assert f"today, all sessions: cost {2 * turn:.4f}" in out
