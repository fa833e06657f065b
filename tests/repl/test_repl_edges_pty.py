"""The chat's rough edges, in a real pseudo-terminal against the loopback server: `/help` in
the terminal's width, the toolbar after a fallback, what `/context` offers for a pinned memory
line, Ctrl-D during an answer."""

from __future__ import annotations

import json
import re
import sys
from pathlib import Path

import fakeserver as fs
import pexpect
import pytest
from cbenv import make_cb, provider_config
from terminal import TOOLBAR_END, expect, plain, spawn

from countbot_cli.repl.slash import COMMANDS, KEYS_HELP

pytestmark = pytest.mark.skipif(sys.platform == "win32", reason="needs a POSIX pty")

NO_UPKEEP = {"overflow_summary": False, "session_summary": False, "auto_memory": False}
TOOLBAR = "/8.2k ("  # the toolbar's context meter: drawn in 40 columns too
TEMPLATE = "Review this code for bugs, unclear names and missing tests"  # its first line: ≤ 60


@pytest.mark.parametrize("cols", [120, 60, 40])
def test_help_wraps_at_word_boundaries_in_the_terminals_width(tmp_path: Path, cols: int) -> None:
    """No line of `/help` is wider than the terminal (which would cut a word where it wraps it),
    no word is cut, nothing is lost; a description beside its command when there is room, under
    it when the terminal is narrow."""
    cb = make_cb(tmp_path, "http://127.0.0.1:9/v1")
    (cb.user_home / "templates").mkdir(parents=True)
    (cb.user_home / "templates" / "review.md").write_text(
        TEMPLATE + "\n\n$ARGUMENTS\n", encoding="utf-8"
    )
    child = spawn(cb, cols=cols, rows=60)
    try:
        expect(child, TOOLBAR)
        child.send("/help\r")
        expect(child, "Commands:")
        child.expect(r"last\s+queued\s+line")
        shown = plain(child.before + child.after).replace("\r\n", "\n")
        expect(child, TOOLBAR)
        child.sendcontrol("d")
        child.expect(pexpect.EOF)
    finally:
        child.close(force=True)
    commands, rest = shown.split("Templates and roles:")
    template, keys = rest.split("Keys:")
    assert max(len(line) for line in shown.splitlines()) <= cols, shown
    said = [f"/{c.name} {c.args} {c.help}" for c in COMMANDS]
    assert commands.split() == " ".join(said).split()
    assert template.split() == ["/review", "template:", *TEMPLATE.split()]
    assert keys.split() == KEYS_HELP.split()
    help_row = next(i for i, line in enumerate(shown.splitlines()) if "/help [COMMAND]" in line)
    row, below = shown.splitlines()[help_row : help_row + 2]
    if cols >= 100:  # side by side
        assert re.fullmatch(r"  /help \[COMMAND\] +commands and keys", row), row
    else:  # stacked: the description under its command
        assert (row, below.strip()) == ("  /help [COMMAND]", "commands and keys"), (row, below)


def test_context_offers_unpin_for_a_pinned_line_and_unpin_works(tmp_path: Path) -> None:
    with fs.FakeServer() as server:
        cb = make_cb(tmp_path, server.base_url, memory=NO_UPKEEP)
        assert cb.run("memory", "add", "The user drinks oolong tea").returncode == 0
        assert cb.run("memory", "add", "The user keeps bees on the roof").returncode == 0
        assert cb.run("memory", "pin", "2").returncode == 0
        server.add(fs.text("Noted."))
        child = spawn(cb)
        try:
            expect(child, TOOLBAR_END)
            child.send("hello\r")
            expect(child, "Noted.")
            expect(child, TOOLBAR_END)
            child.send("/context\r")
            expect(child, "pinned memory:")
            child.expect(r"your message")
            row = child.before.splitlines()[0]
            assert "bees on the roof" in row, row
            assert row.rstrip().endswith("(countbot memory unpin 2)"), row
            expect(child, TOOLBAR_END)
            child.sendcontrol("d")
            child.expect(pexpect.EOF)
        finally:
            child.close(force=True)
        # the offered command does what it says: the line is no longer pinned
        done = cb.run("memory", "unpin", "2")
        assert done.returncode == 0 and "Unpinned: entry 2" in done.stdout, done.stdout
        shown = json.loads(cb.run("memory", "show", "--json").stdout)
        assert [(e["number"], e["pinned"]) for e in shown] == [(1, False), (2, False)]


def test_ctrl_d_during_an_answer_stops_it_keeps_it_and_quits(tmp_path: Path) -> None:
    """Ctrl-D while an answer streams stops it, keeps what arrived (as Ctrl-C does), and ends
    the chat as Ctrl-D at the prompt does: exit 0, the session saved and named; a line typed
    ahead and not sent is kept in the input history."""
    with fs.FakeServer() as server:
        cb = make_cb(tmp_path, server.base_url, memory=NO_UPKEEP)
        server.add(fs.text("".join(f"para {i}\n\n" for i in range(400)), chunk_size=8, delay=0.03))
        child = spawn(cb)
        try:
            expect(child, TOOLBAR_END)
            child.send("tell me everything\r")
            expect(child, "para 6")
            child.send("a queued line\r")
            child.sendcontrol("d")
            child.expect(pexpect.EOF, timeout=10)  # the whole answer takes 15 s
            shown = plain(child.before)
        finally:
            child.close(force=True)
        assert child.exitstatus == 0, (child.exitstatus, child.signalstatus, shown[-300:])
        assert (
            "interrupted" in shown
            and "not sent (kept in the input history): «a queued line»" in shown
        )
        sid = cb.only_session()["id"]
        assert f"Session {sid} saved" in shown
        msgs = cb.only_session()["messages"]
        assert [m["role"] for m in msgs] == ["user", "assistant"]
        assert msgs[1]["status"] == "interrupted"
        assert (
            msgs[1]["content"].startswith("para 0\n\npara 1")
            and "para 399" not in msgs[1]["content"]
        )
        assert len(server.chat_bodies()) == 1  # the queued line was not sent
        assert "+a queued line" in (cb.work / ".countbot_history").read_text(encoding="utf-8")


def test_after_a_fallback_the_toolbar_names_the_link_that_answers_and_its_window(
    tmp_path: Path,
) -> None:
    """The chosen provider (`test`, 32k window) is down; the fallback link `b` (model-b, a 4k
    window) answers, and answers the next turns: the toolbar names it and its window, and
    `/context` reports the request it was sent, fitted to that window."""
    with fs.FakeServer() as down, fs.FakeServer() as second:
        down.default = fs.status(503)
        first = provider_config(down.base_url, max_retries=0, context_window=32000)
        link = provider_config(second.base_url, model="model-b", max_retries=0, context_window=4096)
        providers = {"test": first["providers"]["test"], "b": link["providers"]["test"]}
        cb = make_cb(tmp_path, down.base_url, providers=providers, fallback=["b"], memory=NO_UPKEEP)
        second.add(fs.text("b answers", model="model-b"))
        child = spawn(cb)
        try:
            expect(child, "test/test-model · new conversation · ~")
            expect(child, "/32k (")
            child.send("hello\r")
            expect(child, "answering with b (model-b)")
            expect(child, "b answers")
            expect(child, " b/model-b · hello · ~")  # the next prompt's toolbar
            expect(child, "/4.1k (")
            child.send("/context\r")  # the last request: the link's, fitted to its window
            expect(child, "Last request to model-b")
            expect(child, "context window: 4,096 tokens")
            expect(child, " b/model-b · hello · ~")  # the prompt again
            child.sendcontrol("d")
            child.expect(pexpect.EOF)
        finally:
            child.close(force=True)
        assert child.exitstatus == 0
        assert len(down.chat_bodies()) == 1 and len(second.chat_bodies()) == 1
