"""The memory upkeep never holds an answer back, in the REPL: on a model that answers one call at
a time (the embedded one; here the loopback server, treated so) a question typed while the
upkeep's summary call streams stops that call, the answer comes, and its usage line says how
long the turn waited; the step is done after a later turn, nothing skipped. A step stopped
twice is written from what was said, without a call."""

from __future__ import annotations

import io
import re
import time
from pathlib import Path
from typing import Any

import fakeserver as fs
import pexpect
import pytest
import yaml
from cbenv import CB
from fake_llama import local_cb
from terminal import TOOLBAR_END, expect, plain, spawn
from waits import file_text, wait_until

from countbot_cli.conversation import chat


def test_a_question_typed_during_the_upkeep_stops_its_call_and_is_answered(
    harness: Any, server: fs.FakeServer, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(chat, "SERIAL_PROVIDERS", ("openai",))  # one call at a time
    summaries: list[int] = []

    def responder(body: dict[str, Any]) -> fs.Reply:
        if body["messages"][0]["role"] == "system":
            return fs.text("ok.")
        summaries.append(len(summaries))
        if len(summaries) == 1:  # the first summary trickles: 30 chunks, 1 s apart
            return fs.text("MEMORY: user asked question one\nSUMMARY: s" + "." * 29, delay=1.0)
        return fs.text("MEMORY: user asked question one\nSUMMARY: question one")

    server.responder = responder
    h = harness(persona={"max_history_messages": 2}, memory={"auto_memory": False, "inject": "off"})

    def when_summarising(h: Any) -> None:
        wait_until(lambda: summaries, "the step's summary call", 20)

    h.run(
        [
            "question one\r",
            "question two\r",
            "question three\r",  # 4 messages leave the window: the step's call starts
            when_summarising,
            "question four\r",
            lambda h: h.wait_for("waited", stream="err", timeout=20),
            "question five\r",
        ],
        timeout=90,
    )
    err = " ".join(h.err.getvalue().split())
    waited = [float(w) for w in err.split("waited ")[1:] for w in [w.split(" s for")[0]]]
    assert waited and max(waited) < 10, err  # the call was stopped, not waited out (30 s)
    assert "waited" in err and "for the memory upkeep" in err
    chats = [messages for messages in h.sent() if messages[0]["role"] == "system"]
    assert chats[3][-1]["content"] == "question four"
    archived = [m["content"] for m in h.session_data()["archived"]]
    assert archived[:4] == ["question one", "ok.", "question two", "ok."]  # done later
    assert len(summaries) >= 2


SLOW_PROMPT = 120.0  # seconds the first upkeep call would spend evaluating its prompt
ABORT_LAG = 0.3  # seconds the scripted llama.cpp takes to stop once its abort callback says so
ANSWER_BOUND = 20.0  # seconds from Enter to the answer: catches a turn that waits the call out
WAITED = re.compile(r"waited (\d+\.\d) s for the memory upkeep")


SAID = ["My name is Ada and I live in Lyon.", "question two", "question three"]


def test_on_the_embedded_model_a_question_stops_the_upkeep_call_while_it_evaluates_its_prompt(
    tmp_path: Path,
) -> None:
    """The local model's process (the real local_child.py, scripted llama_cpp): the step's summary
    call is still evaluating its prompt (native code, no token yet) when the next question is
    typed. The call is aborted there: the answer comes at once, from the same model process (no
    reload), and its usage line says how long the turn waited; the step is done after a later
    turn, its messages archived once and its memory line written once."""
    events = tmp_path / "events"
    cb = _stepping_chat(
        tmp_path,
        summary="MEMORY: the user's name is Ada; lives in Lyon\nSUMMARY: Ada lives in Lyon.",
        slow_prompts=[SLOW_PROMPT],
        pid_file=str(tmp_path / "child.pid"),
    )
    pid, took, shown = _question_during_the_step(cb, events)
    assert took < ANSWER_BOUND, took
    usage, later = shown.split("you said: question five")
    waited = WAITED.search(usage)
    assert waited is not None, usage
    assert ABORT_LAG - 0.05 <= float(waited.group(1)) < ANSWER_BOUND, usage
    assert "model loaded" not in usage + later  # the same process, the model still loaded
    assert file_text(tmp_path / "child.pid") == pid
    assert events.read_text(encoding="utf-8").split() == ["evaluating", "aborted"]
    archived = [m["content"] for m in cb.only_session()["archived"]]
    assert archived[:4] == [SAID[0], f"you said: {SAID[0]}", SAID[1], f"you said: {SAID[1]}"]
    assert len(archived) == len(set(archived))
    memory = cb.memory_file.read_text(encoding="utf-8")
    assert memory.count("Lyon") == 1, memory


def _stepping_chat(tmp_path: Path, **script: Any) -> CB:
    """A user of the scripted local model, which echoes the question, with a window of 2 messages
    (a step every 2 turns) and `tmp_path / "events"` for its evaluations."""
    cb = local_cb(
        tmp_path,
        tools=False,
        answers=["you said: {LAST}"],
        abort_lag=ABORT_LAG,
        events_file=str(tmp_path / "events"),
        **script,
    )
    config = yaml.safe_load(cb.config_file.read_text(encoding="utf-8"))
    config["persona"] = {"max_history_messages": 2}
    config["memory"] = {"overflow_summary": True, "auto_memory": False, "inject": "off"}
    cb.write_config(config)
    return cb


def _question_during_the_step(cb: CB, events: Path) -> tuple[str, float, str]:
    """The chat in a pty: SAID, then "question four" while the step's call evaluates, then
    "question five", then Ctrl-D. The model process's pid, the seconds from Enter to the answer
    of question four, and what the terminal showed from then on."""
    child = spawn(cb, cols=200, timeout=60)
    child.logfile_read = screen = io.StringIO()
    try:
        expect(child, TOOLBAR_END, timeout=60)
        for text in SAID:
            child.send(text + "\r")
            expect(child, f"you said: {text}", timeout=60)
            expect(child, TOOLBAR_END, timeout=60)
        pid = file_text(cb.root / "child.pid", timeout=60)
        file_text(events, timeout=60)  # the step's call is evaluating its prompt
        sent, before = time.monotonic(), screen.tell()
        child.send("question four\r")
        expect(child, "you said: question four", timeout=SLOW_PROMPT)
        took = time.monotonic() - sent
        expect(child, TOOLBAR_END, timeout=60)
        child.send("question five\r")  # the upkeep after it does the step
        expect(child, "you said: question five", timeout=60)
        expect(child, TOOLBAR_END, timeout=60)
        child.sendcontrol("d")  # quitting waits for a running upkeep
        child.expect(pexpect.EOF, timeout=60)
    finally:
        child.close(force=True)
    return pid, took, plain(screen.getvalue()[before:])


def test_on_the_embedded_model_a_step_stopped_twice_is_written_from_what_was_said(
    tmp_path: Path,
) -> None:
    """A user who types faster than the local model summarises: each step's call is stopped by the
    next question. After the second stop of the same step, the upkeep after the answer makes no
    call: the window steps, its messages archived once, and what the user said written once to
    MEMORY.md, in their words; the user is told why."""
    events = tmp_path / "events"
    cb = _stepping_chat(
        tmp_path,
        summary="MEMORY: the user is called Bob\nSUMMARY: Bob.",
        slow_prompts=[SLOW_PROMPT] * 3,  # every call of the step would outlast the chat
    )

    def calls_begun(n: int) -> None:
        wait_until(
            lambda: events.exists() and events.read_text("utf-8").split().count("evaluating") == n,
            f"summary call {n} evaluating its prompt",
            60,
        )

    child = spawn(cb, cols=200, timeout=60)
    child.logfile_read = screen = io.StringIO()
    try:
        expect(child, TOOLBAR_END, timeout=60)
        for text in [*SAID, "question four", "question five"]:
            if text.startswith("question f"):  # typed while the step's call evaluates
                calls_begun(1 if text == "question four" else 2)
            child.send(text + "\r")
            expect(child, f"you said: {text}", timeout=60)
            expect(child, TOOLBAR_END, timeout=60)
        child.sendcontrol("d")  # quitting waits for the upkeep after question five
        child.expect(pexpect.EOF, timeout=60)
    finally:
        child.close(force=True)
    shown = " ".join(plain(screen.getvalue()).split())
    assert "the window moved on 1 step without the model's summary" in shown, shown
    assert "kept what was said instead (2 lines)" in shown, shown  # the user's, the echo
    assert events.read_text("utf-8").split() == ["evaluating", "aborted"] * 2  # no third call
    archived = [m["content"] for m in cb.only_session()["archived"]]
    assert archived[:4] == [SAID[0], f"you said: {SAID[0]}", SAID[1], f"you said: {SAID[1]}"]
    assert len(archived) == len(set(archived))
    memory = cb.memory_file.read_text(encoding="utf-8")
    assert memory.count(f'the user said: "{SAID[0]}"') == 1, memory
    assert "Bob" not in memory, memory
