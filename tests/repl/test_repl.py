"""The REPL in-process: keys, turns, Ctrl-C, history, completion, toolbar, resume, driven by
the harness in tests/helpers/repl_harness.py.
"""

from __future__ import annotations

import os
import re
import signal
from pathlib import Path
from typing import Any

import fakeserver as fs
import pytest
from prompt_toolkit.completion import CompleteEvent
from prompt_toolkit.document import Document
from repl_harness import USAGE, Harness, interrupt_when, paragraphs
from waits import wait_until

from countbot_cli.conversation.engine import Engine
from countbot_cli.conversation.sessions.session import new_session
from countbot_cli.messages import Message
from countbot_cli.prompts import RECALL_END
from countbot_cli.repl.prompt import SlashCompleter

# ---- tests ----


def test_turn_renders_markdown_prints_usage_and_saves_only_after_the_first_turn(
    harness: Any, server: fs.FakeServer
) -> None:
    h = harness()
    server.add(fs.text("Hello **there**.\n\n- one\n- two\n", usage=USAGE))

    def nothing_saved_yet(h: Harness) -> None:
        h.wait_for("total")
        assert h.cb.session_files() == [] and server.chat_bodies() == []

    repl = h.run(["/help\r", "/tokens\r", nothing_saved_yet, "hi there\r"])
    out = h.text()
    assert "Hello there." in out and "**" not in out  # rendered, not raw markdown
    assert "• one" in out
    assert "1,234 in · 56 out tokens" in h.err.getvalue()
    saved = h.session_data()
    assert [(m["role"], m["content"]) for m in saved["messages"]] == [
        ("user", "hi there"),
        ("assistant", "Hello **there**.\n\n- one\n- two\n"),
    ]
    assert saved["title"] == "hi there"
    assert "test/test-model · hi there ·" in repl.toolbar()


def test_newline_keys_and_bracketed_paste_make_one_message_each(
    harness: Any, server: fs.FakeServer
) -> None:
    h = harness()
    server.add(fs.text("a"), fs.text("b"), fs.text("c"))
    paste = "\x1b[200~line 1\nline 2\r\nline 3\n\nline 5\x1b[201~"
    h.run(["first\x1b\rsecond\r", "x\ny\x1b\rz\r", paste + "\r"])
    users = [b["messages"][-1]["content"] for b in server.chat_bodies()]
    assert users == ["first\nsecond", "x\ny\nz", "line 1\nline 2\nline 3\n\nline 5"]


def test_history_file_persists_and_ctrl_r_finds_an_old_entry(
    tmp_path: Path, server: fs.FakeServer
) -> None:
    h = Harness(tmp_path, server)
    server.add(fs.text("one"), fs.text("two"))
    h.run(["remember the zebra\r", "multi\x1b\rline\r"])
    hist = h.history.read_text(encoding="utf-8")
    assert "+remember the zebra\n" in hist and "+multi\n+line\n" in hist
    assert oct(h.history.stat().st_mode & 0o777) == "0o600"
    # a second REPL (a new run) searches the same file with Ctrl-R
    h2 = Harness(tmp_path / "again", server)
    h2.history = h.history
    server.add(fs.text("three"))
    h2.run(
        [
            lambda h: h.wait_history(),
            "\x12zebr",
            lambda h: h.wait_search("zebr"),
            lambda h: h.send("\r"),  # the search ends on the entry it found
            lambda h: h.wait_line("remember the zebra"),
            lambda h: h.send("\r"),
        ]
    )
    assert server.chat_bodies()[-1]["messages"][-1]["content"] == "remember the zebra"


def test_ctrl_c_during_a_stream_keeps_the_partial_answer_and_the_next_turn_works(
    harness: Any, server: fs.FakeServer
) -> None:
    h = harness()
    server.add(fs.text(paragraphs(200), chunk_size=6, delay=0.02), fs.text("next answer"))
    h.run(["tell me a lot\r", interrupt_when("para 3"), "and then?\r"])
    assert server.wait_disconnects(1, timeout=5)  # the connection was closed at once
    out = h.text()
    assert "interrupted" in out and "para 150" not in out
    assert "next answer" in out
    msgs = h.session_data()["messages"]
    assert [m["role"] for m in msgs] == ["user", "assistant", "user", "assistant"]
    assert msgs[1]["status"] == "interrupted" and msgs[1]["content"].startswith("para 0\n\npara 1")
    assert "status" not in msgs[3]
    # what arrived is part of the next request's history
    sent = server.chat_bodies()[1]["messages"]
    assert [m["role"] for m in sent] == ["system", "user", "assistant", "user"]
    assert sent[2]["content"] == msgs[1]["content"]


def test_ctrl_c_before_any_text_leaves_a_valid_session(harness: Any, server: fs.FakeServer) -> None:
    h = harness()
    server.add(fs.hang(30), fs.text("fine"))

    def interrupt_when_waiting(h: Harness) -> None:
        server.wait_chats(1)  # the request is out: countbot waits for the first byte
        os.kill(os.getpid(), signal.SIGINT)

    h.run(["are you there?\r", interrupt_when_waiting, "hello again\r"])
    assert "nothing arrived" in h.err.getvalue()
    msgs = h.session_data()["messages"]
    assert [(m["role"], m.get("status")) for m in msgs] == [
        ("user", "interrupted"),
        ("user", None),
        ("assistant", None),
    ]
    # the unanswered question is not sent again
    sent = server.chat_bodies()[1]["messages"]
    assert [m["content"] for m in sent[1:]] == ["hello again"]


def test_ctrl_c_at_the_prompt_explains_or_clears_the_line(
    harness: Any, server: fs.FakeServer
) -> None:
    h = harness()
    h.run(["\x03", "some typing\x03\r"])
    assert "(Ctrl-D or /exit quits)" in h.text()
    assert server.chat_bodies() == []  # the cleared line was never sent


def test_unknown_commands_are_never_sent_and_double_slash_escapes(
    harness: Any, server: fs.FakeServer
) -> None:
    h = harness()
    server.add(fs.text("ok"), fs.text("ok"))
    h.run(["/modle gpt\r", "/resum\r", "//etc/hosts is what?\r", "/usr/bin/env is a path\r"])
    out = h.text()
    assert "unknown command /modle; did you mean /model," in out
    assert "unknown command /resum; did you mean /resume" in out
    users = [b["messages"][-1]["content"] for b in server.chat_bodies()]
    assert users == ["/etc/hosts is what?", "/usr/bin/env is a path"]


def test_failed_turn_shows_the_error_keeps_the_question_and_the_repl_goes_on(
    harness: Any, server: fs.FakeServer
) -> None:
    h = harness()
    server.add(fs.status(400), fs.text("recovered"))
    h.run(["break please\r", "fine now\r"])
    assert "error:" in h.err.getvalue() and "/retry" in h.err.getvalue()
    msgs = h.session_data()["messages"]
    assert [(m["role"], m.get("status")) for m in msgs] == [
        ("user", "failed"),
        ("user", None),
        ("assistant", None),
    ]


def test_resuming_shows_the_last_exchanges_rendered(harness: Any, server: fs.FakeServer) -> None:
    h = harness()
    s = new_session(provider="test", model="test-model", title="Old talk")
    for i in range(5):
        s.messages += [
            Message(role="user", content=f"question {i}"),
            Message(role="assistant", content=f"answer **{i}**"),
        ]
    s.messages[-1].status = "interrupted"
    h.store.create(s)
    server.add(fs.text("more"))
    h.run(["and more?\r"], session=h.store.load(s.id), is_new=False)
    out = h.text()
    assert "Resumed “Old talk” · 10 messages" in out
    assert "4 earlier messages" in out
    assert "question 1" not in out and "> question 2" in out and "> question 4" in out
    assert "answer 3" in out and "**" not in out
    assert "(interrupted)" in out
    sent = server.chat_bodies()[0]["messages"]
    assert len(sent) == 1 + 10 + 1  # the whole history went with the next message
    assert len(h.session_data()["messages"]) == 12


def test_completion_of_commands_and_their_arguments(
    harness: Any, server: fs.FakeServer, monkeypatch: pytest.MonkeyPatch
) -> None:
    h = harness()
    server.models = ["alpha-1", "beta-2", "test-model"]
    s = new_session(provider="test", model="test-model", title="Pinned")
    h.store.create(s)
    repl = h.make()
    comp = SlashCompleter(repl)

    def complete(text: str) -> list[str]:
        return [c.text for c in comp.get_completions(Document(text), CompleteEvent())]

    assert complete("/mo") == ["/model "]  # and the model list is fetched meanwhile
    wait_until(
        lambda: any(r.path.endswith("/models") for r in server.requests), "the model list fetched"
    )
    assert complete("/re") == ["/resume ", "/recap", "/rename ", "/retry"]  # a space: args
    assert complete("hello /re") == []
    assert complete("/resume ") == [s.id]
    meta = next(comp.get_completions(Document("/resume "), CompleteEvent())).display_meta_text
    assert meta.startswith("Pinned · 0 msgs · 20")
    assert complete(f"/delete {s.id[:3]}") == [s.id]
    assert complete("/model ") == ["alpha-1", "beta-2", "test-model"]
    assert complete("/model be") == ["beta-2"]
    assert complete("/tools a") == ["ask", "auto"]
    assert complete("/memory s") == ["search"]
    assert complete("/summary c") == ["clear"]
    (h.cb.work / "notes-file.md").write_text("x", encoding="utf-8")
    monkeypatch.chdir(h.cb.work)
    assert "es-file.md" in complete("/export not")
    assert len([r for r in server.requests if r.path.endswith("/models")]) == 1  # fetched once


def test_spinners_go_to_the_side_stream_and_memory_upkeep_runs_behind_the_prompt(
    harness: Any, server: fs.FakeServer
) -> None:
    h = harness(memory={"auto_messages": 2})
    server.add(fs.text("the answer", first_delay=0.5), fs.text("User says hi.", first_delay=0.5))
    h.run(["hi\r"], spinner=True)
    err = h.err.getvalue()
    assert "waiting for test-model" in err
    assert "\x1b[2K" in err  # the line is erased before the answer
    assert "waiting" not in h.text() and "the answer" in h.text()
    assert re.search(r"\d\.\d s\n", err)  # the answer's time
    assert "updating memory" not in err  # no spinner: the upkeep ran behind the next prompt
    # quitting waited for it to save
    assert "User says hi." in h.cb.memory_file.read_text(encoding="utf-8")


def test_a_turn_waiting_for_the_upkeep_on_a_serial_model_says_so(
    harness: Any, server: fs.FakeServer, monkeypatch: pytest.MonkeyPatch
) -> None:
    """On the embedded model (one call at a time) the next turn waits for a running upkeep:
    the spinner says so, then says it waits for the model. The loopback provider stands in
    for it here, counted as a provider that answers one call at a time."""
    from countbot_cli.conversation import chat

    monkeypatch.setattr(chat, "SERIAL_PROVIDERS", ("openai",))
    h = harness(memory={"auto_messages": 2})
    # the upkeep's summary call takes 3 s: the next message is typed while it runs
    server.add(fs.text("the answer"), fs.text("User says hi.", first_delay=3))
    server.add(fs.text("second answer"), fs.text("User says hi again."))
    h.run(["hi\r", "again\r"], spinner=True)
    err = h.err.getvalue()
    assert chat_bodies_in_order(server)[:3] == ["hi", "memory", "again"]
    wait = err.index("waiting for the memory upkeep")
    assert err.index("waiting for test-model", wait) > wait  # then for the model
    assert "second answer" in h.text()


def chat_bodies_in_order(server: fs.FakeServer) -> list[str]:
    """What each request asked: the user's message, or "memory" for an upkeep call."""
    out = []
    for body in server.chat_bodies():
        last = body["messages"][-1]["content"].rsplit(RECALL_END, 1)[-1].strip()  # typed words
        out.append(last if last in ("hi", "again") else "memory")
    return out


def test_control_sequences_and_markup_in_answers_are_neutralised(
    harness: Any, server: fs.FakeServer
) -> None:
    h = harness()
    server.add(fs.text("safe \x1b]0;pwned\x07[red]text[/red] \x1b[2Jend"))
    h.run(["hi\r"])
    out = h.text()
    assert "\x1b" not in out and "pwned" not in out
    assert "[red]text[/red]" in out


def test_the_approval_prompt_comes_after_the_text_settles(
    harness: Any, server: fs.FakeServer
) -> None:
    from countbot_cli.tools.approval import HOW_USER_ONCE, Decision

    h = harness(tools=True)
    seen: list[str] = []

    class Confirmer:
        def confirm(self, prepared: Any, reprepare: Any = None) -> Decision:
            seen.append(h.text())
            return Decision(True, HOW_USER_ONCE)

    server.add(
        fs.tool_calls(
            [("write_file", {"path": "note.txt", "content": "hi"})], content="Writing the note now."
        ),
        fs.text("Done."),
    )
    h.run(["write a note\r"], confirmer=Confirmer(), spinner=True)
    assert len(seen) == 1 and seen[0].endswith("Writing the note now.\n\n")  # then a blank line
    assert (h.cb.work / "note.txt").read_text(encoding="utf-8") == "hi"
    assert "Done." in h.text()
    assert "\n  ✓ · 1 line\n  Created note.txt" in h.text()  # the preview keeps its indent
    assert "running write_file" in h.err.getvalue()  # a spinner while the tool runs


def test_an_unexpected_error_in_a_turn_does_not_end_the_chat(
    harness: Any, server: fs.FakeServer, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.delenv("COUNTBOT_DEBUG", raising=False)
    h = harness()

    def broken(*a: Any, **kw: Any) -> Any:  # a turn that raises a bug (no server needed)
        raise RuntimeError("boom")

    monkeypatch.setattr(Engine, "run_turn", broken)
    h.run(["hello\r", "/help\r"])
    assert "unexpected error: RuntimeError: boom" in h.text()
    assert "Keys:" in h.text() and h.prompts_shown == 3


def test_the_preload_starts_after_the_first_prompt_is_drawn_and_is_joined_on_submit(
    harness: Any, server: fs.FakeServer
) -> None:
    h = harness()
    server.add(fs.text("ok"))
    started: list[bool] = []

    def check(h: Harness) -> None:
        wait_until(lambda: h.repl is not None and h.repl._preload_thread, "the preload thread")
        started.append(True)

    repl = h.run([check, "hi\r"], preload=True)
    assert started == [True]
    assert repl._preloaded.is_set()  # waited for by the first turn
    assert "ok" in h.text()


def test_the_tokenizer_tables_wait_for_a_count_that_matters(
    harness: Any, server: fs.FakeServer, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Issue 25 point 1: the REPL's idle start-up (first prompt, toolbar, the preload thread)
    and a short exchange load no BPE table; the toolbar counts with the estimate meanwhile.
    /tokens is a count that matters: it loads the model's encoding."""
    from countbot_cli.conversation import tokens

    loader = tokens.EncodingLoader()  # this test's own process-wide loader: nothing loaded yet
    monkeypatch.setattr(tokens, "DEFAULT_LOADER", loader)
    h = harness()
    server.add(fs.text("a short answer"))
    seen: dict[str, Any] = {}

    def idle(h: Harness) -> None:
        repl = h.repl
        assert repl is not None
        assert repl._preloaded.wait(20)  # a hang bound: the preload thread did its imports
        wait_until(lambda: repl.meter.autoload, "the preload to finish", 20)
        seen["idle"] = [n for n in tokens.SUPPORTED_ENCODINGS if loader.is_loaded(n)]
        seen["toolbar"] = repl.meter.summary(repl.conversation)

    def after_turn(h: Harness) -> None:
        h.wait_for("a short answer")
        seen["after turn"] = [n for n in tokens.SUPPORTED_ENCODINGS if loader.is_loaded(n)]

    name = tokens.encoding_for_model("test-model")
    h.run(
        [idle, "hi\r", after_turn, "/tokens\r", lambda h: h.wait_for("Next request to")],
        preload=True,
    )
    assert seen["idle"] == [] and seen["after turn"] == []
    assert seen["toolbar"].startswith("~")  # the estimate, marked as such
    assert loader.is_loaded(name)  # /tokens counted with the real tables


def test_near_the_window_the_toolbar_loads_the_tables_and_corrects_itself(
    harness: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A request near its window is a count that matters: once the first prompt is drawn the
    tables are loaded in the background and the toolbar's `~` estimate becomes the count."""
    from countbot_cli.conversation import tokens

    loader = tokens.EncodingLoader()
    monkeypatch.setattr(tokens, "DEFAULT_LOADER", loader)
    h = harness(provider={"context_window": 600})  # the system prompt fills it
    name = tokens.encoding_for_model("test-model")
    seen: dict[str, Any] = {}

    def corrected(h: Harness) -> None:
        repl = h.repl
        assert repl is not None
        wait_until(lambda: repl.meter.autoload, "the preload to finish", 20)
        seen["first"] = repl.meter.summary(repl.conversation)  # what the toolbar draws
        seen["loaded"] = wait_until(lambda: loader.is_loaded(name), "the tables to load", 20)
        seen["toolbar"] = repl.meter.summary(repl.conversation)
        seen["how"] = repl.meter.breakdown(repl.conversation, wait=False).how

    h.run([corrected], preload=True)
    assert seen["first"].startswith("~") and seen["loaded"]
    # counted with cl100k now (still `~`: test-model's own tokenizer is not tiktoken's)
    assert seen["how"].startswith("approximate (cl100k_base")
    assert seen["toolbar"] != seen["first"]
