"""A chat whose provider could not answer remembers it: the next turns go straight to the
fallback link that answered, without the failing provider's retries each turn, and the first
such turn says so once; after DOWN_FOR seconds the provider is tried again. Two loopback
servers: `test` always 503, `b` answers."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import fakeserver as fs
import pytest
from cbenv import provider_config
from repl_harness import Harness

from countbot_cli.conversation import fallback

FAILED = "test failed (server error (503)): answering with b (model-b)"
PASSED_OVER = (
    "test failed lately (server error (503)): answering with b (model-b); "
    "test is tried again 5 min after it failed"
)


@pytest.fixture
def second() -> Iterator[fs.FakeServer]:
    with fs.FakeServer() as server:
        yield server


def chat(tmp_path: Path, server: fs.FakeServer, second: fs.FakeServer) -> Harness:
    """The REPL on provider `test` (`server`, down: every request 503) with `fallback: [b]`."""
    server.default = fs.status(503)
    first = provider_config(server.base_url, max_retries=0)["providers"]["test"]
    link = provider_config(second.base_url, model="model-b", max_retries=0)["providers"]["test"]
    return Harness(tmp_path, server, providers={"test": first, "b": link}, fallback=["b"])


def test_a_provider_that_failed_is_passed_over_for_the_next_turns(
    tmp_path: Path, server: fs.FakeServer, second: fs.FakeServer
) -> None:
    h = chat(tmp_path, server, second)
    second.add(*(fs.text(f"b answers {n}", model="model-b") for n in (1, 2, 3)))
    h.run(["one\r", "two\r", "three\r"], timeout=60)
    shown = " ".join(h.out.getvalue().split())  # the screen's lines joined again
    assert shown.count(FAILED) == 1, shown
    assert shown.count(PASSED_OVER) == 1, shown  # said once, not every turn
    assert len(server.chat_bodies()) == 1  # only the first turn asked the failing provider
    assert [b["messages"][-1]["content"] for b in second.chat_bodies()] == ["one", "two", "three"]
    said = [(m["role"], m["content"]) for m in h.session_data()["messages"]]
    assert said == [
        ("user", "one"),
        ("assistant", "b answers 1"),
        ("user", "two"),
        ("assistant", "b answers 2"),
        ("user", "three"),
        ("assistant", "b answers 3"),
    ]


def test_after_its_time_the_provider_is_tried_again(
    tmp_path: Path, server: fs.FakeServer, second: fs.FakeServer, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(fallback, "DOWN_FOR", 0.0)  # every failure is already old
    h = chat(tmp_path, server, second)
    second.add(*(fs.text(f"b answers {n}", model="model-b") for n in (1, 2)))
    h.run(["one\r", "two\r"], timeout=60)
    shown = " ".join(h.out.getvalue().split())
    assert shown.count(FAILED) == 2, shown
    assert "failed lately" not in shown
    assert len(server.chat_bodies()) == 2
