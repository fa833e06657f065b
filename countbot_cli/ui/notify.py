"""A bell or a desktop notification when the chat wants the user back: an answer that took a
while has ended, or an approval waits (`chat.notify`: bell, desktop or off; opt-in).
`desktop` runs `notify-send` where it is installed (detached, output dropped, never waited
for) and rings the bell otherwise.
"""

from __future__ import annotations

import shutil
import subprocess
from typing import IO

from countbot_cli.textsafe import sanitize_line

BELL = "\a"


def notify(how: str, message: str, terminal: IO[str]) -> str:
    """Tell the user `message` the way `how` says; what was done ("bell", "desktop", "")."""
    if how == "off":
        return ""
    if how == "desktop" and (program := shutil.which("notify-send")):
        try:
            subprocess.Popen(
                [program, "countbot", sanitize_line(message)[:200]],
                stdin=subprocess.DEVNULL,
                stdout=subprocess.DEVNULL,
                stderr=subprocess.DEVNULL,
                start_new_session=True,
            )
            return "desktop"
        except OSError:
            pass
    try:
        terminal.write(BELL)
        terminal.flush()
    except (OSError, ValueError):
        return ""
    return "bell"
