"""`/copy [N]` in the REPL: a valid OSC 52 sequence on the terminal (its base64 decoded back to
the answer or the N-th code block), the platform's clipboard command when present, and what was
copied said on screen."""

from __future__ import annotations

import base64
import os
import re
import stat
from pathlib import Path

import fakeserver as fs
import pytest
from test_repl import Harness

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
    tmp_path: Path, server: fs.FakeServer, no_clipboard_command: None
) -> None:
    h = Harness(tmp_path, server)
    server.add(fs.text(ANSWER, chunk_size=6))
    h.run(["two ways\r", "/copy 2\r", "/copy 1\r", "/copy\r"])
    assert copied(h.out.getvalue()) == ["echo hi\nls\n", "print('héllo')\n", ANSWER]
    out = h.text()
    assert "Copied code block 2 (sh, 2 lines) to the clipboard (OSC 52)." in out
    assert "Copied code block 1 (python, 1 line) to the clipboard (OSC 52)." in out
    assert "Copied the last answer (12 lines) to the clipboard (OSC 52)." in out


def test_copy_out_of_range_bad_number_and_nothing_yet(
    tmp_path: Path, server: fs.FakeServer, no_clipboard_command: None
) -> None:
    h = Harness(tmp_path, server)
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
    assert copy_text(big, sent.append, env={}, which=lambda _n: None) == []
    assert sent == []
    assert copy_text("hi", sent.append, env={"TMUX": "/tmp/t"}, which=lambda _n: None) == ["OSC 52"]
    plain = "\x1b]52;c;aGk=\x07"
    assert sent == [plain + tmux_wrap(plain)]
    assert tmux_wrap(plain) == "\x1bPtmux;\x1b\x1b]52;c;aGk=\x07\x1b\\"
    # nothing written when not on a terminal (write=None)
    assert copy_text("hi", None, env={}, which=lambda _n: None) == []


def test_clipboard_command_fits_the_session() -> None:
    have = {"wl-copy", "xclip", "xsel", "pbcopy"}
    which = lambda n: f"/usr/bin/{n}" if n in have else None  # noqa: E731
    assert clipboard_command({"WAYLAND_DISPLAY": "w"}, "linux", which) == ["wl-copy"]
    assert clipboard_command({"DISPLAY": ":0"}, "linux", which)[0] == "xclip"  # type: ignore[index]
    have.discard("xclip")
    assert clipboard_command({"DISPLAY": ":0"}, "linux", which)[0] == "xsel"  # type: ignore[index]
    assert clipboard_command({}, "darwin", which) == ["pbcopy"]
    assert clipboard_command({}, "linux", which) is None  # e.g. over SSH: OSC 52 only
