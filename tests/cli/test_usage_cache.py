"""Cached prompt tokens and cost, as a user sees them: each provider's
way of reporting its prompt cache ends up in `ask --json`, the saved session, `sessions show`
and the REPL's usage line; prices from the config give per-turn, per-session and per-day cost;
a bad price is a config error naming file, line and key."""

from __future__ import annotations

import json
from datetime import date
from pathlib import Path
from typing import Any

import fakeserver as fs
import pytest
from cbenv import make_cb

from countbot_cli.messages import Usage
from countbot_cli.provider.assemble import Assembler

# (name, usage object as the provider sends it, cached tokens countbot should read)
SHAPES: list[tuple[str, dict[str, Any], int | None]] = [
    (
        "openai",
        {
            "prompt_tokens": 1200,
            "completion_tokens": 85,
            "total_tokens": 1285,
            "prompt_tokens_details": {"cached_tokens": 1100, "audio_tokens": 0},
        },
        1100,
    ),
    (
        "deepseek",
        {
            "prompt_tokens": 1200,
            "completion_tokens": 85,
            "total_tokens": 1285,
            "prompt_cache_hit_tokens": 1024,
            "prompt_cache_miss_tokens": 176,
        },
        1024,
    ),
    (
        "llama.cpp server",  # and vLLM: the OpenAI field
        {
            "prompt_tokens": 1200,
            "completion_tokens": 85,
            "prompt_tokens_details": {"cached_tokens": 900},
        },
        900,
    ),
    ("none reported", {"prompt_tokens": 1200, "completion_tokens": 85, "total_tokens": 1285}, None),
]


@pytest.mark.parametrize(("name", "usage", "cached"), SHAPES, ids=[s[0] for s in SHAPES])
def test_cached_tokens_reach_json_session_and_sessions_show(
    tmp_path: Path, server: fs.FakeServer, name: str, usage: dict[str, Any], cached: int | None
) -> None:
    cb = make_cb(tmp_path, server.base_url)
    server.add(fs.text("first", usage=usage), fs.text("second", usage=usage))
    proc = cb.invoke("ask", "--json", "hello")
    assert proc.returncode == 0, proc.stderr
    got = json.loads(proc.stdout)["usage"]
    assert got["prompt_tokens"] == 1200 and got["completion_tokens"] == 85
    assert got.get("cached_tokens") == cached
    assert ("cached_tokens" in got) == (cached is not None)
    assert "cost" not in got  # no prices set: no cost anywhere
    sid = json.loads(proc.stdout)["session_id"]
    assert cb.invoke("ask", "-s", sid, "again").returncode == 0
    saved = cb.only_session()["usage"]
    assert saved["prompt_tokens"] == 2400
    assert saved.get("cached_tokens") == (None if cached is None else 2 * cached)
    shown = cb.invoke("sessions", "show", sid).stdout
    assert "tokens 2400 in" in shown
    if cached is None:
        assert "cached" not in shown
    else:
        assert f"tokens 2400 in ({2 * cached:,} cached) / 170 out" in shown


def test_llama_cpp_timings_cache_n_is_read_when_usage_has_no_details() -> None:
    acc = Assembler()
    acc.add_object({"choices": [{"index": 0, "delta": {"content": "hi"}, "finish_reason": "stop"}]})
    acc.add_object(
        {
            "choices": [],
            "usage": {"prompt_tokens": 50, "completion_tokens": 2},
            "timings": {"cache_n": 40, "prompt_n": 10},
        }
    )
    usage = acc.finish(True).usage
    assert usage is not None and usage.cached_tokens == 40


def test_usage_from_api_keeps_cached_within_the_prompt_and_ignores_junk() -> None:
    deepseek = Usage.from_api({"prompt_cache_hit_tokens": 30, "prompt_cache_miss_tokens": 10})
    assert deepseek is not None
    assert (deepseek.prompt_tokens, deepseek.cached_tokens) == (40, 30)
    odd = Usage.from_api({"prompt_tokens": 5, "prompt_tokens_details": {"cached_tokens": 9}})
    assert odd is not None and odd.cached_tokens == 5
    junk = Usage.from_api({"prompt_tokens": 5, "prompt_tokens_details": {"cached_tokens": "x"}})
    assert junk is not None and junk.cached_tokens is None


def test_session_files_without_cached_tokens_or_cost_still_load(
    tmp_path: Path, server: fs.FakeServer
) -> None:
    cb = make_cb(tmp_path, server.base_url)
    server.add(fs.text("a", usage={"prompt_tokens": 10, "completion_tokens": 2}))
    assert cb.invoke("ask", "x").returncode == 0
    path = cb.session_files()[0]
    data = json.loads(path.read_text(encoding="utf-8"))
    data["usage"] = {"prompt_tokens": 10, "completion_tokens": 2, "total_tokens": 12}  # old form
    path.write_text(json.dumps(data), encoding="utf-8")
    shown = cb.invoke("sessions", "show", data["id"])
    assert shown.returncode == 0 and "tokens 10 in / 2 out" in shown.stdout


PRICES = {"test-model": {"input": 2.0, "cached_input": 0.5, "output": 8.0}}


def test_prices_give_turn_session_and_day_cost(tmp_path: Path, server: fs.FakeServer) -> None:
    cb = make_cb(tmp_path, server.base_url, prices=PRICES)
    usage = SHAPES[0][1]  # 1200 in, 1100 of them cached, 85 out
    server.add(fs.text("a", usage=usage), fs.text("b", usage=usage))
    one = (100 * 2.0 + 1100 * 0.5 + 85 * 8.0) / 1_000_000
    proc = cb.invoke("ask", "--json", "x")
    assert proc.returncode == 0, proc.stderr
    obj = json.loads(proc.stdout)
    assert obj["usage"]["cost"] == pytest.approx(one)
    assert obj["cost_today"] == pytest.approx(one)  # the day's total so far, all sessions
    again = cb.invoke("ask", "--json", "-s", obj["session_id"], "y")
    assert json.loads(again.stdout)["cost_today"] == pytest.approx(2 * one)
    assert cb.only_session()["usage"]["cost"] == pytest.approx(2 * one)
    shown = cb.invoke("sessions", "show", obj["session_id"]).stdout
    assert f"cost {2 * one:.4f}" in shown
    days = json.loads((cb.work / "costs.json").read_text(encoding="utf-8"))
    assert days == {date.today().isoformat(): pytest.approx(2 * one)}


def _strict_json(text: str) -> Any:
    """json.loads that refuses NaN and Infinity, as every other JSON reader does."""

    def refuse(word: str) -> None:
        raise ValueError(f"{word} is not JSON")

    return json.loads(text, parse_constant=refuse)


@pytest.mark.parametrize("damaged", ["NaN", "Infinity", "-1e400", '"lots"', "[1, 2"])
def test_a_damaged_cost_tally_is_reported_moved_aside_and_never_printed(
    tmp_path: Path, server: fs.FakeServer, damaged: str
) -> None:
    """A non-finite (or otherwise damaged) amount in costs.json: `ask --json` stays valid JSON
    with a finite cost_today, the damage is named on stderr and the file moved aside, not
    lost; the good days are kept."""
    cb = make_cb(tmp_path, server.base_url, prices=PRICES)
    today = date.today().isoformat()
    tally = cb.work / "costs.json"
    text = f'{{"2026-01-01": 0.25, "{today}": {damaged}}}' if damaged != "[1, 2" else damaged
    tally.write_text(text, encoding="utf-8")
    usage = SHAPES[0][1]
    server.add(fs.text("a", usage=usage), fs.text("b", usage=usage))
    one = (100 * 2.0 + 1100 * 0.5 + 85 * 8.0) / 1_000_000
    proc = cb.invoke("ask", "--json", "x")
    assert proc.returncode == 0, proc.stderr
    obj = _strict_json(proc.stdout)
    assert obj["cost_today"] == pytest.approx(one)
    assert "costs.json held " in proc.stderr and "moved aside to costs.json.damaged-" in proc.stderr
    (aside,) = cb.work.glob("costs.json.damaged-*")
    assert aside.read_text(encoding="utf-8") == text  # the damaged file is kept as it was
    days = _strict_json(tally.read_text(encoding="utf-8"))
    kept = {} if damaged == "[1, 2" else {"2026-01-01": 0.25}
    assert days == {**kept, today: pytest.approx(one)}
    again = cb.invoke("ask", "--json", "-s", obj["session_id"], "y")  # the tally goes on
    assert _strict_json(again.stdout)["cost_today"] == pytest.approx(2 * one)
    assert "costs.json" not in again.stderr


def test_a_model_without_a_price_shows_no_cost(tmp_path: Path, server: fs.FakeServer) -> None:
    cb = make_cb(tmp_path, server.base_url, prices={"other-model": PRICES["test-model"]})
    server.add(fs.text("a", usage=SHAPES[0][1]))
    obj = json.loads(cb.invoke("ask", "--json", "x").stdout)
    assert "cost" not in obj["usage"] and "cost" not in cb.only_session()["usage"]
    assert "cost_today" not in obj
    assert not (cb.work / "costs.json").exists()


@pytest.mark.parametrize(
    ("price", "key", "message"),
    [
        ({"input": 0, "output": 1.0}, "prices.test-model.input", "must be more than 0"),
        ({"input": 1.0, "output": -2}, "prices.test-model.output", "must be at least 0"),
        ({"input": "cheap", "output": 1.0}, "prices.test-model.input", "expected a number"),
        ({"input": 1.0}, "prices.test-model.output", "missing"),
        ({"input": 1.0, "output": 1.0, "cache": 1}, "prices.test-model.cache", "unknown key"),
    ],
)
def test_a_bad_price_is_a_config_error_with_file_line_and_key(
    tmp_path: Path, server: fs.FakeServer, price: dict[str, Any], key: str, message: str
) -> None:
    cb = make_cb(tmp_path, server.base_url, prices={"test-model": price})
    proc = cb.invoke("ask", "x")
    assert proc.returncode == 2
    assert key in proc.stderr and message in proc.stderr
    # the line of the key itself, or of the price entry when a key is missing
    leaf = key.rsplit(".", 1)[1]
    lines = cb.config_file.read_text(encoding="utf-8").splitlines()
    want = [i + 1 for i, ln in enumerate(lines) if ln.strip().startswith(leaf + ":")]
    want = want or [i + 1 for i, ln in enumerate(lines) if ln.strip() == "test-model:"]
    assert f"{cb.config_file}:{want[0]} key '{key}'" in proc.stderr
    assert server.chat_bodies() == []
