"""The window Ollama runs, end to end against an Ollama stand-in (the fake server with Ollama's
/api/ps and /api/show): its /api/show says the model was trained for 131,072 tokens, its /api/ps
what the loaded model runs. No request is sent over the window Ollama runs (the stand-in refuses
a prompt over it, where Ollama would cut it silently), history is trimmed against it, and
`ask`, `/context` and `config check` say which figure it is and how to raise it."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import fakeserver as fs
import pytest
from cbenv import CB, QUIET_MEMORY, make_cb

from countbot_cli.conversation.server_window import fitted_to_server

LONG = "lorem ipsum dolor sit amet " * 600  # an answer of about 3,600 tokens
MODEL = "llama3.2"
TRAINED = {"general.architecture": "llama", "llama.context_length": 131072}


def stand_in(server: fs.FakeServer, window: int | None) -> None:
    """Answer like Ollama: /v1/models names the model in the `library` namespace, /api/show
    its trained maximum, /api/ps the window it runs (None: not loaded)."""
    row = {"id": f"{MODEL}:latest", "object": "model", "created": 0, "owned_by": "library"}
    server.models_reply = fs.status(200, {"object": "list", "data": [row]})
    loaded = [] if window is None else [{"name": f"{MODEL}:latest", "context_length": window}]
    server.routes[("GET", "/api/ps")] = fs.status(200, {"models": loaded})
    server.routes[("POST", "/api/show")] = fs.status(200, {"model_info": TRAINED})
    server.context_window = window or 4096  # a prompt over it is refused, not cut


def ollama_cb(tmp_path: Path, server: fs.FakeServer, how: str, **provider: Any) -> CB:
    """`how`: "preset" (`preset: ollama`) or "detected" (a plain provider that Ollama's model
    list gives away)."""
    entry: dict[str, Any] = {"model": MODEL, "api_key": None, **provider}
    if how == "preset":
        entry["preset"] = "ollama"
    return make_cb(tmp_path, server.base_url, provider=entry, **QUIET_MEMORY)


def converse(cb: CB, server: fs.FakeServer, turns: int, *flags: str) -> list[str]:
    """`turns` asks in one session, each answered at length; their stderr."""
    errs: list[str] = []
    for i in range(turns):
        server.add(fs.text(LONG, chunk_size=4000))
        proc = cb.invoke("ask", *flags, f"question {i}", *(["-c"] if i else []))
        assert proc.returncode == 0, proc.stderr
        errs.append(proc.stderr)
    return errs


def largest(server: fs.FakeServer) -> int:
    return max(fs.prompt_tokens_at_least(b) for b in server.chat_bodies())


@pytest.mark.parametrize("how", ["preset", "detected"])
def test_no_request_is_larger_than_the_window_ollama_runs(
    tmp_path: Path, server: fs.FakeServer, how: str
) -> None:
    stand_in(server, 4096)
    cb = ollama_cb(tmp_path, server, how)
    errs = converse(cb, server, 3)
    assert server.refused == [] and largest(server) <= 4096
    bodies = server.chat_bodies()
    assert len(bodies[-1]["messages"]) == 2  # system + question: the long history trimmed
    said = "history was trimmed to fit the 4,096-token window: the window Ollama runs llama3.2"
    assert said not in errs[0] and all(e.count(said) == 1 for e in errs[1:])
    line = next(ln for ln in errs[1].splitlines() if said in ln)
    assert "(/api/ps)" in line and "OLLAMA_CONTEXT_LENGTH" in line and "num_ctx" in line
    asked = [r.path for r in server.requests if r.path.startswith("/api/")]
    assert asked.count("/api/ps") == 3 and "/api/show" not in asked  # loaded: nothing more


def test_a_larger_window_ollama_runs_is_used(tmp_path: Path, server: fs.FakeServer) -> None:
    stand_in(server, 8192)
    cb = ollama_cb(tmp_path, server, "preset")
    converse(cb, server, 2)
    assert server.refused == []
    second = server.chat_bodies()[1]["messages"]
    assert any(m["content"] == LONG for m in second)  # 4,096 tokens could not have held it


def test_a_model_not_loaded_gets_ollamas_default_then_what_it_loaded(
    tmp_path: Path, server: fs.FakeServer
) -> None:
    stand_in(server, None)  # not loaded: asked /api/show, which names no num_ctx
    cb = ollama_cb(tmp_path, server, "preset")
    server.add(fs.text(LONG, chunk_size=4000))
    proc = cb.invoke("ask", "question 0")
    assert proc.returncode == 0, proc.stderr
    assert [r.path for r in server.requests if r.path.startswith("/api/")][:2] == [
        "/api/ps",
        "/api/show",
    ]
    server.add(fs.text(LONG, chunk_size=4000))
    proc = cb.invoke("ask", "-c", "question 1")
    assert proc.returncode == 0, proc.stderr
    assert "Ollama's default window (it has not loaded the model yet)" in proc.stderr
    assert server.refused == [] and largest(server) <= 4096


def test_a_message_over_the_window_is_refused_not_cut(
    tmp_path: Path, server: fs.FakeServer
) -> None:
    stand_in(server, 4096)
    cb = ollama_cb(tmp_path, server, "preset")
    big = cb.work / "big.txt"
    big.write_text("the quick brown fox jumps over the lazy dog\n" * 1500, encoding="utf-8")
    proc = cb.invoke("ask", "-f", str(big), "summarise this")
    assert proc.returncode == 3, proc.stderr
    assert "over the 4,096-token window" in proc.stderr
    assert "Ollama would cut it silently, so it was not sent" in proc.stderr
    assert "OLLAMA_CONTEXT_LENGTH" in proc.stderr
    assert server.chat_bodies() == []  # nothing sent


def test_a_window_the_user_set_wins_and_is_checked(tmp_path: Path, server: fs.FakeServer) -> None:
    stand_in(server, 4096)
    cb = ollama_cb(tmp_path, server, "preset", context_window=8192)
    converse(cb, server, 2)
    second = server.chat_bodies()[1]["messages"]
    assert any(m["content"] == LONG for m in second)  # trimmed to the user's 8,192
    server.context_window = None
    server.add(fs.text("OK"))
    proc = cb.invoke("config", "check")
    window = [ln for ln in proc.stdout.splitlines() if " window " in ln]
    assert window and window[0].startswith("warn")
    assert "8,192 tokens (context_window in the config), but the server runs 4,096" in window[0]


def test_config_check_names_the_figure_and_where_it_comes_from(
    tmp_path: Path, server: fs.FakeServer
) -> None:
    stand_in(server, 4096)
    cb = ollama_cb(tmp_path, server, "preset")
    server.add(fs.text("OK"))
    proc = cb.invoke("config", "check")
    assert proc.returncode == 0, proc.stdout + proc.stderr
    window = [ln for ln in proc.stdout.splitlines() if " window " in ln]
    assert window == [
        "ok    window    4,096 tokens (the window Ollama runs llama3.2 with (/api/ps))"
    ]


def test_context_names_the_source_of_the_window(harness: Any, server: fs.FakeServer) -> None:
    stand_in(server, 4096)
    h = harness(provider={"preset": "ollama", "model": MODEL, "api_key": None}, **QUIET_MEMORY)
    h.settings = fitted_to_server(h.settings)  # as the chat opens its conversation
    server.add(fs.text("Hello."))
    h.run(["hi\r", "/context\r"])
    out = h.text()
    assert "context window: 4,096 tokens (the window Ollama runs llama3.2 with (/api/ps))" in out
