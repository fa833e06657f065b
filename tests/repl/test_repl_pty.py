"""The REPL and the terminal. The installed `countbot` in a real pseudo-terminal (pexpect),
against the in-process loopback server: type a message, see the streamed answer, type ahead
during a stream, Ctrl-C a slow stream, check the session file, quit with Ctrl-D; the renderer
imported ahead of the first answer; and, in tmux (a terminal that re-wraps its lines), a
resize in the middle of an answer. Then the terminal-facing pieces alone: echo off while a turn
streams, the spinner and side notes on stderr, a stalled stream's last frame, the usage line,
the input history file.

The byte stream is not a screen: expect unique strings, and answer prompt_toolkit's cursor
position request (ESC[6n) the way a terminal does, or it never draws the bottom toolbar.
"""

from __future__ import annotations

import io
import re
import shutil
import subprocess
import sys
import time
from collections import Counter
from collections.abc import Callable
from pathlib import Path

import fakeserver as fs
import pexpect
import pytest
from cbenv import COUNTBOT, TEST_KEY, make_cb
from rich.console import Console
from terminal import TOOLBAR_END, expect, spawn, terminated
from waits import wait_until

pytestmark = pytest.mark.skipif(sys.platform == "win32", reason="needs a POSIX pty")


def test_chat_in_a_pty_streams_interrupts_saves_and_quits(tmp_path: Path) -> None:
    with fs.FakeServer() as server:
        cb = make_cb(tmp_path, server.base_url)
        started = time.monotonic()
        child = spawn(cb)
        try:
            expect(child, TOOLBAR_END)
            time_to_prompt = time.monotonic() - started
            assert cb.session_files() == []  # nothing is written before the first turn

            server.add(fs.text("Hello from the **loopback** server.", chunk_size=4, delay=0.01))
            child.send("hi there\r")
            expect(child, "loopback")
            expect(child, TOOLBAR_END)

            _type_ahead_during_a_stream(child, server)
            _interrupt_a_stream(child, server)
            msgs = cb.only_session()["messages"]
            assert [m["role"] for m in msgs] == ["user", "assistant"] * 4
            assert msgs[1]["content"] == "Hello from the **loopback** server."
            last = msgs[7]
            assert last["status"] == "interrupted"
            assert (
                last["content"].startswith("para 0\n\npara 1\n\n")
                and "para 399" not in last["content"]
            )

            child.sendintr()  # at an empty prompt: a hint, not an exit
            expect(child, "/exit quits")
            expect(child, TOOLBAR_END)  # the next prompt is up (raw mode): keys are not lost
            child.sendcontrol("d")
            child.expect(pexpect.EOF)
        finally:
            child.close(force=True)
        assert child.exitstatus == 0, (child.exitstatus, child.signalstatus)
        assert TEST_KEY not in (cb.work / ".countbot_history").read_text(encoding="utf-8")
        assert "+tell me everything" in (cb.work / ".countbot_history").read_text(encoding="utf-8")
        print(f"time to prompt: {time_to_prompt * 1000:.0f} ms")


def _type_ahead_during_a_stream(child: pexpect.spawn, server: fs.FakeServer) -> None:
    """A line typed while an answer streams is not echoed into it and is sent when the prompt
    returns."""
    server.add(fs.text("".join(f"item {i}\n\n" for i in range(30)), chunk_size=5, delay=0.01))
    server.add(fs.text("queued answer"))
    child.send("count please\r")
    expect(child, "item 3")
    child.send("queued question\r")
    expect(child, "queued answer")
    expect(child, TOOLBAR_END)
    assert [b["messages"][-1]["content"] for b in server.chat_bodies()[1:]] == [
        "count please",
        "queued question",
    ]


def _interrupt_a_stream(child: pexpect.spawn, server: fs.FakeServer) -> None:
    """Ctrl-C (SIGINT from the pty's line discipline) mid-stream: "interrupted", the prompt
    back, the connection closed."""
    answer = "".join(f"para {i}\n\n" for i in range(400))
    server.add(fs.text(answer, chunk_size=8, delay=0.03))
    child.send("tell me everything\r")
    expect(child, "para 6")
    child.sendintr()
    expect(child, "interrupted")
    expect(child, TOOLBAR_END)
    assert server.wait_disconnects(1, timeout=5)


def test_cli_chat_needs_a_terminal_and_chat_flags_need_no_command(tmp_path: Path) -> None:
    cb = make_cb(tmp_path, "http://127.0.0.1:9/v1")
    for args in (["chat"], ["sessions", "resume", "abc"]):
        proc = cb.run(*args)
        assert proc.returncode == 2, (args, proc.stderr)
        assert "the interactive chat needs a terminal" in proc.stderr
    # `countbot` alone with stdin piped is `countbot ask` (cli/routing.py): here, nothing to ask
    proc = cb.run()
    assert proc.returncode == 2 and "nothing to ask" in proc.stderr
    proc = cb.run("-m", "x", "sessions", "list")
    assert proc.returncode == 2 and "only apply to the chat" in proc.stderr
    proc = cb.run("--help")
    assert proc.returncode == 0 and "chat" in proc.stdout and "interactive chat" in proc.stdout
    assert cb.session_files() == []


def test_resume_in_a_pty_shows_the_last_exchanges(tmp_path: Path) -> None:
    with fs.FakeServer() as server:
        cb = make_cb(tmp_path, server.base_url)
        server.add(fs.text("The capital is **Paris**."))
        assert cb.run("ask", "capital of France?").returncode == 0
        sid = cb.only_session()["id"]
        child = spawn(cb, "sessions", "resume", sid[:6], cols=60)
        try:
            expect(child, "countbot · test/test-model · /help\x1b[0m\r\n")  # fits in 60
            expect(child, "capital of France?")
            expect(child, "Paris")
            # the toolbar fits 60 columns: the title dropped, the model and the context kept
            expect(child, "test/test-model · ~")
            child.sendcontrol("d")
            child.expect(pexpect.EOF)
        finally:
            child.close(force=True)
        assert child.exitstatus == 0


def test_quiet_keys_turns_echo_off_for_a_turn_and_back_on_for_a_question() -> None:
    import os
    import pty
    import termios

    from countbot_cli.ui.terminal import QuietKeys

    master, slave = pty.openpty()
    try:
        with os.fdopen(slave, "r", closefd=False) as tty:

            def echo_and_icrnl() -> tuple[bool, bool]:
                attrs = termios.tcgetattr(slave)
                return bool(attrs[3] & termios.ECHO), bool(attrs[0] & termios.ICRNL)

            assert echo_and_icrnl() == (True, True)
            with QuietKeys(tty) as keys:
                assert echo_and_icrnl() == (False, False)
                with keys.normal():  # e.g. an approval prompt reading a line
                    assert echo_and_icrnl() == (True, True)
                assert echo_and_icrnl() == (False, False)
                assert termios.tcgetattr(slave)[3] & termios.ISIG  # Ctrl-C still signals
            assert echo_and_icrnl() == (True, True)
    finally:
        os.close(master)
        os.close(slave)


IMPORT_WATCH = """
import sys, threading
class _Watch:
    def find_spec(self, name, path=None, target=None):
        if name == "rich.markdown":
            with open(%r, "a") as log:
                log.write(threading.current_thread().name + "\\n")
        return None
sys.meta_path.insert(0, _Watch())
"""


def test_the_first_answer_pays_nothing_for_importing_the_renderer(tmp_path: Path) -> None:
    """The renderer is imported while the user types, so the first answer pays nothing for it:
    `rich.markdown` is imported once, by the preload thread, before the first answer is drawn.
    (What that saves, 40-60 ms, is measured by bench/bench_render.py.)"""
    watch = tmp_path / "watch"
    watch.mkdir()
    log = tmp_path / "imports.log"
    (watch / "sitecustomize.py").write_text(IMPORT_WATCH % str(log), encoding="utf-8")
    with fs.FakeServer() as server:
        cb = make_cb(tmp_path, server.base_url)
        child = spawn(cb, env={"PYTHONPATH": str(watch)})
        try:
            expect(child, TOOLBAR_END)
            server.add(fs.text("Zq0x, the **answer**", first_delay=0.5))
            child.send("question 0\r")
            expect(child, "Zq0")
            expect(child, TOOLBAR_END)
            child.sendcontrol("d")
            child.expect(pexpect.EOF)
        finally:
            child.close(force=True)
    assert log.read_text(encoding="utf-8").split() == ["countbot-preload"]


def _chars(text: str) -> Counter[str]:
    """The characters of a text, without spacing and the rules whose length follows the width."""
    return Counter(re.sub(r"[\s─━]+", "", text))


@pytest.mark.slow
@pytest.mark.skipif(shutil.which("tmux") is None, reason="needs tmux")
def test_narrowing_tmux_in_mid_answer_duplicates_and_loses_nothing(tmp_path: Path) -> None:
    from rich.markdown import Markdown

    parts = [f"## Part {i}\n\n" + f"sentence {i} goes on and on. " * 12 + "\n\n" for i in range(6)]
    items = "".join(f"- item {i} of the long list, " + "words " * 14 + "\n" for i in range(12))
    answer = "".join(parts[:3]) + items + "\n" + "".join(parts[3:])
    sock = f"cbtest{id(tmp_path)}"
    tmux = ["tmux", "-L", sock, "-f", "/dev/null"]

    def screen() -> str:
        cmd = [*tmux, "capture-pane", "-p", "-J", "-S", "-", "-E", "-", "-t", "cb"]
        return subprocess.run(cmd, capture_output=True, text=True, check=True).stdout

    def wait(pred: Callable[[str], object], what: str, timeout: float = 20) -> str:
        """The pane's text once `pred` holds for it."""
        return wait_until(lambda: next((t for t in [screen()] if pred(t)), ""), what, timeout)

    with fs.FakeServer() as server:
        cb = make_cb(tmp_path, server.base_url)
        env = [f"{k}={v}" for k, v in cb.env.items()]
        cmd = ["new-session", "-d", "-s", "cb", "-x", "100", "-y", "30", "-c", str(cb.work)]
        subprocess.run([*tmux, *cmd, "env", "-i", *env, COUNTBOT], check=True)
        try:
            wait(lambda t: TOOLBAR_END in t, "no prompt")
            server.add(fs.text(answer, chunk_size=6, delay=0.01))
            subprocess.run([*tmux, "send-keys", "-t", "cb", "tell me\r"], check=True)
            wait(lambda t: "item 5 of" in t, "the list did not come")  # a tall live region
            subprocess.run([*tmux, "resize-window", "-t", "cb", "-x", "64"], check=True)
            final = wait(lambda t: re.search(r"^\d+\.\d s$", t, re.M), "the answer did not end")
        finally:  # what the screen showed is all this test reads: no need to quit politely
            subprocess.run([*tmux, "kill-server"], capture_output=True)
    shown = final.split("> tell me", 1)[1]
    shown = shown[: re.search(r"^\d+\.\d s$", shown, re.M).start()]  # type: ignore[union-attr]
    one_shot = io.StringIO()
    Console(file=one_shot, width=100, color_system=None).print(Markdown(answer))
    assert _chars(shown) == _chars(one_shot.getvalue())


def test_the_spinner_is_dimmed_under_no_color_too(monkeypatch: pytest.MonkeyPatch) -> None:
    from countbot_cli.repl.view import Spinner

    for no_color in ("", "1"):  # dim is not a colour (ui/status.py)
        monkeypatch.setenv("NO_COLOR", no_color)
        err = io.StringIO()
        spinner = Spinner(err, "waiting")
        spinner.start()
        wait_until(lambda e=err: "waiting" in e.getvalue(), "the spinner's first frame")
        spinner.stop()
        assert "\x1b[2m- waiting" in err.getvalue() or "\x1b[2m⠋ waiting" in err.getvalue()


def test_side_notes_erase_the_spinner_line_and_the_spinner_goes_on() -> None:
    from countbot_cli.repl.view import ReplView

    out, err = io.StringIO(), io.StringIO()
    console = Console(file=out, width=80, color_system=None)
    side = Console(file=err, width=80, color_system=None)
    view = ReplView(console, side, waiting="waiting for m", spinner=True)
    wait_until(lambda: "waiting for m" in err.getvalue(), "the spinner")
    view.side_note("countbot: retrying in 1 s\n")
    wait_until(
        lambda: "waiting for m" in err.getvalue().split("retrying in 1 s\n")[1], "the spinner"
    )
    view.text("Hi there.")
    view.finish()
    before, after = err.getvalue().split("countbot: retrying in 1 s\n")
    assert "waiting for m" in before and before.endswith("\r\x1b[2K")
    assert "waiting for m" in after and after.endswith("\r\x1b[2K")
    assert out.getvalue().strip() == "Hi there."


def test_a_stalled_stream_still_draws_its_pending_frame() -> None:
    from countbot_cli.repl.view import ReplView

    out = io.StringIO()
    console = Console(file=out, width=80, height=20, force_terminal=True, color_system=None)
    view = ReplView(console, Console(file=io.StringIO()), waiting="w")
    view.text("Hello")  # the first frame is drawn at once
    view.text(" world, and then nothing for a while")  # throttled: drawn later
    assert "world" not in out.getvalue()
    wait_until(lambda: "world" in out.getvalue(), "the pending frame")  # the stream stalls
    view.finish()
    drawn = len(out.getvalue())
    time.sleep(0.2)  # a grace period for a late frame, which must not come: no event to wait on
    assert len(out.getvalue()) == drawn  # nothing is drawn after the turn


def test_usage_line_shows_the_local_models_load_time_and_speed() -> None:
    from countbot_cli.conversation.turn_record import ModelCall, TurnResult
    from countbot_cli.messages import Message, Usage
    from countbot_cli.provider.local import LocalStats
    from countbot_cli.ui.transcript import usage_line

    result = TurnResult(
        user=Message(role="user", content="hello"),
        session_id="s",
        answer="hi",
        model="m",
        calls=[ModelCall("m", Usage(prompt_tokens=10, completion_tokens=96, total_tokens=106))],
    )
    stats = LocalStats(
        load_seconds=0.4,
        first_token_seconds=0.06,
        generation_seconds=0.8,
        prompt_tokens=10,
        completion_tokens=96,
    )
    line = usage_line(result, 1.3, stats)
    assert "loaded in 0.4 s" in line and "tokens/s" in line and line.endswith("1.3 s")
    assert usage_line(result, 1.3) == "10 in · 96 out tokens · 1.3 s"


def test_trim_history_keeps_the_newest_entries(tmp_path: Path) -> None:
    from prompt_toolkit.history import FileHistory

    from countbot_cli.repl.prompt import trim_history

    path = tmp_path / "hist"
    hist = FileHistory(str(path))
    for i in range(50):
        hist.store_string(f"entry {i}\nsecond line {i}")
    before = path.stat().st_size
    trim_history(path, max_bytes=10_000_000, keep=5)
    assert path.stat().st_size == before  # under the limit: untouched
    trim_history(path, max_bytes=100, keep=5)
    loaded = list(FileHistory(str(path)).load_history_strings())
    assert loaded == [f"entry {i}\nsecond line {i}" for i in range(49, 44, -1)]


def test_sigterm_at_the_prompt_quits_and_mid_answer_saves_first(tmp_path: Path) -> None:
    import json
    import signal

    with fs.FakeServer() as server:
        cb = make_cb(tmp_path, server.base_url)
        child = spawn(cb)
        try:
            expect(child, TOOLBAR_END)
            child.kill(signal.SIGTERM)  # idle at the prompt: the chat ends (not "press Ctrl-D")
            child.expect(pexpect.EOF, timeout=10)
        finally:
            child.close(force=True)
        assert child.exitstatus == 130

        child = spawn(cb)
        try:
            expect(child, TOOLBAR_END)
            server.add(fs.text("word " * 400, chunk_size=5, delay=0.02))
            child.send("a long one\r")
            expect(child, "word word word")
            child.kill(signal.SIGTERM)
            child.expect(pexpect.EOF, timeout=10)
        finally:
            child.close(force=True)
        assert child.exitstatus == 130
        saved = json.loads(cb.session_files()[0].read_text(encoding="utf-8"))
        assert [m["role"] for m in saved["messages"]] == ["user", "assistant"]
        assert saved["messages"][1]["status"] == "interrupted"
        assert saved["messages"][1]["content"].startswith("word word")


@pytest.mark.parametrize("how", ["/delete", "/edit"])
def test_sigterm_at_a_question_or_while_editing_quits_instead_of_cancelling(
    tmp_path: Path, how: str
) -> None:
    """SIGTERM (errors.Terminated) ends the chat wherever it waits for the user: not taken for
    Ctrl-C at a yes/no question (that answered "no" and the chat went on) nor while `/edit`
    holds the last question to change (that cancelled the edit)."""
    with fs.FakeServer() as server:
        cb = make_cb(tmp_path, server.base_url)
        server.add(fs.text("Hello there."))
        child = spawn(cb)
        try:
            expect(child, TOOLBAR_END)
            child.send("hi\r")
            expect(child, "Hello there.")
            expect(child, TOOLBAR_END)
            child.send(f"{how}\r")
            expect(child, "[y/N]" if how == "/delete" else "Edit the question")
        except BaseException:
            child.close(force=True)
            raise
        assert "Nothing deleted" not in terminated(child)
        assert len(cb.session_files()) == 1 and len(server.chat_bodies()) == 1


def test_sigterm_while_quitting_waits_for_the_memory_upkeep_ends_with_130(tmp_path: Path) -> None:
    """Ctrl-D with the memory upkeep still running waits for it ("Ctrl-C skips it"); a SIGTERM
    then skips it too but countbot ends as interrupted (130), not as a chat that ended well."""
    import threading

    release = threading.Event()

    def respond(body: dict[str, object]) -> fs.Reply:
        msgs = body["messages"]
        assert isinstance(msgs, list)
        if msgs[0]["role"] == "system":
            return fs.text("Hello there.")
        release.wait(30)  # the upkeep's summary request: held (a hang bound, not a timing)
        return fs.text("User says hi.")

    with fs.FakeServer() as server:
        server.responder = respond
        cb = make_cb(tmp_path, server.base_url, memory={"auto_messages": 2})
        child = spawn(cb)
        try:
            try:
                expect(child, TOOLBAR_END)
                child.send("hi\r")
                expect(child, "Hello there.")
                expect(child, TOOLBAR_END)
                child.sendeof()
                expect(child, "finishing the memory upkeep")
            except BaseException:
                child.close(force=True)
                raise
            shown = terminated(child)
        finally:
            release.set()
        assert "saved · resume it with" not in shown
        assert len(cb.session_files()) == 1


def test_ctrl_c_at_the_approval_prompt_starts_a_new_line(tmp_path: Path) -> None:
    """The terminal echoes ^C after the question; "interrupted" must not follow it on that line,
    and the turn is said to have stopped in a tool call (not "nothing arrived")."""
    with fs.FakeServer() as server:
        cb = make_cb(tmp_path, server.base_url, tools={"enabled": True, "workspace": "."})
        child = spawn(cb)
        try:
            expect(child, "tools ask")
            server.add(fs.tool_calls([("write_file", {"path": "note.txt", "content": "hi"})]))
            child.send("write a note\r")
            expect(child, "(default: no) ")
            wait_until(child.getecho, "the question to turn the echo back on")  # ^C is shown
            child.sendintr()
            expect(child, "/retry asks again")
            shown = child.before
            expect(child, "tools ask")
            child.sendcontrol("d")
            child.expect(pexpect.EOF)
        finally:
            child.close(force=True)
        plain = re.sub(r"\x1b\[[0-9;?]*[A-Za-z]", "", shown)
        assert "^Cinterrupted" not in plain and re.search(r"\^C\r?\n", plain), plain[-300:]
        assert "interrupted during a tool call" in plain and "nothing arrived" not in plain
        assert not (cb.work / "note.txt").exists()
