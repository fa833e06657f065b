"""read_file, write_file, edit_file and list_dir on real files: CountBot's output formats."""

from __future__ import annotations

import json
import os
import stat
from functools import partial
from pathlib import Path
from typing import Any

import pytest
from waits import returns_within

from countbot_cli.messages import ToolCall
from countbot_cli.tools.diffs import unified_diff
from countbot_cli.tools.registry import ToolContext, ToolRegistry, ToolResult, default_tools


@pytest.fixture
def ws(tmp_path: Path) -> Path:
    root = tmp_path / "ws"
    root.mkdir()
    return root


def registry(ws: Path, **ctx_args: Any) -> ToolRegistry:
    ctx = ToolContext(workspace=ws, **ctx_args)
    return ToolRegistry(default_tools(ctx), ctx)


def call(ws: Path, name: str, _ctx: dict[str, Any] | None = None, **args: Any) -> ToolResult:
    reg = registry(ws, **(_ctx or {}))
    prepared = reg.prepare(ToolCall("c1", name, json.dumps(args)))
    return reg.run(prepared)


# ---- read_file -------------------------------------------------------------------------------


def test_read_file_header_and_right_aligned_numbers(ws: Path) -> None:
    (ws / "f.txt").write_text("".join(f"line {i}\n" for i in range(1, 12)))
    res = call(ws, "read_file", path="f.txt")
    assert res.ok
    lines = res.content.split("\n")
    assert lines[0] == "[File: f.txt | Lines: 11]"
    assert lines[1] == " 1| line 1"
    assert lines[9] == " 9| line 9"
    assert lines[10] == "10| line 10"
    assert lines[11] == "11| line 11"
    assert len(lines) == 12


def test_read_file_range_shows_the_range_and_aligns_to_the_last_shown(ws: Path) -> None:
    (ws / "f.txt").write_text("".join(f"l{i}\n" for i in range(1, 21)))
    res = call(ws, "read_file", path="f.txt", start_line=8, end_line=10)
    assert res.content == "[File: f.txt | Lines: 20 | Showing: 8-10]\n 8| l8\n 9| l9\n10| l10"


def test_read_file_end_line_past_the_end_is_clamped(ws: Path) -> None:
    (ws / "f.txt").write_text("a\nb\nc")  # no trailing newline: still 3 lines
    res = call(ws, "read_file", path="f.txt", start_line=2, end_line=99)
    assert res.content == "[File: f.txt | Lines: 3 | Showing: 2-3]\n2| b\n3| c"


def test_read_file_without_line_numbers_and_crlf(ws: Path) -> None:
    (ws / "f.txt").write_bytes(b"one\r\ntwo\r\n")
    res = call(ws, "read_file", path="f.txt", show_line_numbers=False)
    assert res.content == "[File: f.txt | Lines: 2]\none\ntwo"


def test_read_file_range_errors(ws: Path) -> None:
    (ws / "f.txt").write_text("a\nb\n")
    res = call(ws, "read_file", path="f.txt", start_line=5)
    assert not res.ok and "start_line (5) is beyond the end of f.txt (2 lines)" in res.content
    res = call(ws, "read_file", path="f.txt", start_line=2, end_line=1)
    assert not res.ok and "end_line (1) is before start_line (2)" in res.content


def test_read_file_empty_file(ws: Path) -> None:
    (ws / "empty.txt").write_text("")
    assert call(ws, "read_file", path="empty.txt").content == (
        "[File: empty.txt | Lines: 0]\n(empty file)"
    )


def test_read_file_missing_and_directory(ws: Path) -> None:
    res = call(ws, "read_file", path="nope.txt")
    assert (res.ok, res.content) == (False, "Error: File not found: nope.txt")
    (ws / "d").mkdir()
    res = call(ws, "read_file", path="d")
    assert not res.ok and "is a directory; use list_dir" in res.content


def test_read_file_refuses_binary_and_non_utf8(ws: Path) -> None:
    (ws / "img.bin").write_bytes(b"PNG\x00\x01\x02")
    res = call(ws, "read_file", path="img.bin")
    assert not res.ok and "binary" in res.content
    (ws / "latin1.txt").write_bytes("café".encode("latin-1"))
    res = call(ws, "read_file", path="latin1.txt")
    assert not res.ok and "not UTF-8" in res.content


def test_read_file_size_bound_suggests_ranges_and_ranges_still_work(ws: Path) -> None:
    (ws / "big.txt").write_text("".join(f"row {i}\n" for i in range(1, 1001)))
    res = call(ws, "read_file", {"max_read_bytes": 1000}, path="big.txt")
    assert not res.ok
    assert "over the 1000-byte limit" in res.content and "start_line" in res.content
    res = call(
        ws, "read_file", {"max_read_bytes": 1000}, path="big.txt", start_line=500, end_line=501
    )
    assert res.ok
    assert (
        res.content
        == "[File: big.txt | Lines: 1000 | Showing: 500-501]\n500| row 500\n501| row 501"
    )
    res = call(ws, "read_file", {"max_read_bytes": 1000}, path="big.txt", start_line=1)
    assert not res.ok and "smaller range" in res.content


# ---- write_file ------------------------------------------------------------------------------


def test_write_file_creates_parents_and_reports(ws: Path) -> None:
    res = call(ws, "write_file", path="a/b/c.txt", content="héllo\n")
    assert res.ok
    assert res.content == "Created a/b/c.txt with 6 chars, 7 bytes (file was new)"
    assert (ws / "a" / "b" / "c.txt").read_text(encoding="utf-8") == "héllo\n"


def test_write_file_overwrite_keeps_permissions(ws: Path) -> None:
    target = ws / "run.sh"
    target.write_text("old\n")
    target.chmod(0o750)
    res = call(ws, "write_file", path="run.sh", content="new\n", mode="overwrite")
    assert res.content == "Wrote 4 chars (4 bytes) to run.sh"
    assert target.read_text() == "new\n"
    assert stat.S_IMODE(target.stat().st_mode) == 0o750
    assert [p.name for p in ws.iterdir()] == ["run.sh"]  # no temporary file left behind


def test_write_file_append(ws: Path) -> None:
    (ws / "log.txt").write_text("one\n")
    res = call(ws, "write_file", path="log.txt", content="two\n", mode="append")
    assert res.content == "Appended 4 chars (4 bytes) to log.txt (total: 8 bytes)"
    assert (ws / "log.txt").read_text() == "one\ntwo\n"


def test_write_file_to_a_directory_or_through_a_file_fails(ws: Path) -> None:
    (ws / "d").mkdir()
    res = call(ws, "write_file", path="d", content="x")
    assert not res.ok and "is a directory" in res.content
    (ws / "f").write_text("x")
    res = call(ws, "write_file", path="f/inner.txt", content="x")
    assert not res.ok and (ws / "f").read_text() == "x"


def test_write_through_symlink_inside_writes_the_target(ws: Path) -> None:
    (ws / "real.txt").write_text("old")
    (ws / "alias.txt").symlink_to(ws / "real.txt")
    assert call(ws, "write_file", path="alias.txt", content="new").ok
    assert (ws / "alias.txt").is_symlink() and (ws / "real.txt").read_text() == "new"


# ---- edit_file -------------------------------------------------------------------------------


def test_edit_text_mode_replaces_exactly_one_match(ws: Path) -> None:
    (ws / "m.py").write_text("def f():\n    return 1\n")
    res = call(ws, "edit_file", path="m.py", old_text="return 1", new_text="return 2")
    assert res.content == "Edited m.py (replaced 1 occurrence)"
    assert (ws / "m.py").read_text() == "def f():\n    return 2\n"


def test_edit_text_mode_zero_or_many_matches_is_an_error_and_changes_nothing(ws: Path) -> None:
    (ws / "m.txt").write_text("x\nx\n")
    res = call(ws, "edit_file", path="m.txt", old_text="y", new_text="z")
    assert not res.ok and "old_text not found in m.txt (2 lines, 4 chars)" in res.content
    res = call(ws, "edit_file", path="m.txt", old_text="x", new_text="z")
    assert not res.ok and "old_text found 2 times in m.txt" in res.content
    assert (ws / "m.txt").read_text() == "x\nx\n"


def test_edit_text_mode_on_a_crlf_file(ws: Path) -> None:
    (ws / "w.txt").write_bytes(b"a\r\nb\r\nc\r\n")
    res = call(ws, "edit_file", path="w.txt", old_text="a\nb\n", new_text="A\nB\n")
    assert res.ok, res.content
    assert (ws / "w.txt").read_bytes() == b"A\r\nB\r\nc\r\n"


def test_edit_line_mode_replace_delete_insert(ws: Path) -> None:
    f = ws / "l.txt"
    f.write_text("1\n2\n3\n4\n")
    res = call(ws, "edit_file", path="l.txt", start_line=2, end_line=3, new_text="two\nthree\nx")
    assert res.content == "Edited l.txt: Replaced lines 2-3 with 3 lines"
    assert f.read_text() == "1\ntwo\nthree\nx\n4\n"
    res = call(ws, "edit_file", path="l.txt", start_line=4, new_text="")
    assert res.content == "Edited l.txt: Deleted lines 4-4"
    assert f.read_text() == "1\ntwo\nthree\n4\n"
    res = call(ws, "edit_file", path="l.txt", start_line=1, insert=True, new_text="zero")
    assert res.content == "Inserted 1 lines before line 1 in l.txt"
    assert f.read_text() == "zero\n1\ntwo\nthree\n4\n"


def test_edit_line_mode_insert_at_end_of_file_without_newline(ws: Path) -> None:
    f = ws / "n.txt"
    f.write_text("a\nb")
    res = call(ws, "edit_file", path="n.txt", start_line=3, insert=True, new_text="c")
    assert res.ok
    assert f.read_text() == "a\nb\nc\n"


def test_edit_line_mode_errors(ws: Path) -> None:
    (ws / "l.txt").write_text("1\n2\n")
    res = call(ws, "edit_file", path="l.txt", start_line=5, new_text="x")
    assert not res.ok and "start_line (5) out of range (1-3)" in res.content
    res = call(ws, "edit_file", path="l.txt", start_line=1, end_line=9, new_text="x")
    assert not res.ok and "end_line (9) exceeds total lines (2)" in res.content
    res = call(ws, "edit_file", path="l.txt", start_line=2, end_line=1, new_text="x")
    assert not res.ok and "end_line (1) < start_line (2)" in res.content
    res = call(ws, "edit_file", path="l.txt", start_line=1, old_text="1", new_text="x")
    assert not res.ok and "not both" in res.content
    res = call(ws, "edit_file", path="l.txt")
    assert not res.ok and "old_text" in res.content and "start_line" in res.content
    assert (ws / "l.txt").read_text() == "1\n2\n"


def test_edit_missing_file(ws: Path) -> None:
    res = call(ws, "edit_file", path="ghost.txt", old_text="a", new_text="b")
    assert not res.ok and "File not found: ghost.txt" in res.content


# ---- list_dir --------------------------------------------------------------------------------


def test_list_dir_format_dirs_first_with_sizes(ws: Path, tmp_path: Path) -> None:
    (ws / "b.txt").write_text("12345")
    (ws / "a.txt").write_text("")
    (ws / "zdir").mkdir()
    (ws / "adir").mkdir()
    (ws / "out").symlink_to(tmp_path)
    res = call(ws, "list_dir")
    assert res.content.split("\n") == [
        "Contents of .:",
        "dir  adir/",
        "dir  zdir/",
        f"file {'a.txt':40} {0:>10} bytes",
        f"file {'b.txt':40} {5:>10} bytes",
        f"link out -> {tmp_path}",
    ]


def test_list_dir_subfolder_empty_missing_and_file(ws: Path) -> None:
    (ws / "sub").mkdir()
    assert call(ws, "list_dir", path="sub").content == "Contents of sub:\n(empty directory)"
    res = call(ws, "list_dir", path="nothere")
    assert not res.ok and "Directory not found: nothere" in res.content
    (ws / "f.txt").write_text("x")
    res = call(ws, "list_dir", path="f.txt")
    assert not res.ok and "Not a directory" in res.content


def test_list_dir_does_not_follow_a_symlinked_dir_out(ws: Path, tmp_path: Path) -> None:
    outside = tmp_path / "private"
    outside.mkdir()
    (outside / "key.pem").write_text("x")
    (ws / "private").symlink_to(outside)
    res = call(ws, "list_dir")
    assert "key.pem" not in res.content
    reg = registry(ws)
    prepared = reg.prepare(ToolCall("c", "list_dir", json.dumps({"path": "private"})))
    assert prepared.needs_approval and prepared.outside_paths == [outside.resolve()]


def test_unreadable_directory_is_a_clean_error(ws: Path) -> None:
    if os.geteuid() == 0:
        pytest.skip("root can read any directory")
    locked = ws / "locked"
    locked.mkdir()
    locked.chmod(0)
    try:
        res = call(ws, "list_dir", path="locked")
        assert not res.ok and res.content.startswith("Error: list_dir failed")
    finally:
        locked.chmod(0o700)


# ---- diff previews ---------------------------------------------------------------------------


def test_diff_marks_a_missing_final_newline_and_no_change() -> None:
    assert unified_diff("a\n", "a\nb", "f.txt") == (
        "--- a/f.txt\n+++ b/f.txt\n@@ -1 +1,2 @@\n a\n+b\n\\ No newline at end of file"
    )
    assert unified_diff("same\n", "same\n", "f.txt") == (
        "(no change: f.txt already has this content)"
    )


def test_large_scattered_change_is_shown_fast_as_one_block() -> None:
    old = "".join(f"line {i} of the old text\n" for i in range(30000))
    new = "".join(
        f"NEW {i}\n" if i % 3 == 0 else f"line {i} of the old text\n" for i in range(30000)
    )
    # a hang bound: difflib alone takes ~30 s on this
    diff = returns_within(lambda: unified_diff(old, new, "big.txt"), "a 30,000-line diff", 20)
    lines = diff.split("\n")
    assert lines[:3] == ["--- a/big.txt", "+++ b/big.txt", "@@ -1,30000 +1,30000 @@"]
    assert "[29798 more removed lines not shown]" in lines
    assert "+NEW 0" in lines  # the new text is visible, not only the removed lines
    assert lines[-1].startswith("[diff truncated: ")


# ---- odd targets and long previews -------------------------------------------------------------


def test_writing_to_a_fifo_is_refused_at_once(ws: Path) -> None:
    os.mkfifo(ws / "pipe")
    for mode in ("append", "overwrite"):  # a hang bound: no open() waiting for a reader
        write = partial(call, ws, "write_file", path="pipe", content="x", mode=mode)
        res = returns_within(write, f"a write ({mode}) to a FIFO nobody reads", 20)
        assert not res.ok and "not a regular file" in res.content
    assert stat.S_ISFIFO(os.lstat(ws / "pipe").st_mode)


def test_previews_of_writes_outside_the_workspace_are_capped(ws: Path, tmp_path: Path) -> None:
    target = tmp_path / "outside.txt"
    target.write_text("old\n", encoding="utf-8")
    reg = registry(ws)
    big = "".join(f"line {n}\n" for n in range(50_000))
    write = reg.prepare(
        ToolCall("c1", "write_file", json.dumps({"path": str(target), "content": big}))
    )
    assert write.outside_paths and "its current content was not read" in write.preview
    assert "old" not in write.preview and len(write.preview) < 25_000
    assert "[diff truncated:" in write.preview
    edit_args = {"path": str(target), "old_text": "old", "new_text": big}
    edit = reg.prepare(ToolCall("c2", "edit_file", json.dumps(edit_args)))
    assert edit.outside_paths and len(edit.preview) < 25_000 and "more characters]" in edit.preview


def test_a_very_long_path_gives_a_short_error(ws: Path) -> None:
    res = call(ws, "write_file", path="x" * 5000, content="x")
    assert not res.ok and "File name too long" in res.content
    assert len(res.content) < 400
