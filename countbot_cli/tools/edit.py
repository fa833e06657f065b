"""edit_file (SPEC §6): text mode (old_text, which must occur exactly once, replaced by
new_text; a CRLF file edited with LF text still matches) and line mode (start_line..end_line
replaced, deleted or, with insert, new lines before start_line). `apply_edit` is pure; the run
rewrites the file atomically keeping its mode, the preview is the diff the approval prompt shows.
"""

from __future__ import annotations

import json
import os
import stat
import threading
from typing import Any

from countbot_cli.tools.base import ToolContext, ToolError, ToolResult
from countbot_cli.tools.confined import folder_of, write_replacing
from countbot_cli.tools.diffs import MAX_DIFF_CHARS, split_lines, unified_diff
from countbot_cli.tools.textfile import decode_text, open_regular, place_arg, read_text


def apply_edit(text: str, args: dict[str, Any], shown: str) -> tuple[str, str]:
    """(new file text, result message) for an edit_file call; ToolError if it cannot apply."""
    start, old = args.get("start_line"), args.get("old_text")
    new = str(args.get("new_text") or "")
    if start is not None and old:
        raise ToolError("give either start_line (line mode) or old_text (text mode), not both")
    if start is not None:
        return _edit_lines(text, args, start, new, shown)
    if not old:
        raise ToolError(
            "give old_text (text mode: replace that exact text) or start_line "
            "(line mode: replace, insert or delete lines)"
        )
    count = text.count(old)
    if count == 0 and "\r\n" in text and "\r\n" not in old:  # the model wrote LF for a CRLF file
        old, new = old.replace("\n", "\r\n"), new.replace("\r\n", "\n").replace("\n", "\r\n")
        count = text.count(old)
    if count == 0:
        raise ToolError(
            f"old_text not found in {shown} ({len(split_lines(text))} lines, {len(text)} chars); "
            "use read_file to check the exact text, whitespace and indentation included"
        )
    if count > 1:
        raise ToolError(
            f"old_text found {count} times in {shown}; it must match exactly once: "
            "include more surrounding lines to make it unique"
        )
    return text.replace(old, new, 1), f"Edited {shown} (replaced 1 occurrence)"


def _edit_lines(
    text: str, args: dict[str, Any], start: int, new: str, shown: str
) -> tuple[str, str]:
    lines = split_lines(text)
    total = len(lines)
    if start > total + 1:
        raise ToolError(f"start_line ({start}) out of range (1-{total + 1}) for {shown}")
    eol = "\r\n" if lines and lines[0].endswith("\r\n") else "\n"
    new_lines = split_lines(new.replace("\r\n", "\n").replace("\n", eol))
    if new_lines and not new_lines[-1].endswith("\n"):
        new_lines[-1] += eol
    if args.get("insert"):
        if not new_lines:
            raise ToolError("new_text is empty: nothing to insert")
        if start == total + 1 and lines and not lines[-1].endswith("\n"):
            lines[-1] += eol
        result = lines[: start - 1] + new_lines + lines[start - 1 :]
        return "".join(result), f"Inserted {len(new_lines)} lines before line {start} in {shown}"
    end = args.get("end_line") or start
    if end < start:
        raise ToolError(f"end_line ({end}) < start_line ({start})")
    if end > total:
        raise ToolError(f"end_line ({end}) exceeds total lines ({total}) of {shown}")
    result = lines[: start - 1] + new_lines + lines[end:]
    if new_lines:
        action = f"Replaced lines {start}-{end} with {len(new_lines)} lines"
    else:
        action = f"Deleted lines {start}-{end}"
    return "".join(result), f"Edited {shown}: {action}"


def run_edit_file(args: dict[str, Any], ctx: ToolContext, cancel: threading.Event) -> ToolResult:
    shown = str(args["path"])
    place = place_arg(args, ctx)
    try:
        with folder_of(place) as (fd, name):
            f, size = open_regular(fd, name, place, shown)
            with f:
                mode = stat.S_IMODE(os.fstat(f.fileno()).st_mode)
                new_text, message = apply_edit(decode_text(f, size, shown, ctx), args, shown)
            write_replacing(fd, name, new_text.encode("utf-8"), mode)
    except (FileNotFoundError, NotADirectoryError):
        raise ToolError(f"File not found: {shown}") from None
    except IsADirectoryError:
        raise ToolError(f"Not a file: {shown} is a directory; use list_dir") from None
    return ToolResult(message)


def preview_edit_file(args: dict[str, Any], ctx: ToolContext, may_read: bool) -> str:
    shown = str(args["path"])
    place = place_arg(args, ctx, confine=False)
    if not may_read:
        described = json.dumps({k: v for k, v in args.items() if k != "path"}, ensure_ascii=False)
        if len(described) > MAX_DIFF_CHARS:
            cut = len(described) - MAX_DIFF_CHARS
            described = described[:MAX_DIFF_CHARS] + f"… [{cut} more characters]"
        return (
            f"({place.path} is outside the workspace: its current content was not read)\n"
            f"Edit requested: {described}"
        )
    old_text = read_text(place, shown, ctx)
    new_text, _ = apply_edit(old_text, args, shown)
    return unified_diff(old_text, new_text, shown)
