"""The request layout per provider: on DeepSeek, whose cache hits only whole
persisted prefix units (a request's prompt, and its prompt with the answer), the recalled memory
lines sent with a question stay with it and are sent again with it, so every request starts with
the previous request and its answer exactly; a line a message of the window keeps already is not
sent again. Other providers keep the volatile tail (the lines with the current message only).
bench/bench_cache_rules.py measured the layouts against each rule."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import fakeserver as fs
import pytest
from cbenv import make_cb

TEA = "The user drinks green tea every morning"
REDIS = "Production Redis listens on port 6380"
OOLONG = "The user has oolong in the afternoon"
# two lines a question: the tea lines with the first, the redis and green tea lines with the second
MEMORY = {
    "memory": {
        "inject": "relevant",
        "overflow_summary": False,
        "auto_memory": False,
        "recall_lines": 2,
    }
}


def converse(tmp_path: Path, server: fs.FakeServer, provider: dict[str, Any]) -> Any:
    cb = make_cb(tmp_path, server.base_url, provider=provider, **MEMORY)
    for line in (TEA, REDIS, OOLONG):
        assert cb.invoke("memory", "add", line).returncode == 0
    server.add(fs.text("Sencha."), fs.text("Port 6380."))
    first = cb.invoke("ask", "--json", "which green tea should I drink")
    assert first.returncode == 0, first.stderr
    sid = json.loads(first.stdout)["session_id"]
    assert cb.invoke("ask", "-s", sid, "and the redis port, with my tea").returncode == 0
    return cb, server.chat_bodies()


def test_deepseek_keeps_recalled_lines_with_their_question(
    tmp_path: Path, server: fs.FakeServer
) -> None:
    cb, (one, two) = converse(tmp_path, server, {"preset": "deepseek"})
    sent_first = one["messages"][-1]["content"]
    assert TEA in sent_first and sent_first.endswith("which green tea should I drink")
    assert REDIS not in sent_first
    # the second request starts with the first request and its answer, exactly
    assert two["messages"][: len(one["messages"])] == one["messages"]
    assert two["messages"][len(one["messages"])] == {"role": "assistant", "content": "Sencha."}
    tail = two["messages"][-1]["content"]
    assert REDIS in tail and TEA not in tail  # the tea line is in the history already
    stored = cb.only_session()["messages"][0]
    assert stored["content"] == "which green tea should I drink"  # what the user typed
    assert TEA in stored["kept"]
    shown = cb.invoke("sessions", "show", cb.only_session()["id"]).stdout
    assert "which green tea should I drink" in shown and TEA not in shown


@pytest.mark.parametrize("provider", [{}, {"preset": "openai"}], ids=["unknown", "openai"])
def test_other_providers_keep_the_volatile_tail(
    tmp_path: Path, server: fs.FakeServer, provider: dict[str, Any]
) -> None:
    cb, (one, two) = converse(tmp_path, server, provider)
    assert TEA in one["messages"][-1]["content"]
    assert two["messages"][1] == {"role": "user", "content": "which green tea should I drink"}
    tail = two["messages"][-1]["content"]
    assert REDIS in tail and TEA in tail
    assert "kept" not in cb.only_session()["messages"][0]
