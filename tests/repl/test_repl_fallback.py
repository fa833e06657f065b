"""The REPL's fallback: with no chain configured, a turn the provider could
not answer offers the embedded model once ("provider unreachable — answer with the embedded
model? y/N"); yes answers with it, and later turns go to it without asking (the provider that
failed is passed over for a while: conversation/fallback.py); no is never asked again. Needs the `local` extra (the offer is made only when the embedded model is there)."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import fakeserver as fs
from local_extra import needs_local
from repl_harness import Harness

from countbot_cli.config.presets import LOCAL_MODEL_NAME

pytestmark = needs_local


def after_request(n: int, keys: str) -> Callable[[Harness], None]:
    """A step: once the server has had `n` chat requests, type `keys` (the y/N answer)."""

    def step(h: Harness) -> None:
        h.server.wait_chats(n)
        h.send(keys)

    return step


def test_yes_answers_with_the_embedded_model_and_is_asked_once(
    harness: Any, server: fs.FakeServer
) -> None:
    h = harness(provider={"max_retries": 0}, max_tokens=8)
    server.add(fs.status(503), fs.status(503))
    h.run(
        [
            "Say hi\r",
            after_request(1, "y\r"),
            lambda h: h.wait_idle(timeout=100),  # the first turn answered, back at the prompt
            "Say hello\r",  # failed lately: the embedded model, without a question
            lambda h: h.wait_for("answering with local", timeout=100, count=2),
        ],
        timeout=240,
    )
    err = " ".join(h.out.getvalue().split())
    assert err.count("test failed (server error (503)): answering with local") == 1
    assert err.count("test failed lately (server error (503)): answering with local") == 1
    assert "postponed" not in err  # nothing was due: the upkeep had nothing to put off
    answers = [m for m in h.session_data()["messages"] if m["role"] == "assistant"]
    assert [m["model"] for m in answers] == [LOCAL_MODEL_NAME, LOCAL_MODEL_NAME]
    assert len(server.chat_bodies()) == 1  # the second turn did not wait for it again


def test_no_keeps_the_failed_turn_and_is_not_asked_again(
    harness: Any, server: fs.FakeServer
) -> None:
    h = harness(provider={"max_retries": 0}, max_tokens=8)
    server.add(fs.status(503), fs.status(503))
    h.run(["hello\r", after_request(1, "n\r"), "again\r"], timeout=60)
    err = h.out.getvalue() + h.err.getvalue()
    assert "answering with local" not in err
    assert err.count("server error (503)") >= 2  # both turns failed as they do today
    statuses = [m.get("status") for m in h.session_data()["messages"]]
    assert statuses == ["failed", "failed"]
