"""What the prompt cache saved, with prices configured: per turn, per
session and per day, beside the cost — in `ask --json`, the session file, `sessions show`,
and the chat's usage line and `/tokens`. Without `cached_input` no saving is shown, nor for a
provider that reports no cache figure."""

from __future__ import annotations

import json
from datetime import date
from pathlib import Path

import fakeserver as fs
import pytest
from cbenv import make_cb

PRICES = {"test-model": {"input": 2.0, "cached_input": 0.5, "output": 8.0}}
USAGE = fs.cached_usage(1200, 85, 1100)
SAVED = 1100 * (2.0 - 0.5) / 1_000_000  # 0.00165 a turn


def test_saved_per_turn_session_and_day(tmp_path: Path, server: fs.FakeServer) -> None:
    cb = make_cb(tmp_path, server.base_url, prices=PRICES)
    server.add(fs.text("a", usage=USAGE), fs.text("b", usage=USAGE))
    one = json.loads(cb.invoke("ask", "--json", "x").stdout)
    assert one["usage"]["saved"] == pytest.approx(SAVED)
    assert one["saved_today"] == pytest.approx(SAVED)
    two = json.loads(cb.invoke("ask", "--json", "-s", one["session_id"], "y").stdout)
    assert two["usage"]["saved"] == pytest.approx(SAVED)  # this turn's
    assert two["saved_today"] == pytest.approx(2 * SAVED)  # the day's, all sessions
    assert cb.only_session()["usage"]["saved"] == pytest.approx(2 * SAVED)
    shown = cb.invoke("sessions", "show", one["session_id"]).stdout
    assert f"cache saved {2 * SAVED:.4f}" in shown
    days = json.loads((cb.work / "cache_savings.json").read_text(encoding="utf-8"))
    assert days == {date.today().isoformat(): pytest.approx(2 * SAVED)}


@pytest.mark.parametrize(
    ("prices", "usage", "saved"),
    [
        ({"test-model": {"input": 2.0, "output": 8.0}}, USAGE, None),  # no cached price
        (PRICES, {"prompt_tokens": 1200, "completion_tokens": 85}, None),  # no cache figure
    ],
    ids=["no cached_input", "no cache reported"],
)
def test_no_discount_saves_nothing_and_no_figure_shows_nothing(
    tmp_path: Path,
    server: fs.FakeServer,
    prices: dict[str, object],
    usage: dict[str, int],
    saved: float | None,
) -> None:
    cb = make_cb(tmp_path, server.base_url, prices=prices)
    server.add(fs.text("a", usage=usage))
    obj = json.loads(cb.invoke("ask", "--json", "x").stdout)
    assert obj["usage"].get("saved") == saved
    assert ("saved_today" in obj) == (saved is not None)


def test_both_tallies_damaged_are_both_named(tmp_path: Path, server: fs.FakeServer) -> None:
    """costs.json and cache_savings.json each holding a non-finite amount: each is moved aside
    and each is named on stderr (one notice did not hide the other)."""
    cb = make_cb(tmp_path, server.base_url, prices=PRICES)
    today = date.today().isoformat()
    (cb.work / "costs.json").write_text(f'{{"{today}": NaN}}', encoding="utf-8")
    (cb.work / "cache_savings.json").write_text(f'{{"{today}": Infinity}}', encoding="utf-8")
    server.add(fs.text("a", usage=USAGE))
    proc = cb.invoke("ask", "--json", "x")
    assert proc.returncode == 0, proc.stderr
    obj = json.loads(proc.stdout)
    assert obj["saved_today"] == pytest.approx(SAVED)
    for name in ("costs.json", "cache_savings.json"):
        assert f"{name} held not a finite amount" in proc.stderr, proc.stderr
        assert len(list(cb.work.glob(f"{name}.damaged-*"))) == 1
