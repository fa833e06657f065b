"""The installed `countbot` against llama-cpp-python's real OpenAI-compatible server.

The model is SmolLM2-135M: its answers are poor, so these tests assert on protocol (what countbot
sent and what the server answered, recorded by the `recorder` proxy), on files and on exit codes,
never on wording.
"""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import TYPE_CHECKING, Any

import pytest
from cbenv import CB, make_cb

if TYPE_CHECKING:  # tests/e2e/conftest.py: fixtures, not an importable module
    from conftest import Exchange, Recorder

MODEL_ALIAS = "smollm2"  # the --model_alias the server fixture gives the bundled model
N_CTX = 4096  # the window countbot is told, and trims history to fit (the server's is 8192)

TURN_TIMEOUT = 240.0  # seconds for one `countbot ask` (2 busy cores, a slow CI machine)
TOOL_NAMES = {"read_file", "write_file", "edit_file", "list_dir", "exec", "memory"}


def countbot(tmp_path: Path, rec: Recorder, **config: Any) -> CB:
    provider = {
        "model": MODEL_ALIAS,
        "max_retries": 0,
        "read_timeout": 300,
        "context_window": N_CTX,
    }
    provider.update(config.pop("provider", {}))
    config.setdefault("temperature", 0)
    config.setdefault("max_tokens", 48)
    return make_cb(tmp_path, rec.base_url, provider=provider, **config)


def ask(cb: CB, *args: str, codes: tuple[int, ...] = (0,)) -> str:
    """Run `countbot ask ARGS`; it must succeed (exit in `codes`). Returns stdout."""
    proc = cb.run("ask", *args, timeout=TURN_TIMEOUT)
    assert proc.returncode in codes, f"exit {proc.returncode}\nstderr: {proc.stderr}"
    return proc.stdout


def sse_payloads(x: Exchange) -> list[str]:
    return [
        line[5:].strip()
        for line in x.response.decode("utf-8").splitlines()
        if line.startswith("data:")
    ]


def streamed_text(x: Exchange) -> str:
    parts = []
    for data in sse_payloads(x):
        if data == "[DONE]":
            continue
        for choice in json.loads(data).get("choices") or []:
            parts.append((choice.get("delta") or {}).get("content") or "")
    return "".join(parts)


def turns(messages: list[dict[str, Any]]) -> list[tuple[str, str]]:
    return [(m["role"], m["content"]) for m in messages]


@pytest.mark.e2e
def test_models_lists_the_servers_model(tmp_path: Path, recorder: Recorder) -> None:
    cb = countbot(tmp_path, recorder)
    proc = cb.run("models", timeout=TURN_TIMEOUT)
    assert proc.returncode == 0, proc.stderr
    assert MODEL_ALIAS in proc.stdout
    assert [(x.method, x.path, x.status) for x in recorder.exchanges] == [
        ("GET", "/v1/models", 200)
    ]


@pytest.mark.e2e
def test_streamed_chat(tmp_path: Path, recorder: Recorder) -> None:
    cb = countbot(tmp_path, recorder)
    out = ask(cb, "Say hello to me in one short sentence.")
    [x] = recorder.chats()
    body = x.body
    assert body["stream"] is True and body["model"] == MODEL_ALIAS
    assert body["temperature"] == 0 and body["max_tokens"] == 48
    assert "tools" not in body
    assert body["messages"][0]["role"] == "system"
    assert body["messages"][1:] == [
        {"role": "user", "content": "Say hello to me in one short sentence."}
    ]
    # the server really streamed: SSE, several content deltas, then [DONE]
    assert x.status == 200 and "text/event-stream" in x.content_type
    payloads = sse_payloads(x)
    assert payloads[-1] == "[DONE]" and len(payloads) >= 4
    text = streamed_text(x)
    assert text.strip()
    # stdout (not a TTY) is the raw answer; the session holds the question and that answer
    assert out.strip() == text.strip()
    session = cb.only_session()
    assert turns(session["messages"]) == [
        ("user", "Say hello to me in one short sentence."),
        ("assistant", session["messages"][1]["content"]),
    ]
    assert session["messages"][1]["content"].strip() == text.strip()
    assert all("status" not in m for m in session["messages"])


@pytest.mark.e2e
def test_three_turn_session_continued_with_s(tmp_path: Path, recorder: Recorder) -> None:
    cb = countbot(tmp_path, recorder)
    questions = ["My name is Ada.", "What is the capital of France?", "Thank you!"]
    answers: list[str] = []
    sid = ""
    for q in questions:
        out = ask(cb, q) if not sid else ask(cb, "-s", sid[:8], q)
        answers.append(out.strip())
        sid = sid or cb.only_session()["id"]
    session = cb.only_session()
    assert session["id"] == sid
    msgs = session["messages"]
    assert [m["role"] for m in msgs] == ["user", "assistant"] * 3
    assert [m["content"] for m in msgs[::2]] == questions
    assert [m["content"].strip() for m in msgs[1::2]] == answers
    chats = recorder.chats()
    assert len(chats) == 3 and all(x.status == 200 for x in chats)
    # each request replays the saved history, then the new question
    for i, x in enumerate(chats):
        sent = turns(x.body["messages"][1:])
        assert sent == [*turns(msgs[: 2 * i]), ("user", questions[i])]


@pytest.mark.e2e
def test_json_output(tmp_path: Path, recorder: Recorder) -> None:
    cb = countbot(tmp_path, recorder)
    out = ask(cb, "--json", "What is two plus two?")
    obj = json.loads(out)  # stdout is exactly one JSON object
    assert {"session_id", "model", "answer", "usage", "tool_calls", "finish_reason"} <= set(obj)
    session = cb.only_session()
    assert obj["session_id"] == session["id"]
    assert obj["model"] == MODEL_ALIAS
    assert obj["answer"] == session["messages"][-1]["content"]
    assert obj["answer"].strip() == streamed_text(recorder.chats()[0]).strip()
    assert obj["tool_calls"] == []
    assert obj["finish_reason"] in ("stop", "length")
    reported = [
        json.loads(data)["usage"]
        for data in sse_payloads(recorder.chats()[0])
        if data != "[DONE]" and json.loads(data).get("usage")
    ]
    if reported:  # the server's own figures, as it sent them
        assert obj["usage"]["prompt_tokens"] == reported[-1]["prompt_tokens"]
        assert obj["usage"]["completion_tokens"] == reported[-1]["completion_tokens"]
    else:  # a stream without usage: null, never made-up zeros
        assert obj["usage"] is None


@pytest.mark.e2e
@pytest.mark.slow
def test_tool_call_round_trip_without_streamed_tools(tmp_path: Path, recorder: Recorder) -> None:
    """No preset and no stream_tools: countbot recognises llama-cpp-python's server by its
    model list (provider/server_facts.py) and sends requests with tools non-streamed."""
    cb = countbot(tmp_path, recorder, tools={"enabled": True}, max_iterations=3)
    (cb.work / "README.md").write_text("# Demo\n\nThe secret word is PINEAPPLE-42.\n")
    # the small model may keep calling tools until max_iterations: exit 8 then, still a round trip
    out = ask(cb, "--json", "Use the read_file tool to read README.md", codes=(0, 8))
    chats = recorder.chats()
    assert all(x.status == 200 for x in chats), [(x.status, x.response[:300]) for x in chats]
    first = chats[0].body
    assert first["stream"] is False  # recognised as llama.cpp's: tools go non-streamed
    assert {t["function"]["name"] for t in first["tools"]} >= {"read_file"}
    with_calls = [
        i
        for i, x in enumerate(chats)
        if x.response_json()["choices"][0]["message"].get("tool_calls")
    ]
    assert with_calls, (
        "the server returned no tool call: it considers tools only when the request has "
        f"tool_choice (sent: {first.get('tool_choice')!r})"
    )
    assert with_calls[0] + 1 < len(chats), "countbot did not send the tool results back"
    follow = chats[with_calls[0] + 1].body["messages"]
    calling = [m for m in follow if m["role"] == "assistant" and m.get("tool_calls")]
    assert calling and calling[0]["content"] == ""  # this server answers 422 to null
    ids = [c["id"] for c in calling[0]["tool_calls"]]
    results = [m for m in follow if m["role"] == "tool"]
    assert [m["tool_call_id"] for m in results[: len(ids)]] == ids
    assert all(len(i) <= 40 for i in ids)
    # the JSON result and the session record the calls
    obj = json.loads(out)
    assert obj["tool_calls"] and {c["name"] for c in obj["tool_calls"]} <= TOOL_NAMES
    session = cb.only_session()
    assert session["tool_conversations"]
    assert [m["role"] for m in session["messages"]] == ["user", "assistant"]
    read = [r for r in results if "README" in json.dumps(calling[0]["tool_calls"])]
    if read and calling[0]["tool_calls"][0]["function"]["name"] == "read_file":
        assert "PINEAPPLE-42" in read[0]["content"]  # the file really reached the model


@pytest.mark.e2e
@pytest.mark.slow
def test_long_chat_with_overflow_summaries(tmp_path: Path, recorder: Recorder) -> None:
    cb = countbot(
        tmp_path,
        recorder,
        persona={"max_history_messages": 4},
        memory={"overflow_summary": True, "auto_memory": False},
        max_tokens=32,
    )
    questions = [
        f"Fact {i}: my favourite number is {i * 7}. Reply in one sentence." for i in range(8)
    ]
    sid = ""
    for q in questions:
        ask(cb, q) if not sid else ask(cb, "-s", sid, q)
        sid = sid or cb.only_session()["id"]
    session = cb.only_session()
    transcript = session["archived"] + session["messages"]
    # nothing lost: every question and an answer to each, in order
    assert [m["content"] for m in transcript if m["role"] == "user"] == questions
    assert [m["role"] for m in transcript] == ["user", "assistant"] * len(questions)
    assert session["archived"], "no overflow summary moved old messages to `archived`"
    chats = recorder.chats()
    assert all(x.status == 200 for x in chats), [(x.status, x.response[:300]) for x in chats]
    summaries = [x for x in chats if x.body.get("temperature") == 0.3]
    main = [x for x in chats if x.body.get("temperature") == 0]
    assert summaries, "no overflow summary call reached the server"
    assert len(main) == len(questions)
    for x, q in zip(main, questions, strict=True):
        sent = x.body["messages"]
        # recalled memory (inject: relevant) rides in front of the question as sent, never saved
        assert sent[-1]["role"] == "user" and sent[-1]["content"].endswith(q)
        assert sent[-1]["content"] == q or sent[-1]["content"].startswith("[Long-term memory")
        assert len(sent) - 2 <= 4  # the history window: at most 4 earlier messages
    memory = cb.memory_file
    if memory.exists():
        lines = [
            ln
            for ln in memory.read_text(encoding="utf-8").splitlines()
            if ln.strip() and not ln.startswith("#")
        ]
        # a summary line each, or the user's own words where a summary was kept back
        assert len(lines) <= len(summaries) + len(questions)
        assert all(re.match(r"\d{4}-\d{2}-\d{2}\|auto-overflow\|\S", ln) for ln in lines), lines


@pytest.mark.e2e
@pytest.mark.slow
def test_the_bundled_model_keeps_what_the_user_said(tmp_path: Path, recorder: Recorder) -> None:
    """The bundled smoke-test model (by its own name) is not asked for summaries: what the user
    said leaves the window as they said it, into MEMORY.md, and the recap is made of it."""
    cb = countbot(
        tmp_path,
        recorder,
        provider={"model": "SmolLM2-135M-Instruct"},
        persona={"max_history_messages": 4},
        memory={"inject": "off"},
    )
    said = [
        "My name is Ada and I live in Lyon.",
        "I play the cello on weekends.",
        "My project is called ferrox and it is written in Rust.",
        "What should I cook tonight?",
        "Any idea for a weekend trip?",
        "Tell me a short joke.",
    ]
    for i, question in enumerate(said):
        ask(cb, *(["-c"] if i else []), question)
    assert [x for x in recorder.chats() if x.body.get("temperature") == 0.3] == []
    memory = cb.memory_file.read_text(encoding="utf-8")
    for statement in said[:3]:
        assert f'the user said: "{statement}"' in memory, memory
    recap = cb.only_session()["rolling_summary"]
    assert "Ada" in recap and "cello" in recap, recap
