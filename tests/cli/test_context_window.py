"""The context window of a model countbot does not know, end to end with `ask`:
asked of the server once (cached), `--context-window` and `COUNTBOT_CONTEXT_WINDOW` win and stop
the asking, a server that cannot tell leaves the assumed 8,192 tokens with a one-line notice when
history is trimmed against it; bad values are usage/config errors."""

from __future__ import annotations

from pathlib import Path

import fakeserver as fs
import pytest
from cbenv import CB, make_cb

ASSUMED = "history was trimmed to fit an assumed 8,192-token context window"
QUIET = {"auto_memory": False, "overflow_summary": False}  # no upkeep calls
LONG = "lorem ipsum dolor sit amet " * 600  # ~3,000 tokens: a long answer


KIND = ["/v1/models", "/props"]  # which server it is, asked once (provider/server_facts.py)


def probes(server: fs.FakeServer) -> list[str]:
    return [r.path for r in server.requests if r.path.split("?")[0] != "/v1/chat/completions"]


def converse(cb: CB, server: fs.FakeServer, turns: int, *flags: str) -> list[str]:
    """`turns` asks in one session, each answered at length; their stderr."""
    errs: list[str] = []
    for i in range(turns):
        server.add(fs.text(LONG, chunk_size=4000))
        args = ["ask", *flags, f"question {i}"] + (["-c"] if i else [])
        proc = cb.invoke(*args)
        assert proc.returncode == 0, proc.stderr
        errs.append(proc.stderr)
    return errs


def sent_history(server: fs.FakeServer) -> int:
    """Messages of the last request between the system prompt and the current question."""
    return len(server.chat_bodies()[-1]["messages"]) - 2


def test_a_server_that_cannot_tell_leaves_the_assumed_window_said_once(
    tmp_path: Path, server: fs.FakeServer
) -> None:
    cb = make_cb(tmp_path, server.base_url, memory=QUIET)
    errs = converse(cb, server, 4)
    assert ASSUMED not in errs[0]  # nothing to trim yet
    trimmed = [e for e in errs if ASSUMED in e]
    assert trimmed and all(e.count(ASSUMED) == 1 for e in trimmed)
    line = next(ln for ln in trimmed[-1].splitlines() if ASSUMED in ln)
    assert "test-model" in line and "--context-window" in line and "COUNTBOT_CONTEXT_WINDOW" in line
    assert sent_history(server) < 6  # 3 earlier exchanges: not all were sent
    # asked once, then the "cannot tell" is cached: a server of no known kind is asked only
    # its model list (Ollama's POST /api/show goes to Ollama alone)
    assert probes(server) == [*KIND, "/v1/models"]


def test_the_servers_window_is_used_and_cached(tmp_path: Path, server: fs.FakeServer) -> None:
    server.models_reply = fs.status(
        200, {"object": "list", "data": [{"id": "test-model", "max_model_len": 131072}]}
    )
    cb = make_cb(tmp_path, server.base_url, memory=QUIET)
    errs = converse(cb, server, 4)
    assert not any(ASSUMED in e for e in errs)
    assert sent_history(server) == 6  # everything fits in 131,072 tokens
    assert probes(server) == [*KIND, "/v1/models"]  # once, for four processes


@pytest.mark.parametrize("how", ["flag", "env"])
def test_a_given_window_wins_and_nothing_is_asked(
    tmp_path: Path, server: fs.FakeServer, how: str
) -> None:
    server.models_reply = fs.status(
        200, {"object": "list", "data": [{"id": "test-model", "max_model_len": 131072}]}
    )
    cb = make_cb(tmp_path, server.base_url, memory=QUIET)
    if how == "flag":
        errs = converse(cb, server, 3, "--context-window", "4096")
    else:
        cb.env["COUNTBOT_CONTEXT_WINDOW"] = "4096"
        errs = converse(cb, server, 3)
    assert not any(ASSUMED in e for e in errs)  # a given window is not assumed
    assert sent_history(server) < 4  # trimmed to fit 4,096 tokens
    assert probes(server) == KIND  # the window is not asked


@pytest.mark.parametrize("value", ["abc", "0", "-5", "1.5"])
def test_a_bad_window_variable_is_a_config_error(
    tmp_path: Path, server: fs.FakeServer, value: str
) -> None:
    cb = make_cb(tmp_path, server.base_url, memory=QUIET)
    proc = cb.invoke("ask", "x", env={"COUNTBOT_CONTEXT_WINDOW": value})
    assert proc.returncode == 2
    assert "COUNTBOT_CONTEXT_WINDOW" in proc.stderr and repr(value) in proc.stderr
    assert server.requests == []


@pytest.mark.parametrize("value", ["0", "-1", "lots"])
def test_a_bad_window_flag_is_a_usage_error(
    tmp_path: Path, server: fs.FakeServer, value: str
) -> None:
    cb = make_cb(tmp_path, server.base_url, memory=QUIET)
    proc = cb.invoke("ask", "--context-window", value, "x")
    assert proc.returncode == 2 and "--context-window" in proc.stderr
    assert server.requests == []


@pytest.mark.parametrize(
    ("value", "message"),
    [(0, "must be at least 1"), (-4096, "must be at least 1"), ("big", "expected a whole number")],
)
def test_a_bad_window_in_the_config_names_file_line_and_key(
    tmp_path: Path, server: fs.FakeServer, value: object, message: str
) -> None:
    cb = make_cb(tmp_path, server.base_url, provider={"context_window": value}, memory=QUIET)
    proc = cb.invoke("ask", "x")
    assert proc.returncode == 2
    lines = cb.config_file.read_text(encoding="utf-8").splitlines()
    n = next(i + 1 for i, ln in enumerate(lines) if ln.strip().startswith("context_window:"))
    assert f"{cb.config_file}:{n} key 'providers.test.context_window'" in proc.stderr
    assert message in proc.stderr
    assert server.requests == []
