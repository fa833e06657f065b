"""The installed `countbot` in a real pseudo-terminal (pexpect), against the in-process loopback
server: type a message, see the streamed answer, type ahead during a stream, Ctrl-C a slow
stream, check the session file, quit with Ctrl-D.

The byte stream is not a screen: expect unique strings, and answer prompt_toolkit's cursor
position request (ESC[6n) the way a terminal does, or it never draws the bottom toolbar.
"""

from __future__ import annotations

import sys
import time
from pathlib import Path

import fakeserver as fs
import pexpect
import pytest
from cbenv import COUNTBOT, TEST_KEY, make_cb

pytestmark = pytest.mark.skipif(sys.platform == "win32", reason="needs a POSIX pty")

CPR = "\x1b[6n"
TOOLBAR_END = "no tools"  # the last field of the bottom toolbar (tools are off in this config)


def expect(child: pexpect.spawn, text: str, timeout: float = 15) -> None:
    """expect_exact that answers cursor position requests like a real terminal."""
    while child.expect_exact([CPR, text], timeout=timeout) == 0:
        child.send("\x1b[1;1R")


def spawn(cb_env: dict[str, str], cwd: Path, *args: str) -> pexpect.spawn:
    env = {**cb_env, "COLUMNS": "100", "LINES": "40"}
    return pexpect.spawn(
        COUNTBOT,
        list(args),
        env=env,
        cwd=str(cwd),
        dimensions=(40, 100),
        encoding="utf-8",
        timeout=15,
    )


def test_chat_in_a_pty_streams_interrupts_saves_and_quits(tmp_path: Path) -> None:
    with fs.FakeServer() as server:
        cb = make_cb(tmp_path, server.base_url)
        started = time.monotonic()
        child = spawn(cb.env, cb.work)
        try:
            expect(child, TOOLBAR_END)
            time_to_prompt = time.monotonic() - started
            assert cb.session_files() == []  # nothing is written before the first turn

            server.add(fs.text("Hello from the **loopback** server.", chunk_size=4, delay=0.01))
            child.send("hi there\r")
            expect(child, "loopback")
            expect(child, TOOLBAR_END)

            # typed while an answer streams: not echoed into it, sent when the prompt returns
            server.add(
                fs.text("".join(f"item {i}\n\n" for i in range(30)), chunk_size=5, delay=0.01)
            )
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

            answer = "".join(f"para {i}\n\n" for i in range(400))
            server.add(fs.text(answer, chunk_size=8, delay=0.03))
            child.send("tell me everything\r")
            expect(child, "para 6")
            child.sendintr()  # Ctrl-C: SIGINT from the pty's line discipline
            expect(child, "interrupted")
            expect(child, TOOLBAR_END)
            assert server.wait_disconnects(1, timeout=5)

            data = cb.only_session()
            msgs = data["messages"]
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


def test_resume_in_a_pty_shows_the_last_exchanges(tmp_path: Path) -> None:
    with fs.FakeServer() as server:
        cb = make_cb(tmp_path, server.base_url)
        server.add(fs.text("The capital is **Paris**."))
        assert cb.run("ask", "capital of France?").returncode == 0
        sid = cb.only_session()["id"]
        child = spawn(cb.env, cb.work, "sessions", "resume", sid[:6])
        try:
            expect(child, "capital of France?")
            expect(child, "Paris")
            expect(child, TOOLBAR_END)
            child.sendcontrol("d")
            child.expect(pexpect.EOF)
        finally:
            child.close(force=True)
        assert child.exitstatus == 0


def test_quiet_keys_turns_echo_off_for_a_turn_and_back_on_for_a_question() -> None:
    import os
    import pty
    import termios

    from countbot_cli.replview import QuietKeys

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
