"""File tools with CountBot's parameters and output formats: read_file, write_file, edit_file,
list_dir (SPEC §6). edit_file's body is in `edit.py`; how a
tool opens and reads a file is `textfile.py`.

Every path goes through `paths.resolve_in_workspace`; a path outside the workspace only works
when the registry passes a context that allows it (the user approved that exact call). A path
inside is opened component by component from the workspace root without following symlinks
(`confined`), so a folder swapped for a symlink after the check cannot redirect a read or a
write. Writes are atomic (temporary file in the opened folder, fsync, rename there), so a crash
never leaves half a file; appending to a file with several hard links needs that call approved.
"""

from __future__ import annotations

import os
import stat
import threading
from typing import Any, BinaryIO

from countbot_cli.tools.base import (
    KIND_READ,
    KIND_WRITE,
    ToolContext,
    ToolError,
    ToolResult,
    ToolSpec,
)
from countbot_cli.tools.confined import (
    Place,
    folder_of,
    lstat_in,
    open_folder,
    open_in,
    write_replacing,
)
from countbot_cli.tools.diffs import split_lines, unified_diff
from countbot_cli.tools.edit import preview_edit_file, run_edit_file
from countbot_cli.tools.textfile import (
    BINARY_SNIFF_BYTES,
    decode_text,
    is_binary,
    opened_file,
    place_arg,
    read_text,
)

MAX_LIST_ENTRIES = 1000
NOT_REGULAR = "is not a regular file (a pipe, socket or device); not written"


# ---- read_file -------------------------------------------------------------------------------


def _select(args: dict[str, Any]) -> tuple[int, int | None, bool]:
    start, end = args.get("start_line"), args.get("end_line")
    if start is not None and end is not None and end < start:
        raise ToolError(f"end_line ({end}) is before start_line ({start})")
    return (start or 1), end, start is not None or end is not None


def _stream_lines(f: BinaryIO, start: int, end: int | None, limit: int) -> tuple[list[str], int]:
    """Lines start..end of an open file too big to load, and the total line count."""
    chosen: list[str] = []
    size = 0
    total = 0
    if is_binary(f.read(BINARY_SNIFF_BYTES)):
        raise ToolError("binary file (it contains NUL bytes); not read")
    f.seek(0)
    for total, raw in enumerate(f, start=1):
        if start <= total and (end is None or total <= end):
            size += len(raw)
            if size > limit:
                raise ToolError(
                    f"lines {start}-{end or 'end'} exceed {limit} bytes; ask for a smaller range"
                )
            try:
                chosen.append(raw.decode("utf-8"))
            except UnicodeDecodeError:
                raise ToolError(f"line {total} is not UTF-8 text; not read") from None
    return chosen, total


def format_lines(lines: list[str], first: int, numbers: bool) -> str:
    texts = [line.rstrip("\n").removesuffix("\r") for line in lines]
    if not numbers:
        return "\n".join(texts)
    width = len(str(first + len(texts) - 1))
    return "\n".join(f"{n:>{width}}| {t}" for n, t in enumerate(texts, start=first))


def run_read_file(args: dict[str, Any], ctx: ToolContext, cancel: threading.Event) -> ToolResult:
    shown = str(args["path"])
    place = place_arg(args, ctx)
    start, end, ranged = _select(args)
    with opened_file(place, shown) as (f, size):
        if ranged and size > ctx.max_read_bytes:
            try:
                chosen, total = _stream_lines(f, start, end, ctx.max_read_bytes)
            except ToolError as e:
                raise ToolError(f"{shown}: {e}") from None
        else:
            all_lines = split_lines(decode_text(f, size, shown, ctx))
            total = len(all_lines)
            chosen = all_lines[start - 1 : end]
    if ranged and start > max(total, 1):
        raise ToolError(f"start_line ({start}) is beyond the end of {shown} ({total} lines)")
    header = f"[File: {shown} | Lines: {total}"
    if ranged:
        header += f" | Showing: {start}-{start + len(chosen) - 1 if chosen else start}"
    body = format_lines(chosen, start, args.get("show_line_numbers", True))
    return ToolResult(f"{header}]\n{body}" if chosen else f"{header}]\n(empty file)")


# ---- write_file ------------------------------------------------------------------------------


def _existing(fd: int, name: str, shown: str) -> os.stat_result | None:
    """The entry about to be written (None: new); ToolError for a folder, FIFO, socket, device."""
    st = lstat_in(fd, name)
    if st is not None and stat.S_ISDIR(st.st_mode):
        raise ToolError(f"{shown} is a directory; give a file path")
    if st is not None and not (stat.S_ISREG(st.st_mode) or stat.S_ISLNK(st.st_mode)):
        raise ToolError(f"{shown} {NOT_REGULAR}")  # a FIFO would block the write forever
    return st


def _append(fd: int, name: str, place: Place, data: bytes, shown: str, ctx: ToolContext) -> int:
    """Append to `name` in folder `fd` (never through a symlink); the new size."""
    flags = os.O_WRONLY | os.O_APPEND | os.O_CREAT | os.O_NOFOLLOW | os.O_NONBLOCK
    with os.fdopen(open_in(fd, name, place, flags), "ab") as f:
        st = os.fstat(f.fileno())
        if not stat.S_ISREG(st.st_mode):
            raise ToolError(f"{shown} {NOT_REGULAR}")
        if place.confined and st.st_nlink > 1 and not ctx.multi_link_ok:
            raise ToolError(
                f"{shown} has {st.st_nlink} hard links (it may be a file outside the workspace) "
                "and this call was not approved for that; not written"
            )
        f.write(data)
        f.flush()
        return os.fstat(f.fileno()).st_size


def run_write_file(args: dict[str, Any], ctx: ToolContext, cancel: threading.Event) -> ToolResult:
    shown, content = str(args["path"]), str(args["content"])
    place = place_arg(args, ctx)
    data = content.encode("utf-8")
    try:
        with folder_of(place, create=True) as (fd, name):
            st = _existing(fd, name, shown)
            if args.get("mode", "overwrite") == "append":
                total = _append(fd, name, place, data, shown, ctx)
                return ToolResult(
                    f"Appended {len(content)} chars ({len(data)} bytes) to {shown} "
                    f"(total: {total} bytes)"
                )
            keep = stat.S_IMODE(st.st_mode) if st and stat.S_ISREG(st.st_mode) else None
            write_replacing(fd, name, data, keep)
    except IsADirectoryError:
        raise ToolError(f"{shown} is a directory; give a file path") from None
    except (FileExistsError, NotADirectoryError):
        raise ToolError(f"cannot create the folder for {shown}: a file is in the way") from None
    if st is None:
        return ToolResult(
            f"Created {shown} with {len(content)} chars, {len(data)} bytes (file was new)"
        )
    return ToolResult(f"Wrote {len(content)} chars ({len(data)} bytes) to {shown}")


def preview_write_file(args: dict[str, Any], ctx: ToolContext, may_read: bool) -> str:
    shown, content = str(args["path"]), str(args["content"])
    place = place_arg(args, ctx, confine=False)
    path = place.path
    append = args.get("mode", "overwrite") == "append"
    if not path.exists():
        return unified_diff("", content, shown, new_file=True)
    if not may_read:
        note = f"({path} is outside the workspace: its current content was not read; "
        note += (
            "the text below is appended to it)" if append else "it is replaced by the text below)"
        )
        return note + "\n" + unified_diff("", content, shown, new_file=True)
    if path.is_dir():
        raise ToolError(f"{shown} is a directory; give a file path")
    try:
        old = read_text(place, shown, ctx)
    except ToolError as e:
        verb = "appends to" if append else "replaces"
        return f"{verb} {shown}, which cannot be shown ({e})\nNew text:\n{content}"
    return unified_diff(old, old + content if append else content, shown)


# ---- list_dir --------------------------------------------------------------------------------


def _entry_line(entry: os.DirEntry[str], fd: int) -> str:
    if entry.is_symlink():  # never followed: the target may lie outside the workspace
        try:
            target = os.readlink(entry.name, dir_fd=fd)
        except OSError:
            target = "?"
        return f"link {entry.name} -> {target}"
    if entry.is_dir(follow_symlinks=False):
        return f"dir  {entry.name}/"
    try:
        size = entry.stat(follow_symlinks=False).st_size
    except OSError:
        size = 0
    return f"file {entry.name:40} {size:>10} bytes"


def run_list_dir(args: dict[str, Any], ctx: ToolContext, cancel: threading.Event) -> ToolResult:
    shown = str(args.get("path") or ".")
    place = place_arg(args, ctx)
    try:
        fd = open_folder(place)
    except FileNotFoundError:
        raise ToolError(f"Directory not found: {shown}") from None
    except NotADirectoryError:
        raise ToolError(f"Not a directory: {shown} (use read_file for files)") from None
    try:
        with os.scandir(fd) as it:
            entries = sorted(it, key=lambda e: (not e.is_dir(follow_symlinks=False), e.name))
        lines = [_entry_line(e, fd) for e in entries[:MAX_LIST_ENTRIES]]
    finally:
        os.close(fd)
    if len(entries) > MAX_LIST_ENTRIES:
        lines.append(f"... and {len(entries) - MAX_LIST_ENTRIES} more entries")
    return ToolResult(f"Contents of {shown}:\n" + ("\n".join(lines) or "(empty directory)"))


# ---- specs -----------------------------------------------------------------------------------

_PATH = {"type": "string", "description": "File path, relative to the workspace."}
_LINE = {"type": "integer", "minimum": 1}


def file_tools() -> list[ToolSpec]:
    return [
        ToolSpec(
            name="read_file",
            description=(
                "Read a text file. Output starts with [File: path | Lines: total], then the lines "
                "as 'N| text'. Use start_line/end_line (1-based, inclusive) for part of a file."
            ),
            parameters={
                "type": "object",
                "properties": {
                    "path": _PATH,
                    "start_line": {**_LINE, "description": "First line to show (1-based)."},
                    "end_line": {**_LINE, "description": "Last line to show (inclusive)."},
                    "show_line_numbers": {"type": "boolean", "description": "Default true."},
                },
                "required": ["path"],
                "additionalProperties": False,
            },
            run=run_read_file,
            kind=KIND_READ,
            path_args=("path",),
        ),
        ToolSpec(
            name="write_file",
            description=(
                "Write a file (creating parent folders). mode 'overwrite' (default) replaces the "
                "file; 'append' adds to its end. For long files write chunks of at most 800 "
                "characters: the first with overwrite, the rest with append."
            ),
            parameters={
                "type": "object",
                "properties": {
                    "path": _PATH,
                    "content": {"type": "string", "description": "Text to write."},
                    "mode": {"type": "string", "enum": ["overwrite", "append"]},
                },
                "required": ["path", "content"],
                "additionalProperties": False,
            },
            run=run_write_file,
            kind=KIND_WRITE,
            path_args=("path",),
            preview=preview_write_file,
        ),
        ToolSpec(
            name="edit_file",
            description=(
                "Edit a text file. Text mode: old_text (must occur exactly once) is replaced by "
                "new_text. Line mode (give start_line): lines start_line..end_line are replaced by "
                "new_text (empty new_text deletes them); with insert=true new_text goes before "
                "start_line."
            ),
            parameters={
                "type": "object",
                "properties": {
                    "path": _PATH,
                    "old_text": {"type": "string", "description": "Exact text to replace."},
                    "new_text": {"type": "string", "description": "Replacement text."},
                    "start_line": {**_LINE, "description": "Line mode: first line (1-based)."},
                    "end_line": {**_LINE, "description": "Line mode: last line (default start)."},
                    "insert": {"type": "boolean", "description": "Line mode: insert, not replace."},
                },
                "required": ["path"],
                "additionalProperties": False,
            },
            run=run_edit_file,
            kind=KIND_WRITE,
            path_args=("path",),
            preview=preview_edit_file,
            reasons=lambda args: ["edits a file"],
        ),
        ToolSpec(
            name="list_dir",
            description="List a directory: folders first, then files with their sizes.",
            parameters={
                "type": "object",
                "properties": {"path": {**_PATH, "description": "Directory (default '.')."}},
                "additionalProperties": False,
            },
            run=run_list_dir,
            kind=KIND_READ,
            path_args=("path",),
        ),
    ]
