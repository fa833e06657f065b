"""The project's instructions file: `COUNTBOT.md`, else `AGENTS.md`, in the workspace (SPEC §3).

Its text goes into the stable head of the system prompt (conversation/context.py), read once per
conversation, so it costs no cache miss from turn to turn. A file in the project folder may come
from a cloned repository, so it follows SPEC §3's trust rule: it is used only when the user has
trusted these exact bytes (`countbot config trust AGENTS.md`, config/trust.py); otherwise it is
left out and `notice` says so once. Only its first MAX_BYTES are ever read (`read_sent`: the
file is stat'ed on the open descriptor first, so a FIFO is refused and a 3 GiB file costs
32,000 bytes): they are what is sent, what `config trust` shows and what the trust record's
digest covers; a longer file is cut, with a note.
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING, NamedTuple

from countbot_cli.config import trust
from countbot_cli.fileio import read_capped

if TYPE_CHECKING:
    from countbot_cli.config.settings import Settings

NAMES = ("COUNTBOT.md", "AGENTS.md")  # the first one present wins
MAX_BYTES = 32_000


class Instructions(NamedTuple):
    name: str  # the file's name, shown in the prompt's heading
    text: str  # "" when the file is left out
    notice: str = ""  # one line for stderr when the file was left out or cut


def find(workspace: Path) -> Path | None:
    for name in NAMES:
        path = workspace / name
        if path.is_file():
            return path
    return None


def read_sent(path: Path) -> tuple[bytes, int]:
    """(the bytes of `path` that would be sent: at most MAX_BYTES, the file's size). OSError
    (fileio.NotRegularFile for a FIFO, a device or a folder) when it cannot be read."""
    return read_capped(path, MAX_BYTES)


def load_instructions(workspace: Path, home: Path) -> Instructions | None:
    """The instructions file of `workspace` (None when there is none); `home` is countbot's
    own config folder, where the trust records live."""
    path = find(workspace)
    if path is None:
        return None
    try:
        data, size = read_sent(path)
    except OSError as exc:
        return Instructions(path.name, "", f"ignored {path}: {exc.strerror or exc}")
    verdict = trust.status(path, data, home)
    if verdict != "trusted":
        why = "it changed since you trusted it" if verdict == "changed" else "it is not trusted"
        return Instructions(
            path.name,
            "",
            f"ignored {path}: {why}; review it, then run: countbot config trust {path.name}",
        )
    notice = ""
    if size > MAX_BYTES:
        notice = f"{path}: only the first {MAX_BYTES:,} bytes are sent"
    return Instructions(path.name, data.decode("utf-8", "replace"), notice)


def instructions_for(settings: Settings, notice: Callable[[str], None]) -> tuple[str, str] | None:
    """(name, text) of the trusted instructions file of the workspace for the system prompt, or
    None; an untrusted or cut one is named to `notice` (each engine asks again: the caller's
    `notice` says a line once per conversation, app.Notices)."""
    if settings.trust_store is None:
        return None
    found = load_instructions(settings.tools.workspace, settings.trust_store.parent)
    if found is None:
        return None
    if found.notice:
        notice(found.notice)
    return (found.name, found.text) if found.text else None
