"""Copying text to the clipboard for `/copy`: OSC 52, plus the platform's command when present.

OSC 52 (`ESC ] 52 ; c ; BASE64 BEL`) asks the terminal itself to set the clipboard, so it works
over SSH and inside tmux (there the sequence is also sent wrapped for tmux's passthrough, for a
tmux whose `set-clipboard` is off). It is written only to a terminal and only up to
`OSC52_MAX_BYTES` of base64 (terminals cap it: xterm and others at about 100 kB). When one of
wl-copy, xclip, xsel or pbcopy fits the session, it is run as well; what was used is returned.

What goes on the clipboard is what `ask -x` prints: `textsafe.sanitize`d, every escape sequence
and control character but newline and tab removed (a CR becomes a newline). Text pasted into a
shell is typed into it: a copied `ESC[201~` would end the terminal's bracketed paste and the
rest would run as typed, newline included. `copy_text` is the one way to the clipboard and says
how many characters it removed.
"""

from __future__ import annotations

import base64
import os
import shutil
import subprocess
import sys
from collections.abc import Callable, Mapping
from typing import NamedTuple

from countbot_cli.textsafe import sanitize

OSC52_MAX_BYTES = 100_000
_COMMAND_TIMEOUT = 5.0


def osc52(text: str) -> str:
    """The OSC 52 sequence setting the clipboard ("c") to `text` (UTF-8, base64)."""
    data = base64.b64encode(text.encode("utf-8")).decode("ascii")
    return f"\x1b]52;c;{data}\x07"


def tmux_wrap(seq: str) -> str:
    """`seq` inside tmux's DCS passthrough (each ESC doubled)."""
    return "\x1bPtmux;" + seq.replace("\x1b", "\x1b\x1b") + "\x1b\\"


def clipboard_command(
    env: Mapping[str, str], platform: str, which: Callable[[str], str | None] = shutil.which
) -> list[str] | None:
    """The platform's clipboard command for this session, if one is installed."""
    candidates: list[list[str]] = []
    if platform == "darwin":
        candidates.append(["pbcopy"])
    if env.get("WAYLAND_DISPLAY"):
        candidates.append(["wl-copy"])
    if env.get("DISPLAY"):
        candidates += [["xclip", "-selection", "clipboard"], ["xsel", "--clipboard", "--input"]]
    for cmd in candidates:
        if which(cmd[0]):
            return cmd
    return None


class Copied(NamedTuple):
    used: list[str]  # how it was copied (["OSC 52", "xclip"]); [] when no way was available
    removed: int  # characters `sanitize` removed (escape sequences, controls, CRs)


def copy_text(
    text: str,
    write: Callable[[str], None] | None,
    *,
    env: Mapping[str, str] | None = None,
    platform: str = sys.platform,
    which: Callable[[str], str | None] = shutil.which,
) -> Copied:
    """Copy `text`, sanitised: OSC 52 through `write` (None: not a terminal) and the platform's
    command."""
    env = os.environ if env is None else env
    safe = sanitize(text)
    removed = len(text) - len(safe)
    text = safe
    used: list[str] = []
    seq = osc52(text)
    if write is not None and len(seq) <= OSC52_MAX_BYTES:
        write(seq + (tmux_wrap(seq) if env.get("TMUX") else ""))
        used.append("OSC 52")
    cmd = clipboard_command(env, platform, which)
    if cmd is not None and _run(cmd, text):
        used.append(cmd[0])
    return Copied(used, removed)


def _run(cmd: list[str], text: str) -> bool:
    try:
        done = subprocess.run(
            cmd,
            input=text.encode("utf-8"),
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
            timeout=_COMMAND_TIMEOUT,
            check=False,
        )
    except (OSError, subprocess.SubprocessError):
        return False
    return done.returncode == 0
