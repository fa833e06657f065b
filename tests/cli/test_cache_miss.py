"""Why a turn missed the prompt cache, through `ask --json` and the usage
line: each reason produced on purpose — the window stepping, a pinned line, the system prompt
(--system), another model, an idle gap past the provider's cache lifetime (fake clock) — and a
turn that extends the previous request reports no change and no miss."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import fakeserver as fs
import pytest
from cbenv import QUIET_MEMORY, make_cb

from countbot_cli.conversation import cache_report

HIT = fs.cached_usage(2000, 5, 1900)
MISS = fs.cached_usage(2000, 5, 0)


def ask_json(cb: Any, *args: str) -> dict[str, Any]:
    proc = cb.invoke("ask", "--json", *args)
    assert proc.returncode == 0, proc.stderr
    out: dict[str, Any] = json.loads(proc.stdout)
    return out


def test_a_turn_that_extends_the_previous_request_reports_no_change(
    tmp_path: Path, server: fs.FakeServer
) -> None:
    cb = make_cb(tmp_path, server.base_url, **QUIET_MEMORY)
    server.add(fs.text("one", usage=MISS), fs.text("two", usage=HIT))
    first = ask_json(cb, "hello")
    assert first["cache"] == {"previous_request": False, "changes": [], "missed": False}
    second = ask_json(cb, "-s", first["session_id"], "again")
    assert second["cache"] == {"previous_request": True, "changes": [], "missed": False}


def test_the_window_stepping_is_a_reason(tmp_path: Path, server: fs.FakeServer) -> None:
    cb = make_cb(tmp_path, server.base_url, persona={"max_history_messages": 4}, **QUIET_MEMORY)
    server.default = fs.text("ok", usage=MISS)
    sid = ask_json(cb, "one")["session_id"]
    reasons = [ask_json(cb, "-s", sid, word)["cache"]["changes"] for word in ("two", "three")]
    assert reasons == [[], []]  # the window grew: each request extends the previous one
    stepped = ask_json(cb, "-s", sid, "four")["cache"]
    assert stepped["changes"] == [
        {"reason": "window", "detail": "window stepped (4 messages archived)"}
    ]
    assert stepped["missed"] is True


def test_a_pinned_line_and_the_system_prompt_are_head_reasons(
    tmp_path: Path, server: fs.FakeServer
) -> None:
    cb = make_cb(tmp_path, server.base_url, **QUIET_MEMORY)
    server.default = fs.text("ok", usage=MISS)
    sid = ask_json(cb, "one")["session_id"]
    assert cb.invoke("memory", "add", "The user likes green tea").returncode == 0
    assert cb.invoke("memory", "pin", "1").returncode == 0
    pinned = ask_json(cb, "-s", sid, "two")["cache"]
    assert pinned["changes"] == [{"reason": "head", "detail": "pinned line changed"}]
    system = ask_json(cb, "-s", sid, "--system", "Answer in French.", "three")["cache"]
    assert system["changes"] == [{"reason": "head", "detail": "system prompt changed"}]
    proc = cb.invoke("ask", "-s", sid, "four")  # --system gone again
    assert "system prompt changed" not in proc.stderr  # stderr is no terminal: no usage line


def test_another_model_is_a_reason(tmp_path: Path, server: fs.FakeServer) -> None:
    cb = make_cb(tmp_path, server.base_url, **QUIET_MEMORY)
    server.default = fs.text("ok", usage=MISS)
    sid = ask_json(cb, "one")["session_id"]
    changed = ask_json(cb, "-s", sid, "-m", "other-model", "two")["cache"]
    detail = "model changed (test/test-model → test/other-model)"
    assert changed["changes"] == [{"reason": "model", "detail": detail}]


def test_an_idle_gap_past_the_cache_lifetime_is_a_reason(
    tmp_path: Path, server: fs.FakeServer, monkeypatch: pytest.MonkeyPatch
) -> None:
    cb = make_cb(tmp_path, server.base_url, provider={"preset": "openai"}, **QUIET_MEMORY)
    server.default = fs.text("ok", usage=MISS)
    now = [1_000_000.0]
    monkeypatch.setattr(cache_report, "clock", lambda: now[0])
    sid = ask_json(cb, "one")["session_id"]
    now[0] += 240  # within OpenAI's 5 minutes: no reason (the miss is the provider's doing)
    soon = ask_json(cb, "-s", sid, "two")["cache"]
    assert soon == {"previous_request": True, "changes": [], "missed": True}
    now[0] += 7 * 60
    late = ask_json(cb, "-s", sid, "three")["cache"]
    detail = "idle 7 min > the provider's 5 min cache lifetime"
    assert late["changes"] == [{"reason": "idle", "detail": detail}]


@pytest.mark.parametrize(("prompt", "missed"), [(900, False), (1100, True)])
def test_on_openai_a_prompt_under_1024_tokens_is_no_miss(
    tmp_path: Path, server: fs.FakeServer, prompt: int, missed: bool
) -> None:
    """OpenAI caches no prompt under 1,024 tokens: nothing read from the cache is no miss then."""
    cb = make_cb(tmp_path, server.base_url, provider={"preset": "openai"}, **QUIET_MEMORY)
    server.default = fs.text("ok", usage=fs.cached_usage(prompt, 5, 0))
    sid = ask_json(cb, "one")["session_id"]
    again = ask_json(cb, "-s", sid, "two")["cache"]
    assert again == {"previous_request": True, "changes": [], "missed": missed}


def test_the_usage_line_shows_a_miss_in_short() -> None:
    from countbot_cli.conversation.turn_record import ModelCall, TurnResult
    from countbot_cli.messages import Message, Usage
    from countbot_cli.ui.transcript import ask_usage, usage_line

    report = cache_report.CacheReport(
        changes=[("head", "pinned line changed")], previous=True, prev_prompt=2000
    )
    call = ModelCall("m", Usage(prompt_tokens=2000, completion_tokens=5, total_tokens=2005))
    user = Message(role="user", content="q")
    result = TurnResult(
        user=user, session_id="s", answer="a", model="m", calls=[call], cache=report
    )
    report.observe(Usage(prompt_tokens=2000, cached_tokens=0))
    assert "cache miss: pinned line changed" in usage_line(result, 1.0)
    assert "cache miss: pinned line changed" in ask_usage(result)
    report.observe(Usage(prompt_tokens=2000, cached_tokens=1900))
    assert "cache miss" not in usage_line(result, 1.0) + ask_usage(result)
