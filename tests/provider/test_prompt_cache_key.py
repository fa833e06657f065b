"""`prompt_cache_key`: an OpenAI-type provider (the `openai` preset, or any
provider with `prompt_cache_key: true`) gets the session id as `prompt_cache_key`, so one
conversation is routed to one prompt cache; a provider not configured to take it never sees the
field (a strict server would reject an unknown one)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import fakeserver as fs
import pytest
from cbenv import make_cb


@pytest.mark.parametrize(
    ("provider", "sent"),
    [
        ({"preset": "openai"}, True),
        ({"preset": "openai", "prompt_cache_key": False}, False),
        ({}, False),  # an OpenAI-compatible server of unknown kind
        ({"preset": "deepseek"}, False),
        ({"prompt_cache_key": True}, True),
    ],
    ids=["openai preset", "turned off", "unknown server", "deepseek", "turned on"],
)
def test_prompt_cache_key_is_the_session_id_where_configured(
    tmp_path: Path, server: fs.FakeServer, provider: dict[str, Any], sent: bool
) -> None:
    cb = make_cb(tmp_path, server.base_url, provider=provider)
    server.add(fs.text("one"), fs.text("two"))
    first = cb.invoke("ask", "--json", "hello")
    assert first.returncode == 0, first.stderr
    sid = json.loads(first.stdout)["session_id"]
    assert cb.invoke("ask", "-s", sid, "again").returncode == 0
    bodies = server.chat_bodies()
    if sent:
        assert [b["prompt_cache_key"] for b in bodies] == [sid, sid]
    else:
        assert all("prompt_cache_key" not in b for b in bodies)


def test_a_bad_prompt_cache_key_value_is_a_config_error(
    tmp_path: Path, server: fs.FakeServer
) -> None:
    cb = make_cb(tmp_path, server.base_url, provider={"prompt_cache_key": "yes please"})
    proc = cb.invoke("ask", "hello")
    assert proc.returncode == 2
    assert "prompt_cache_key" in proc.stderr
    assert server.chat_bodies() == []
