"""The type-ahead queue on a real terminal: lines typed while an answer
streams are sent after it, in order, each its own message; Esc Enter stops the answer and sends
its line at once; a line not ended with Enter waits in the next prompt. And LineQueue's keys."""

from __future__ import annotations

import sys
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import fakeserver as fs
import pexpect
import pytest
from cbenv import CB, make_cb
from terminal import TOOLBAR_END, expect, spawn

from countbot_cli.repl.typeahead import LineQueue

pty_only = pytest.mark.skipif(sys.platform == "win32", reason="needs a POSIX pty")
SLOW = "".join(f"item {i}\n\n" for i in range(200))  # about 6 s at this pace


def users(server: fs.FakeServer) -> list[str]:
    return [b["messages"][-1]["content"] for b in server.chat_bodies()]


@contextmanager
def chat_on_a_pty(
    tmp_path: Path, *replies: fs.Reply
) -> Iterator[tuple[fs.FakeServer, CB, pexpect.spawn]]:
    """countbot's REPL on a pty, at its first prompt, answered by `replies`; closed after."""
    with fs.FakeServer() as server:
        cb = make_cb(tmp_path, server.base_url)
        server.add(*replies)
        child = spawn(cb)
        try:
            expect(child, TOOLBAR_END)
            yield server, cb, child
        finally:
            child.close(force=True)


def quit_at_the_prompt(child: pexpect.spawn) -> None:
    """Back at a prompt: clear what waits in it, Ctrl-D, and countbot exits."""
    expect(child, TOOLBAR_END)
    child.sendcontrol("u")
    child.sendcontrol("d")
    child.expect(pexpect.EOF)


@pty_only
def test_two_lines_typed_during_a_slow_stream_are_sent_after_it_in_order(tmp_path: Path) -> None:
    counting = fs.text("".join(f"item {i}\n\n" for i in range(40)), chunk_size=6, delay=0.02)
    answers = (fs.text("first answered"), fs.text("second answered"))
    with chat_on_a_pty(tmp_path, counting, *answers) as (server, cb, child):
        child.send("count please\r")
        expect(child, "item 2")
        child.send("first queued\r")
        child.send("second queux")
        child.send("\x7fed\r")  # edited before it was sent
        child.send("not finished")  # no Enter: waits in the next prompt
        expect(child, "› first queued   (queued: «second queued»)")  # shown, dimmed
        expect(child, "› second queued")
        expect(child, "second answered")
        expect(child, "> not finished")  # on the prompt line, to finish
        quit_at_the_prompt(child)
    assert users(server) == ["count please", "first queued", "second queued"]
    roles = [m["role"] for m in cb.only_session()["messages"]]
    assert roles == ["user", "assistant"] * 3  # each its own message, none merged


@pty_only
def test_esc_enter_stops_the_answer_and_sends_now(tmp_path: Path) -> None:
    slow = fs.text(SLOW, chunk_size=8, delay=0.03)
    with chat_on_a_pty(tmp_path, slow, fs.text("sent at once")) as (server, cb, child):
        child.send("tell me everything\r")
        expect(child, "item 3")
        child.send("stop and answer this\x1b\r")
        expect(child, "sent at once")
        quit_at_the_prompt(child)
    assert users(server) == ["tell me everything", "stop and answer this"]
    msgs = cb.only_session()["messages"]
    assert msgs[1]["status"] == "interrupted" and "item 199" not in msgs[1]["content"]
    assert msgs[2]["content"] == "stop and answer this"


@pty_only
def test_the_queue_is_shown_on_the_spinners_line_while_the_model_thinks(tmp_path: Path) -> None:
    late = fs.text("late answer", first_delay=4)
    with chat_on_a_pty(tmp_path, late, fs.text("then this")) as (server, _cb, child):
        child.send("think first\r")
        expect(child, "waiting for")
        child.send("next one\rhalf")
        expect(child, "queued: «next one»  · typing: half")
        expect(child, "then this")
        expect(child, "> half")
        quit_at_the_prompt(child)
    assert users(server) == ["think first", "next one"]


def test_line_queue_keys() -> None:
    q = LineQueue()
    assert q.feed("one\rtwo\r") is False and q.lines == ["one", "two"]
    q.feed("\x1b[A")  # Up: the last queued line back, to edit
    assert q.lines == ["one"] and q.typing == "two"
    q.feed("\x15")  # Ctrl-U: removed
    assert q.typing == "" and q.lines == ["one"]
    q.feed("a b c\x17\x17d\r")  # Ctrl-W twice
    assert q.lines == ["one", "a d"]
    q.feed("\x1b")  # an escape split across reads
    assert q.feed("\r") is False and q.lines == ["one", "a d"]  # Esc Enter on an empty line
    q.feed("now")
    assert q.feed("\x1b\r") is True and q.lines[0] == "now"
    assert q.summary() == "  · queued: «now» «one» «a d»"
    q.feed("\r\r  \r\x1b[Bhé")
    assert q.summary().endswith("  · typing: hé")
    assert q.lines == ["now", "one", "a d"] and q.take_typing() == "hé" and q.typing == ""
