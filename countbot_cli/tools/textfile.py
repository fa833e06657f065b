"""How a file tool gets at a file: its path argument made a `Place` in or (approved) outside
the workspace (`place_arg`, `resolve_arg`; exec's working folder too), the regular file opened
from its folder without following symlinks or blocking on a FIFO, and the whole file read as
UTF-8 text within the read limit (binary and undecodable files refused with a reason the model
can act on).
"""

from __future__ import annotations

import os
import stat
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any, BinaryIO

from countbot_cli.tools.base import ToolContext, ToolError
from countbot_cli.tools.confined import Place, folder_of, open_in
from countbot_cli.tools.paths import resolve_in_workspace

BINARY_SNIFF_BYTES = 8192


def resolve_arg(
    args: dict[str, Any], ctx: ToolContext, key: str = "path", *, confine: bool = True
) -> Path:
    """The resolved path for argument `key`; ToolError if it is bad, or (with `confine`) outside
    the workspace while the context does not allow that."""
    return place_arg(args, ctx, key, confine=confine).path


def place_arg(
    args: dict[str, Any], ctx: ToolContext, key: str = "path", *, confine: bool = True
) -> Place:
    """Like `resolve_arg`, with the workspace root the path must be opened under (see
    `confined`); None as root for a path outside the workspace."""
    raw = str(args.get(key) or ".")
    try:
        path, inside = resolve_in_workspace(raw, ctx.workspace)
    except ValueError as e:
        raise ToolError(str(e)) from None
    if confine and not inside and not ctx.allow_outside_workspace:
        raise ToolError(f"path '{raw}' is outside the workspace ({path}) and was not approved")
    return Place(path, ctx.workspace.resolve() if inside else None)


def is_binary(head: bytes) -> bool:
    return b"\x00" in head[:BINARY_SNIFF_BYTES]


def open_regular(fd: int, name: str, place: Place, shown: str) -> tuple[BinaryIO, int]:
    """(the file `name` in folder `fd` opened for reading, its size); ToolError when it is
    missing or not a regular file. Never blocks on a FIFO."""
    try:
        file_fd = open_in(fd, name, place, os.O_RDONLY | os.O_NONBLOCK)
    except FileNotFoundError:
        raise ToolError(f"File not found: {shown}") from None
    st = os.fstat(file_fd)
    if not stat.S_ISREG(st.st_mode):
        os.close(file_fd)
        kind = "a directory; use list_dir" if stat.S_ISDIR(st.st_mode) else "not a regular file"
        raise ToolError(f"Not a file: {shown} is {kind}")
    return os.fdopen(file_fd, "rb"), st.st_size


def decode_text(f: BinaryIO, size: int, shown: str, ctx: ToolContext) -> str:
    """The whole open file as text: errors for too big, binary or not UTF-8."""
    if size > ctx.max_read_bytes:
        raise ToolError(
            f"{shown} is {size} bytes, over the {ctx.max_read_bytes}-byte limit; read it in "
            "parts with start_line and end_line (e.g. start_line=1, end_line=200)"
        )
    data = f.read(ctx.max_read_bytes + 1)
    if len(data) > ctx.max_read_bytes:
        raise ToolError(f"{shown} grew over the {ctx.max_read_bytes}-byte limit while read")
    if is_binary(data):
        raise ToolError(f"{shown} looks like a binary file (it contains NUL bytes); not read")
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError as e:
        raise ToolError(
            f"{shown} is not UTF-8 text (undecodable byte at {e.start}); not read"
        ) from None


@contextmanager
def opened_file(place: Place, shown: str) -> Iterator[tuple[BinaryIO, int]]:
    """The regular file at `place` open for reading, and its size; ToolError when it is
    missing, a directory or not a regular file."""
    try:
        with folder_of(place) as (fd, name):
            f, size = open_regular(fd, name, place, shown)
    except (FileNotFoundError, NotADirectoryError):
        raise ToolError(f"File not found: {shown}") from None
    except IsADirectoryError:
        raise ToolError(f"Not a file: {shown} is a directory; use list_dir") from None
    with f:
        yield f, size


def read_text(place: Place, shown: str, ctx: ToolContext) -> str:
    """The whole file as text: errors for missing, not a file, too big, binary or not UTF-8."""
    with opened_file(place, shown) as (f, size):
        return decode_text(f, size, shown, ctx)
