"""REPL details a user meets, end to end in the in-process harness (prompt-toolkit pipe input,
DummyOutput, the loopback FakeServer): /system kept with the conversation, Tab completion of a
command, plurals, the goodbye line with the way back, Ctrl-C in a Ctrl-R search; and NO_COLOR,
which drops colour but still renders markdown (on a pseudo-terminal).
"""

from __future__ import annotations

import os
import re
import signal
import threading
from dataclasses import replace
from pathlib import Path
from typing import Any

import fakeserver as fs
import pytest
from repl_harness import Harness

from countbot_cli.conversation.sessions.session import Session, new_session
from countbot_cli.messages import Message
from countbot_cli.ui.stream import StreamView, make_console, render_markdown


def systems_sent(server: fs.FakeServer) -> list[str]:
    return [b["messages"][0]["content"] for b in server.chat_bodies()]


def test_system_text_is_kept_in_the_session_across_new_and_resume(
    harness: Any, server: fs.FakeServer
) -> None:
    h = harness()
    server.add(fs.text("oui"), fs.text("other"), fs.text("encore"), fs.text("toujours"))

    def resume_the_first(h: Harness) -> None:
        h.wait_prompt(h.repl, threading.Event())  # type: ignore[arg-type]
        h.send(f"/resume {titled(h, 'hi').id}\r")

    h.run(
        [
            "/system Always answer in French.\r",
            "hi\r",  # the first turn saves the session, instructions included
            "/new\r",
            "unrelated\r",
            resume_the_first,
            "/system\r",
            "more\r",
        ]
    )
    assert titled(h, "hi").system == "Always answer in French."
    assert titled(h, "unrelated").system == ""
    # a new run on the saved session (as `countbot -c` or `-s ID` opens it)
    h._seen = 0  # the prompts of the new REPL are counted from 0
    h.run(["and now?\r"], session=titled(h, "hi"), is_new=False)
    sent = systems_sent(server)
    assert "Always answer in French." in sent[0]
    assert "Always answer in French." not in sent[1]  # /new: a conversation without them
    assert "Always answer in French." in sent[2]  # /resume: kept
    assert "Always answer in French." in sent[3]  # a new run: kept
    assert "Extra instructions: Always answer in French." in h.text()


def titled(h: Harness, title: str) -> Session:
    return h.store.load(next(x["id"] for x in h.store.list() if x["title"] == title))


def test_a_resumed_sessions_system_text_wins_over_the_flag_and_clear_removes_it(
    harness: Any, server: fs.FakeServer
) -> None:
    h = harness()
    h.settings = replace(h.settings, system="FLAG TEXT")  # countbot --system "FLAG TEXT"
    s = new_session(provider="test", model="test-model", title="Kept")
    s.system = "SESSION TEXT"
    s.messages += [Message(role="user", content="q"), Message(role="assistant", content="a")]
    h.store.create(s)
    server.add(fs.text("one"), fs.text("two"), fs.text("three"))
    # as `countbot -c` / `-s ID` open it: the session loaded from its file
    h.run(
        ["first\r", "/system clear\r", "second\r", "/new\r", "third\r"],
        session=h.store.load(s.id),
        is_new=False,
    )
    sent = systems_sent(server)
    assert "SESSION TEXT" in sent[0] and "FLAG TEXT" not in sent[0]
    assert "SESSION TEXT" not in sent[1] and "FLAG TEXT" not in sent[1]  # cleared, flag too
    assert "FLAG TEXT" in sent[2]  # a new conversation starts with --system again
    assert h.store.load(s.id).system == ""


def test_one_tab_completes_a_command_with_its_space(harness: Any) -> None:
    h = harness()
    s = new_session(provider="test", model="test-model", title="Tabbed")
    s.messages += [Message(role="user", content="q"), Message(role="assistant", content="a")]
    h.store.create(s)

    h.run(
        [
            "/res",
            lambda h: h.wait_menu("/resume "),
            lambda h: h.send("\t"),
            lambda h: h.wait_line("/resume "),
            lambda h: h.send(s.id[:8] + "\r"),  # typed right after the completion
        ]
    )
    out = h.text()
    assert "unknown command" not in out
    assert "Resumed “Tabbed” · 2 messages" in out


def test_counts_of_one_are_singular(harness: Any, server: fs.FakeServer) -> None:
    h = harness()
    s = new_session(provider="test", model="test-model", title="Single")
    s.messages.append(Message(role="user", content="lonely question", status="interrupted"))
    h.store.create(s)
    server.add(fs.status(400))
    h.run(["/tokens\r", "again?\r", "/undo\r"], session=h.store.load(s.id), is_new=False)
    out = h.text()
    assert "Resumed “Single” · 1 message ·" in out
    assert "Removed the last exchange (1 message)" in out
    assert "1 messages" not in out and "1 entries" not in out


def test_leaving_a_saved_chat_says_how_to_resume_it(tmp_path: Path, server: fs.FakeServer) -> None:
    h = Harness(tmp_path, server)
    server.add(fs.text("hello"))
    repl = h.run(["hi\r"])  # then Ctrl-D
    sid = repl.conversation.session.id
    last = h.text().rstrip().splitlines()[-1]
    how = f"countbot -s {sid} (or countbot sessions resume {sid})"
    assert last == f"Session {sid} saved · resume it with: {how}"
    h2 = Harness(tmp_path / "two", server)
    h2.run(["/exit\r"], end=None)  # nothing was saved: nothing to resume
    assert "countbot -s" not in h2.text()
    h3 = Harness(tmp_path / "three", server)
    server.add(fs.text("again"))
    repl3 = h3.run(["hi\r", "/exit\r"], end=None)
    assert f"countbot -s {repl3.conversation.session.id}" in h3.text()


@pytest.mark.parametrize("how", ["key", "signal"])
def test_ctrl_c_in_a_history_search_cancels_the_search(
    harness: Any, server: fs.FakeServer, how: str
) -> None:
    """Ctrl-C as the key (raw mode) or as a real SIGINT (`kill -INT`, a terminal that signals)."""
    h = harness()
    h.history.write_text("\n# 2024-01-01 00:00:00\n+remember the zebra\n", encoding="utf-8")
    server.add(fs.text("fine"))

    def interrupt(h: Harness) -> None:
        if how == "key":
            h.send("\x03")
        else:
            os.kill(os.getpid(), signal.SIGINT)

    h.run(
        [
            lambda h: h.wait_history(),
            "\x12zebr",
            lambda h: h.wait_search("zebr"),
            interrupt,  # the search ends, the prompt stays
            lambda h: h.wait_search(None),
            lambda h: h.send("typed after\r"),
        ]
    )
    assert "(Ctrl-D or /exit quits)" not in h.text()
    assert [b["messages"][-1]["content"] for b in server.chat_bodies()] == ["typed after"]


def test_a_sigint_at_the_prompt_clears_the_line_like_ctrl_c(
    harness: Any, server: fs.FakeServer
) -> None:
    h = harness()
    server.add(fs.text("fine"))
    h.run(
        [
            "half a thought",
            lambda h: h.wait_line("half a thought"),
            lambda h: os.kill(os.getpid(), signal.SIGINT),
            lambda h: h.wait_line(""),
            lambda h: h.send("whole\r"),
        ]
    )
    assert "(Ctrl-D or /exit quits)" not in h.text()
    assert [b["messages"][-1]["content"] for b in server.chat_bodies()] == ["whole"]


NO_COLOR_DOC = (
    "# Title\n\nSome **bold** and `code`.\n\n| a | b |\n|---|---|\n| 1 | 2 |\n\n"
    "```python\nx = 1\n```\n"
)
_SGR_PARAMS = re.compile(r"\x1b\[([0-9;]*)m")


def _read_pty(fd: int) -> str:
    import select

    chunks = []
    while select.select([fd], [], [], 0.2)[0]:
        try:
            data = os.read(fd, 65536)
        except OSError:
            break
        if not data:
            break
        chunks.append(data)
    return b"".join(chunks).decode("utf-8", "replace")


def test_no_color_renders_markdown_without_colours(monkeypatch: pytest.MonkeyPatch) -> None:
    """https://no-color.org: NO_COLOR drops colour, not the rendering (tables, headings, code)."""
    monkeypatch.setenv("NO_COLOR", "1")
    monkeypatch.setenv("TERM", "xterm-256color")
    monkeypatch.delenv("COLORTERM", raising=False)
    master, slave = os.openpty()
    try:
        with os.fdopen(slave, "w", closefd=False) as tty:
            console = make_console(file=tty)
            render_markdown(console, NO_COLOR_DOC)  # a resumed session's last exchanges
            view = StreamView(console)  # a streamed answer
            for i in range(0, len(NO_COLOR_DOC), 5):
                view.feed(NO_COLOR_DOC[i : i + 5])
            view.finish()
            tty.flush()
        out = _read_pty(master)
    finally:
        os.close(master)
        os.close(slave)
    assert "|---|" not in out and "**bold**" not in out and "```" not in out  # rendered
    assert "x = 1" in out and "\x1b[1;4mTitle" in out  # the heading is bold and underlined
    params = {p for m in _SGR_PARAMS.findall(out) for p in m.split(";") if p}
    assert "1" in params  # bold is kept
    colours = {p for p in params if 30 <= int(p) <= 49 or 90 <= int(p) <= 107}
    assert colours == set(), colours
