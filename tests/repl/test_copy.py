"""`/copy [N]` in the REPL: a valid OSC 52 sequence on the terminal (its base64 decoded back to
the answer or the N-th code block), the platform's clipboard command when present, and what was
copied said on screen."""

from __future__ import annotations

import base64
import io
import os
import re
import stat
from pathlib import Path
from typing import Any

import fakeserver as fs
import pexpect
import pytest
from cbenv import make_cb
from repl_harness import Harness
from terminal import TOOLBAR_END, expect, spawn

from countbot_cli.textsafe import sanitize
from countbot_cli.ui.clipboard import OSC52_MAX_BYTES, clipboard_command, copy_text, tmux_wrap

ANSWER = "Two ways:\n\n```python\nprint('héllo')\n```\n\nor\n\n```sh\necho hi\nls\n```\n"
OSC52 = re.compile(r"\x1b\]52;c;([A-Za-z0-9+/=]*)\x07")


@pytest.fixture
def no_clipboard_command(monkeypatch: pytest.MonkeyPatch) -> None:
    for name in ("DISPLAY", "WAYLAND_DISPLAY", "TMUX"):
        monkeypatch.delenv(name, raising=False)


def copied(raw: str) -> list[str]:
    return [base64.b64decode(m).decode("utf-8") for m in OSC52.findall(raw)]


def test_copy_block_and_whole_answer_as_osc52(
    harness: Any, server: fs.FakeServer, no_clipboard_command: None
) -> None:
    h = harness()
    server.add(fs.text(ANSWER, chunk_size=6))
    h.run(["two ways\r", "/copy 2\r", "/copy 1\r", "/copy\r"])
    assert copied(h.out.getvalue()) == ["echo hi\nls\n", "print('héllo')\n", ANSWER]
    out = h.text()
    assert "Copied code block 2 (sh, 2 lines) to the clipboard (OSC 52)." in out
    assert "Copied code block 1 (python, 1 line) to the clipboard (OSC 52)." in out
    assert "Copied the last answer (12 lines) to the clipboard (OSC 52)." in out


def test_copy_out_of_range_bad_number_and_nothing_yet(
    harness: Any, server: fs.FakeServer, no_clipboard_command: None
) -> None:
    h = harness()
    server.add(fs.text(ANSWER))
    h.run(["/copy\r", "ways\r", "/copy 3\r", "/copy x\r"])
    out = h.text()
    assert "There is no answer to copy yet." in out
    assert "the last answer has 2 code blocks: there is no block 3" in out
    assert "/copy takes the number of a code block" in out
    assert copied(h.out.getvalue()) == []
    assert len(server.chat_bodies()) == 1  # nothing typed here went to the model


def test_copy_runs_the_clipboard_command_when_there(
    tmp_path: Path, server: fs.FakeServer, monkeypatch: pytest.MonkeyPatch
) -> None:
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    sink = tmp_path / "clipboard.txt"
    xclip = bin_dir / "xclip"
    xclip.write_text(f'#!/bin/sh\n[ "$*" = "-selection clipboard" ] && cat > "{sink}"\n')
    xclip.chmod(xclip.stat().st_mode | stat.S_IXUSR)
    monkeypatch.setenv("PATH", f"{bin_dir}{os.pathsep}{os.environ['PATH']}")
    monkeypatch.setenv("DISPLAY", ":0")
    monkeypatch.delenv("WAYLAND_DISPLAY", raising=False)
    monkeypatch.delenv("TMUX", raising=False)
    h = Harness(tmp_path, server)
    server.add(fs.text(ANSWER))
    h.run(["ways\r", "/copy 1\r"])
    assert sink.read_text(encoding="utf-8") == "print('héllo')\n"
    assert "to the clipboard (OSC 52, xclip)." in h.text()


def test_osc52_is_bounded_and_wrapped_for_tmux() -> None:
    sent: list[str] = []
    big = "x" * OSC52_MAX_BYTES  # its base64 is longer than the bound
    assert copy_text(big, sent.append, env={}, which=lambda _n: None) == ([], 0)
    assert sent == []
    tmux = copy_text("hi", sent.append, env={"TMUX": "/tmp/t"}, which=lambda _n: None)
    assert tmux == (["OSC 52"], 0)
    plain = "\x1b]52;c;aGk=\x07"
    assert sent == [plain + tmux_wrap(plain)]
    assert tmux_wrap(plain) == "\x1bPtmux;\x1b\x1b]52;c;aGk=\x07\x1b\\"
    # nothing written when not on a terminal (write=None)
    assert copy_text("hi", None, env={}, which=lambda _n: None) == ([], 0)


def test_clipboard_command_fits_the_session() -> None:
    have = {"wl-copy", "xclip", "xsel", "pbcopy"}
    which = lambda n: f"/usr/bin/{n}" if n in have else None  # noqa: E731
    assert clipboard_command({"WAYLAND_DISPLAY": "w"}, "linux", which) == ["wl-copy"]
    assert clipboard_command({"DISPLAY": ":0"}, "linux", which)[0] == "xclip"  # type: ignore[index]
    have.discard("xclip")
    assert clipboard_command({"DISPLAY": ":0"}, "linux", which)[0] == "xsel"  # type: ignore[index]
    assert clipboard_command({}, "darwin", which) == ["pbcopy"]
    assert clipboard_command({}, "linux", which) is None  # e.g. over SSH: OSC 52 only


# ---- paste-jacking: the clipboard gets what `ask -x` prints ----

# a block whose raw text would end the shell's bracketed paste and run `touch PWNED` unasked
JACKED = "Run:\n\n```sh\necho safe\x1b[201~; touch PWNED\r\n\x07\x1b]0;title\x07done\n```\n"
JACKED_SAFE = "echo safe; touch PWNED\ndone\n"


def test_copy_in_a_pty_puts_no_escape_on_the_clipboard(
    tmp_path: Path, server: fs.FakeServer
) -> None:
    """The installed countbot in a pseudo-terminal: `/copy 1` of a block holding ESC[201~, a
    BEL, a CR and an OSC sequence. The OSC 52 payload and the clipboard command's input are
    the sanitised text (what `ask -x` prints), and the chat says how much it removed."""
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    sink = tmp_path / "clipboard.bin"
    xclip = bin_dir / "xclip"
    xclip.write_text(f'#!/bin/sh\ncat > "{sink}"\n')
    xclip.chmod(xclip.stat().st_mode | stat.S_IXUSR)
    cb = make_cb(tmp_path, server.base_url)
    env = {"PATH": f"{bin_dir}{os.pathsep}{cb.env['PATH']}", "DISPLAY": ":0"}
    server.add(fs.text(JACKED, chunk_size=7))
    child = spawn(cb, env=env)
    log = io.StringIO()
    child.logfile_read = log
    try:
        expect(child, TOOLBAR_END)
        child.send("a command please\r")
        expect(child, "done")
        expect(child, TOOLBAR_END)
        child.send("/copy 1\r")
        expect(child, "to the clipboard (OSC 52, xclip).")
        expect(child, TOOLBAR_END)
        child.sendcontrol("d")
        child.expect(pexpect.EOF, timeout=15)
    finally:
        child.close(force=True)
    payloads = copied(log.getvalue())
    assert payloads, "no OSC 52 sequence on the terminal"
    assert all("\x1b" not in p and "\x07" not in p and "\r" not in p for p in payloads)
    assert payloads[0] == JACKED_SAFE
    assert sink.read_bytes() == JACKED_SAFE.encode("utf-8")
    said = " ".join(sanitize(log.getvalue()).split())
    assert "Removed 17 control characters, as `ask -x` does" in said
    assert not (cb.work / "PWNED").exists()
