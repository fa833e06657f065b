"""What `countbot ask` sends: the prompt words, piped stdin and attached files, each read bounded.

Each piece of input is capped at `MAX_INPUT_BYTES` and read at most one byte past the cap, so a
huge pipe or `-f /dev/zero` costs a megabyte, not all memory. `-f` takes regular files only: a
FIFO, device, socket or folder is refused from `stat` alone, and the file is opened without
blocking and checked again on the open descriptor, so a file swapped for a FIFO in between
cannot hang the read. Every refusal is a `UsageError` (exit 2) raised before any session is
opened, so nothing was sent and nothing is saved.
"""

from __future__ import annotations

import os
import stat
from collections.abc import Sequence
from pathlib import Path
from typing import TextIO

from countbot_cli.errors import UsageError

MAX_INPUT_BYTES = 1_000_000  # piped stdin, and the text of each attachment
_CHUNK = 1 << 16

_KINDS = (
    (stat.S_ISFIFO, "a named pipe (FIFO)"),
    (stat.S_ISCHR, "a character device"),
    (stat.S_ISBLK, "a block device"),
    (stat.S_ISSOCK, "a socket"),
)


def compose_prompt(
    prompt: Sequence[str], stdin_text: str | None, blocks: Sequence[str] = (), *, images: int = 0
) -> str:
    """Prompt words, then piped stdin, then each attached text (a fenced block from
    `fenced`). Only an attached image may stand without any text."""
    parts: list[str] = []
    words = " ".join(prompt).strip()
    if words:
        parts.append(words)
    if stdin_text and stdin_text.strip():
        parts.append(stdin_text.rstrip("\n"))
    parts.extend(blocks)
    text = "\n\n".join(parts)
    if not text.strip() and not images:
        raise UsageError(
            "nothing to ask: give a prompt, pipe text in, or attach a file with -a",
            hint='e.g. countbot ask "explain this" -a main.py',
        )
    return text


def fenced(label: str, text: str) -> str:
    """`label`, then `text` in a code fence longer than any fence inside it."""
    fence = "````" if "```" in text else "```"
    return f"{label}:\n{fence}\n{text.rstrip(chr(10))}\n{fence}"


def read_attachment(path: Path, limit: int = MAX_INPUT_BYTES, flag: str = "-f") -> str:
    """The text of `-f path`: a regular UTF-8 text file of at most `limit` bytes, else a
    UsageError. Never blocks on a FIFO and never reads more than `limit` + 1 bytes."""
    return decode_text(path, read_file_bytes(path, limit, flag), flag)


def decode_text(path: Path | str, data: bytes, flag: str = "-f") -> str:
    """`data` as UTF-8 text, or a UsageError naming `flag path` for binary or other bytes."""
    if b"\x00" in data[:8192]:
        raise UsageError(f"{flag} {path}: looks like a binary file; only text can be attached")
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError:
        raise UsageError(f"{flag} {path}: not UTF-8 text") from None


def read_file_bytes(path: Path, limit: int, flag: str = "-f") -> bytes:
    """The bytes of a regular file of at most `limit` bytes, else a UsageError naming
    `flag path`. Never blocks on a FIFO and never reads more than `limit` + 1 bytes."""
    try:
        info = os.stat(path)
    except FileNotFoundError:
        raise UsageError(f"{flag} {path}: no such file") from None
    except OSError as exc:
        raise UsageError(f"{flag} {path}: cannot read it ({exc.strerror})") from None
    _check_regular(path, info.st_mode, flag)
    check_size(path, info.st_size, limit, flag)
    flags = os.O_RDONLY | getattr(os, "O_NONBLOCK", 0) | getattr(os, "O_NOCTTY", 0)
    try:
        fd = os.open(path, flags | getattr(os, "O_CLOEXEC", 0))
    except OSError as exc:
        raise UsageError(f"{flag} {path}: cannot read it ({exc.strerror})") from None
    try:
        info = os.fstat(fd)  # the file actually opened: it may have been swapped since stat
        _check_regular(path, info.st_mode, flag)
        check_size(path, info.st_size, limit, flag)
        data = _read_fd(fd, limit + 1)
    except OSError as exc:
        raise UsageError(f"{flag} {path}: cannot read it ({exc.strerror})") from None
    finally:
        os.close(fd)
    check_size(path, len(data), limit, flag)
    return data


def _check_regular(path: Path, mode: int, flag: str) -> None:
    if stat.S_ISREG(mode):
        return
    if stat.S_ISDIR(mode):
        raise UsageError(f"{flag} {path}: is a folder, not a file")
    kind = next((name for test, name in _KINDS if test(mode)), "not a regular file")
    raise UsageError(
        f"{flag} {path}: is {kind}; only regular files can be attached",
        hint="pipe other input in on stdin instead",
    )


def check_size(path: Path | str, size: int, limit: int, flag: str = "-f") -> None:
    """A UsageError naming `flag path` when `size` is over `limit` bytes."""
    if size > limit:
        raise UsageError(
            f"{flag} {path}: {_over(size, limit)} the {limit:,}-byte limit; nothing was sent"
        )


def _over(size: int, limit: int) -> str:
    """'1,234,567 bytes is over', or 'is over' when only a capped read measured it."""
    return "is over" if size == limit + 1 else f"{size:,} bytes is over"


def _read_fd(fd: int, most: int) -> bytes:
    """Up to `most` bytes from `fd`, stopping at end of file."""
    parts: list[bytes] = []
    left = most
    while left > 0:
        piece = os.read(fd, min(left, _CHUNK))
        if not piece:
            break
        parts.append(piece)
        left -= len(piece)
    return b"".join(parts)


def read_stdin(stdin: TextIO | None, limit: int = MAX_INPUT_BYTES) -> str | None:
    """Piped stdin (None from a terminal or a closed stream), read up to `limit` bytes; more is
    a UsageError: reading stops at the cap instead of taking everything."""
    if stdin is None:
        return None
    try:
        if stdin.isatty():
            return None
        raw = getattr(stdin, "buffer", None)
        if raw is None:  # a text-only stream (tests): measure what it holds in bytes
            text = stdin.read(limit + 1)
            size = len(text.encode("utf-8", "surrogatepass"))
        else:
            data = raw.read(limit + 1)
            size = len(data)
    except UnicodeDecodeError:
        raise _not_text(stdin) from None
    except (OSError, ValueError):
        return None
    if size > limit:
        raise UsageError(
            f"piped input {_over(size, limit)} the {limit:,}-byte limit; nothing was sent",
            hint="pipe in only the part that matters, e.g. `| head -n 2000`, "
            "or split it over several questions: `ask -c` continues the conversation",
        )
    if raw is None:
        return text
    try:
        return data.decode(stdin.encoding or "utf-8", stdin.errors or "strict")
    except UnicodeDecodeError:
        raise _not_text(stdin) from None


def _not_text(stdin: TextIO) -> UsageError:
    encoding = getattr(stdin, "encoding", None) or "utf-8"
    return UsageError(f"piped input is not {encoding} text; nothing was sent")
