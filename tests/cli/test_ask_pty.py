"""`countbot ask` on a real pseudo-terminal: the answer is rendered markdown, and the screen a
person sees (replayed in a VT100 emulator) holds it exactly once."""

from __future__ import annotations

import re
from pathlib import Path

import fakeserver as fs
import pexpect
import pyte
from cbenv import COUNTBOT, make_cb

ANSWER = (
    "# Plan\n\nFirst paragraph with **bold** text and `code`.\n\n"
    "- one\n- two\n\n```python\nprint('hi')\n```\n\nDone [red]literally[/red].\n"
)


def _run_on_pty(cb, *args: str, cols: int = 80, rows: int = 40) -> tuple[str, int]:
    child = pexpect.spawn(
        COUNTBOT, list(args), cwd=str(cb.work), env=cb.env, dimensions=(rows, cols), timeout=30
    )
    chunks: list[bytes] = []
    while True:
        try:
            data = child.read_nonblocking(65536, timeout=30)
        except pexpect.EOF:
            break
        if b"\x1b[6n" in data:
            child.send("\x1b[1;1R")
        chunks.append(data)
    child.close()
    raw = b"".join(chunks).decode("utf-8", "replace")
    return raw, child.exitstatus if child.exitstatus is not None else -1


def _screen(raw: str, cols: int = 80, rows: int = 40) -> list[str]:
    screen = pyte.Screen(cols, rows)
    stream = pyte.Stream(screen)
    stream.feed(raw.replace("\n", "\r\n"))
    return [line.rstrip() for line in screen.display]


def test_ask_renders_markdown_on_a_tty(tmp_path: Path, server: fs.FakeServer) -> None:
    cb = make_cb(tmp_path, server.base_url)
    server.add(fs.text(ANSWER, chunk_size=7, delay=0.01))
    raw, code = _run_on_pty(cb, "ask", "make a plan")
    assert code == 0, raw
    assert "\x1b[" in raw  # styled output
    screen = "\n".join(_screen(raw))
    assert "**bold**" not in screen and "bold" in screen  # markdown was rendered
    assert "# Plan" not in screen and "Plan" in screen
    assert "print('hi')" in screen
    assert screen.count("First paragraph") == 1  # settled blocks are printed once
    assert "[red]literally[/red]" in screen  # markup in model output prints literally
    assert re.search(r"session [0-9a-f]{12}", screen)  # the id to continue with -s


def test_ask_plain_flag_on_a_tty_prints_raw_text(tmp_path: Path, server: fs.FakeServer) -> None:
    cb = make_cb(tmp_path, server.base_url)
    server.add(fs.text("**raw** \x1b]0;pwned\x07text", chunk_size=3))
    raw, code = _run_on_pty(cb, "ask", "--plain", "hi")
    assert code == 0
    assert "**raw** " in raw
    assert "\x1b]0;" not in raw  # the OSC title sequence from the model was neutralised
