"""The fallback chain as a user meets it: `fallback:` in the config and
`ask --fallback NAME`. Two loopback servers: the first fails with each kind a retry elsewhere
can fix, the second answers; the session keeps one exchange per question and records which
model gave each answer; 401/403 and 400 never fall back; the embedded model as the last link;
the memory upkeep of a turn the provider could not answer runs after a later turn."""

from __future__ import annotations

import json
import socket
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import fakeserver as fs
import pytest
import yaml
from cbenv import CB, make_cb, provider_config
from local_extra import needs_local


@pytest.fixture
def second() -> Iterator[fs.FakeServer]:
    with fs.FakeServer() as server:
        yield server


def closed_port_url() -> str:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    return f"http://127.0.0.1:{port}/v1"


def two_providers(tmp_path: Path, first: str, second: str, **extra: Any) -> CB:
    """Provider `test` on `first`, provider `b` (model-b) on `second`, `fallback: [b]`."""
    cb = make_cb(tmp_path, None)
    retries = extra.pop("max_retries", 0)
    cfg = provider_config(first, max_retries=retries, read_timeout=0.5)
    cfg["providers"]["b"] = provider_config(second, model="model-b", max_retries=0)["providers"][
        "test"
    ]
    cfg.update({"tools": {"enabled": False}, "fallback": ["b"], **extra})
    cb.write_config(cfg)
    return cb


QUOTA = fs.openai_error(
    "You exceeded your current quota", "insufficient_quota", "insufficient_quota"
)
KINDS: dict[str, Any] = {
    "500": lambda: fs.status(500),
    "503": lambda: fs.status(503),
    "408": lambda: fs.status(408),
    "429": lambda: fs.status(429),
    "quota": lambda: fs.status(429, QUOTA),
    "402": lambda: fs.status(402),
    "timeout": lambda: fs.hang(30),
    "empty stream": lambda: fs.empty_stream(),
    "cut before text": lambda: fs.cut("", after_chunks=0),
}
WHY = {
    "500": "server error (500)",
    "503": "server error (503)",
    "408": "request not taken (408)",
    "429": "rate limited (429)",
    "quota": "out of quota",
    "402": "out of quota",
    "timeout": "no answer in time",
    "empty stream": "the stream broke",
    "cut before text": "the stream broke",
}


@pytest.mark.parametrize("kind", list(KINDS))
def test_each_retryable_kind_is_answered_by_the_next_provider(
    tmp_path: Path, server: fs.FakeServer, second: fs.FakeServer, kind: str
) -> None:
    cb = two_providers(tmp_path, server.base_url, second.base_url)
    server.add(fs.text("from a", model="model-a"), KINDS[kind]())
    second.add(fs.text("from b", model="model-b"))
    first = cb.invoke("ask", "--json", "one")
    assert first.returncode == 0, first.stderr
    sid = json.loads(first.stdout)["session_id"]
    proc = cb.invoke("ask", "--json", "-s", sid, "two")
    assert proc.returncode == 0, proc.stderr
    out = json.loads(proc.stdout)
    assert out["answer"] == "from b" and out["model"] == "model-b"
    assert out["fallback"] == {"from": "test", "to": "b", "reason": WHY[kind]}
    assert f"test failed ({WHY[kind]}): answering with b (model-b)" in proc.stderr
    messages = cb.only_session()["messages"]
    said = [(m["role"], m["content"], m.get("model"), m.get("status")) for m in messages]
    assert said == [
        ("user", "one", None, None),
        ("assistant", "from a", "model-a", None),
        ("user", "two", None, None),  # the failed attempt was replaced, not kept beside it
        ("assistant", "from b", "model-b", None),
    ]
    shown = cb.invoke("sessions", "show", sid).stdout
    assert "test/model-b" in shown  # the session's latest model
    assert "by model-a" in shown and "by model-b" not in shown  # an answer by another model


def test_connection_refused_falls_back_after_the_retries(
    tmp_path: Path, second: fs.FakeServer
) -> None:
    cb = two_providers(tmp_path, closed_port_url(), second.base_url, max_retries=1)
    second.add(fs.text("from b", model="model-b"))
    proc = cb.invoke("ask", "hello")
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.strip() == "from b"
    assert "could not connect; retrying" in proc.stderr  # the provider's own retry came first
    assert "test failed (could not connect): answering with b (model-b)" in proc.stderr


def test_429_is_retried_on_the_same_provider_before_falling_back(
    tmp_path: Path, server: fs.FakeServer, second: fs.FakeServer
) -> None:
    cb = two_providers(tmp_path, server.base_url, second.base_url, max_retries=1)
    wait = {"retry-after-ms": "1"}
    server.add(fs.status(429, headers=wait), fs.status(429, headers=wait))
    second.add(fs.text("from b", model="model-b"))
    proc = cb.invoke("ask", "hello")
    assert proc.returncode == 0, proc.stderr
    assert len(server.chat_bodies()) == 2 and len(second.chat_bodies()) == 1


@pytest.mark.parametrize(("code", "exit_code"), [(401, 4), (403, 4), (400, 3), (404, 3)])
def test_auth_and_bad_request_never_fall_back(
    tmp_path: Path, server: fs.FakeServer, second: fs.FakeServer, code: int, exit_code: int
) -> None:
    cb = two_providers(tmp_path, server.base_url, second.base_url)
    server.add(fs.status(code))
    second.add(fs.text("from b"))
    proc = cb.invoke("ask", "hello")
    assert proc.returncode == exit_code
    assert second.chat_bodies() == []
    assert "answering with" not in proc.stderr
    assert cb.only_session()["messages"][0]["status"] == "failed"


@pytest.mark.parametrize(("code", "exit_code"), [(401, 4), (400, 3), (503, 6)])
def test_a_link_that_refuses_or_fails_too_is_named_in_the_error(
    tmp_path: Path, server: fs.FakeServer, second: fs.FakeServer, code: int, exit_code: int
) -> None:
    cb = two_providers(tmp_path, server.base_url, second.base_url)
    server.add(fs.status(503))
    second.add(fs.status(code))
    proc = cb.invoke("ask", "--jsonl", "hello")
    assert proc.returncode == exit_code
    assert "test failed (server error (503)): answering with b (model-b)" in proc.stderr
    [error] = [line for line in proc.stderr.splitlines() if line.startswith("countbot: error:")]
    assert error.startswith("countbot: error: fallback b: "), error  # not test's key
    assert f"({code})" in error
    events = [json.loads(line) for line in proc.stdout.splitlines()]
    [said] = [e for e in events if e["type"] == "error"]
    assert said["message"].startswith("fallback b: ")
    assert cb.only_session()["messages"][0]["status"] == "failed"


def test_text_already_shown_never_falls_back(
    tmp_path: Path, server: fs.FakeServer, second: fs.FakeServer
) -> None:
    cb = two_providers(tmp_path, server.base_url, second.base_url)
    server.add(fs.cut("half an answer", after_chunks=2))
    proc = cb.invoke("ask", "hello")
    assert proc.returncode == 6
    assert second.chat_bodies() == []


def test_ask_fallback_flag_replaces_the_chain_and_is_checked(
    tmp_path: Path, server: fs.FakeServer, second: fs.FakeServer
) -> None:
    cb = two_providers(tmp_path, server.base_url, second.base_url, fallback=[])
    server.add(fs.status(503), fs.status(503))
    second.add(fs.text("from b", model="model-b"))
    assert cb.invoke("ask", "hello").returncode == 6  # no chain: the turn fails as before
    proc = cb.invoke("ask", "--fallback", "b", "hello")
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.strip() == "from b"
    bad = cb.invoke("ask", "--fallback", "bb", "hello")
    assert bad.returncode == 2
    assert "--fallback: no provider named 'bb'" in bad.stderr and "did you mean 'b'" in bad.stderr


def test_the_chain_goes_on_while_links_fail_and_skips_unusable_ones(
    tmp_path: Path, server: fs.FakeServer, second: fs.FakeServer
) -> None:
    cb = two_providers(tmp_path, server.base_url, second.base_url, fallback=["nokey", "b"])
    cfg = yaml.safe_load(cb.config_file.read_text())
    cfg["providers"]["nokey"] = {"preset": "deepseek"}  # DEEPSEEK_API_KEY is not set
    cb.write_config(cfg)
    server.add(fs.status(503))
    second.add(fs.text("from b", model="model-b"))
    proc = cb.invoke("ask", "hello")
    assert proc.returncode == 0, proc.stderr
    assert "fallback nokey skipped: " in proc.stderr and "DEEPSEEK_API_KEY" in proc.stderr
    assert "test failed (server error (503)): answering with b" in proc.stderr


@pytest.mark.parametrize(
    ("chain", "message"),
    [
        (["nowhere"], "no provider named 'nowhere'"),
        (["b", "b"], "'b' is in the chain twice"),
        ([3], "expected text"),
    ],
)
def test_a_bad_chain_is_a_config_error_naming_the_key(
    tmp_path: Path, server: fs.FakeServer, chain: list[Any], message: str
) -> None:
    cb = two_providers(tmp_path, server.base_url, server.base_url, fallback=chain)
    proc = cb.invoke("ask", "hello")
    assert proc.returncode == 2
    assert message in proc.stderr and "fallback" in proc.stderr
    assert server.chat_bodies() == []


def test_memory_upkeep_of_an_unanswered_turn_runs_after_a_later_turn(
    tmp_path: Path, server: fs.FakeServer, second: fs.FakeServer
) -> None:
    cb = two_providers(tmp_path, server.base_url, second.base_url, memory={"auto_messages": 4})
    summaries: list[str] = []

    def answer(body: dict[str, Any]) -> fs.Reply:
        if body["messages"][0]["role"] == "system":
            return fs.text("from a")
        summaries.append(body["messages"][0]["content"])
        return fs.text("user likes green tea")

    server.responder = answer
    assert cb.invoke("ask", "-c", "one").returncode == 0
    server.add(fs.status(503))
    second.add(fs.text("from b", model="model-b"))
    proc = cb.invoke("ask", "-c", "two")
    assert proc.returncode == 0, proc.stderr
    assert "memory upkeep postponed" in proc.stderr
    assert summaries == [] and len(second.chat_bodies()) == 1  # no summary asked of anyone
    assert cb.invoke("ask", "-c", "three").returncode == 0
    assert len(summaries) == 1 and "from b" in summaries[0]  # the postponed turn is in it
    assert "green tea" in cb.memory_file.read_text()


def test_nothing_due_means_nothing_is_said_to_be_postponed(
    tmp_path: Path, server: fs.FakeServer, second: fs.FakeServer
) -> None:
    """A one-off `ask` that failed, and one a fallback answered, had no upkeep due (nothing
    left the window, no automatic memory): nothing is said to be postponed."""
    alone = make_cb(tmp_path / "alone", server.base_url, provider={"max_retries": 0})
    server.add(fs.status(503))
    failed = alone.run("ask", "hello")
    assert failed.returncode == 6, failed.stderr
    assert "postponed" not in failed.stderr and "upkeep" not in failed.stderr, failed.stderr
    cb = two_providers(tmp_path / "chain", server.base_url, second.base_url)
    server.add(fs.status(503))
    second.add(fs.text("from b", model="model-b"))
    answered = cb.run("ask", "hello")
    assert answered.returncode == 0, answered.stderr
    assert "answering with b" in answered.stderr
    assert "postponed" not in answered.stderr and "upkeep" not in answered.stderr


def test_no_upkeep_configured_means_none_is_said_to_be_postponed(
    tmp_path: Path, server: fs.FakeServer, second: fs.FakeServer
) -> None:
    """With every upkeep turned off there is nothing to postpone: no note about it, neither
    after a fallback answer nor after a turn that failed."""
    off = {"overflow_summary": False, "session_summary": False, "auto_memory": False}
    cb = two_providers(tmp_path, server.base_url, second.base_url, memory=off)
    server.add(fs.status(503), fs.status(503))
    second.add(fs.text("from b", model="model-b"))
    answered = cb.invoke("ask", "hello")
    assert answered.returncode == 0, answered.stderr
    assert "answering with b" in answered.stderr and "upkeep" not in answered.stderr
    failed = cb.invoke("ask", "--fallback", "local", "again", env={"COUNTBOT_NO_LOCAL_MODEL": "1"})
    assert failed.returncode == 6
    assert "upkeep" not in failed.stderr, failed.stderr


@needs_local
def test_the_embedded_model_answers_as_the_last_link(
    tmp_path: Path, server: fs.FakeServer, second: fs.FakeServer
) -> None:
    cb = two_providers(tmp_path, server.base_url, second.base_url, fallback=["b", "local"])
    server.add(fs.status(503))
    second.add(fs.status(502))
    proc = cb.invoke("ask", "--json", "-o", "max_tokens", "8", "Say hi")
    assert proc.returncode == 0, proc.stderr
    out = json.loads(proc.stdout)
    assert out["model"] == "SmolLM2-135M-Instruct" and out["answer"].strip()
    assert "b failed (server error (502)): answering with local" in proc.stderr
    answer = cb.only_session()["messages"][-1]
    assert answer["model"] == "SmolLM2-135M-Instruct"


def test_a_missing_embedded_model_is_skipped_with_a_reason(
    tmp_path: Path, server: fs.FakeServer
) -> None:
    cb = two_providers(tmp_path, server.base_url, server.base_url, fallback=["local"])
    cb.env["COUNTBOT_NO_LOCAL_MODEL"] = "1"
    server.add(fs.status(503))
    proc = cb.invoke("ask", "hello")
    assert proc.returncode == 6
    assert "fallback local skipped: the embedded local model is not installed" in proc.stderr


def test_jsonl_says_so_in_a_notice_and_the_end_event(
    tmp_path: Path, server: fs.FakeServer, second: fs.FakeServer
) -> None:
    cb = two_providers(tmp_path, server.base_url, second.base_url)
    server.add(fs.status(503))
    second.add(fs.text("from b", model="model-b"))
    proc = cb.invoke("ask", "--jsonl", "hello")
    assert proc.returncode == 0, proc.stderr
    events = [json.loads(line) for line in proc.stdout.splitlines()]
    notices = [e["text"] for e in events if e["type"] == "notice"]
    assert "test failed (server error (503)): answering with b (model-b)" in notices
    end = events[-1]
    assert end["type"] == "end" and end["model"] == "model-b" and end["answer"] == "from b"
    assert end["fallback"] == {"from": "test", "to": "b", "reason": "server error (503)"}


def test_a_link_uses_its_own_model_and_key_not_the_chosen_providers_variables(
    tmp_path: Path, server: fs.FakeServer, second: fs.FakeServer
) -> None:
    cb = two_providers(tmp_path, server.base_url, second.base_url)
    cfg = yaml.safe_load(cb.config_file.read_text())
    cfg["providers"]["b"]["api_key"] = "sk-b-own-key-0123456789"
    cb.write_config(cfg)
    server.add(fs.status(503))
    second.add(fs.text("from b", model="model-b"))
    env = {"COUNTBOT_MODEL": "env-model", "COUNTBOT_API_KEY": "sk-env-key-0123456789"}
    proc = cb.invoke("ask", "hello", env=env)
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout == "from b\n"
    for srv, model, key in (
        (server, "env-model", "sk-env-key-0123456789"),  # the chosen provider takes them
        (second, "model-b", "sk-b-own-key-0123456789"),  # the link is its own config
    ):
        chats = [r for r in srv.requests if r.path.endswith("/chat/completions")]
        assert [(r.json["model"], r.headers["authorization"]) for r in chats] == [
            (model, f"Bearer {key}")
        ]
