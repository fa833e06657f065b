"""What `countbot ask` sends: the prompt words, piped stdin and `-f` files, each read bounded.

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
from pathlib import Path
from typing import TextIO

from countbot_cli.errors import UsageError

MAX_INPUT_BYTES = 1_000_000  # piped stdin, and each -f file
_CHUNK = 1 << 16

_KINDS = (
    (stat.S_ISFIFO, "a named pipe (FIFO)"),
    (stat.S_ISCHR, "a character device"),
    (stat.S_ISBLK, "a block device"),
    (stat.S_ISSOCK, "a socket"),
)


def compose_prompt(prompt: list[str], stdin_text: str | None, files: list[Path]) -> str:
    """Prompt words, then piped stdin, then each attached file in a fenced block."""
    parts: list[str] = []
    words = " ".join(prompt).strip()
    if words:
        parts.append(words)
    if stdin_text and stdin_text.strip():
        parts.append(stdin_text.rstrip("\n"))
    for path in files:
        parts.append(_fenced(path, read_attachment(path)))
    text = "\n\n".join(parts)
    if not text.strip():
        raise UsageError(
            "nothing to ask: give a prompt, pipe text in, or attach a file with -f",
            hint='e.g. countbot ask "explain this" -f main.py',
        )
    return text


def _fenced(path: Path, text: str) -> str:
    fence = "````" if "```" in text else "```"
    return f"File `{path}`:\n{fence}\n{text.rstrip(chr(10))}\n{fence}"


def read_attachment(path: Path, limit: int = MAX_INPUT_BYTES) -> str:
    """The text of `-f path`: a regular UTF-8 text file of at most `limit` bytes, else a
    UsageError. Never blocks on a FIFO and never reads more than `limit` + 1 bytes."""
    try:
        info = os.stat(path)
    except FileNotFoundError:
        raise UsageError(f"-f {path}: no such file") from None
    except OSError as exc:
        raise UsageError(f"-f {path}: cannot read it ({exc.strerror})") from None
    _check_regular(path, info.st_mode)
    _check_size(path, info.st_size, limit)
    flags = os.O_RDONLY | getattr(os, "O_NONBLOCK", 0) | getattr(os, "O_NOCTTY", 0)
    try:
        fd = os.open(path, flags | getattr(os, "O_CLOEXEC", 0))
    except OSError as exc:
        raise UsageError(f"-f {path}: cannot read it ({exc.strerror})") from None
    try:
        info = os.fstat(fd)  # the file actually opened: it may have been swapped since stat
        _check_regular(path, info.st_mode)
        _check_size(path, info.st_size, limit)
        data = _read_fd(fd, limit + 1)
    except OSError as exc:
        raise UsageError(f"-f {path}: cannot read it ({exc.strerror})") from None
    finally:
        os.close(fd)
    _check_size(path, len(data), limit)
    if b"\x00" in data[:8192]:
        raise UsageError(f"-f {path}: looks like a binary file; only text can be attached")
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError:
        raise UsageError(f"-f {path}: not UTF-8 text") from None


def _check_regular(path: Path, mode: int) -> None:
    if stat.S_ISREG(mode):
        return
    if stat.S_ISDIR(mode):
        raise UsageError(f"-f {path}: is a folder, not a file")
    kind = next((name for test, name in _KINDS if test(mode)), "not a regular file")
    raise UsageError(
        f"-f {path}: is {kind}; only regular files can be attached",
        hint="pipe other input in on stdin instead",
    )


def _check_size(path: Path, size: int, limit: int) -> None:
    if size > limit:
        raise UsageError(
            f"-f {path}: {_over(size, limit)} the {limit:,}-byte limit; nothing was sent"
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
