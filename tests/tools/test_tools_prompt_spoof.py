"""The approval prompt cannot be spoofed: what it shows is what runs, and padding, control
sequences, bidi or look-alike characters cannot hide or push away part of a command or diff."""

from __future__ import annotations

import io
import json
import re
import sys
from pathlib import Path
from typing import Any

import fakeserver as fs
import pexpect
import pyte
import pytest
from cbenv import make_cb
from terminal import spawn

from countbot_cli.messages import ToolCall
from countbot_cli.textsafe import cells, compact, layout, visible
from countbot_cli.tools.registry import PreparedCall, ToolContext, ToolRegistry, default_tools
from countbot_cli.ui.confirm import TerminalConfirmer


@pytest.fixture
def registry(tmp_path: Path) -> ToolRegistry:
    ws = tmp_path / "ws"
    ws.mkdir()
    ctx = ToolContext(workspace=ws)
    return ToolRegistry(default_tools(ctx), ctx)


def prep(registry: ToolRegistry, name: str, args: dict[str, Any]) -> PreparedCall:
    prepared = registry.prepare(ToolCall(id="call_1", name=name, arguments=json.dumps(args)))
    assert prepared.error is None, prepared.error
    return prepared


def shown(registry: ToolRegistry, name: str, args: dict[str, Any], color: bool = False) -> str:
    out = io.StringIO()
    TerminalConfirmer(io.StringIO("n\n\n"), out, color=color, editor="").confirm(
        prep(registry, name, args)
    )
    return out.getvalue()


def test_look_alike_blanks_and_invisible_format_characters_are_escaped() -> None:
    assert visible("ls\u00a0-la") == "ls\\xa0-la"  # no-break space: one shell word
    assert visible("a\u061cb\u00adc\u2028d") == "a\\u061cb\\xadc\\u2028d"  # bidi mark, SHY, LS
    assert visible("x\U000e0041y\u3164z\u2003w") == "x\\U000e0041y\\u3164z\\u2003w"
    assert visible("中文\u3000全角 ok\ttab") == "中文\u3000全角 ok\ttab"  # ordinary text is kept


def test_escapes_are_marked_in_reverse_video_on_a_colour_terminal() -> None:
    mark = lambda e: f"<{e}>"  # noqa: E731
    assert visible("a\x1b[2Kb\u202ec", mark) == "a<\\x1b>[2Kb<\\u202e>c"


def test_compact_counts_long_runs_of_blank_lines_keeping_their_marker() -> None:
    lines = ["$ touch x", *(["> "] * 80), "> ls", "+a", "+", "+ ", "+", "+", "+b", ""]
    assert compact(lines) == [
        "$ touch x",
        "> ",
        "> ",
        "> [… 78 more blank lines …]",
        "> ls",
        "+a",
        "+",
        "+ ",
        "+[… 2 more blank lines …]",
        "+b",
        "",
    ]


def test_a_command_padded_with_blank_lines_keeps_its_start_next_to_the_question(
    registry: ToolRegistry,
) -> None:
    text = shown(registry, "exec", {"command": "touch /tmp/pwned" + "\n" * 200 + "ls"})
    lines = text.split("\n")
    assert len(lines) < 12
    assert "  $ touch /tmp/pwned" in lines
    assert "  > [… 197 more blank lines …]" in lines
    assert "  > ls" in lines and "  (one command of 201 lines)" in lines


def test_a_long_run_of_blanks_inside_a_line_is_counted(registry: ToolRegistry) -> None:
    text = shown(registry, "exec", {"command": "touch /tmp/pwned;" + " " * 6000 + "ls"})
    assert "  $ touch /tmp/pwned;[… 6000 blanks …]ls\n" in text
    assert max(len(line) for line in text.split("\n")) < 200
    normal = shown(registry, "exec", {"command": "printf '%s' " + " " * 20 + "x"})
    assert "printf '%s' " + " " * 20 + "x" in normal  # short runs are shown as they are


def test_a_command_cannot_fake_the_folder_line(registry: ToolRegistry) -> None:
    text = shown(registry, "exec", {"command": "rm -rf ~\n(in /tmp/safe, timeout 1 s)"})
    assert "  $ rm -rf ~\n  > (in /tmp/safe, timeout 1 s)\n  (one command of 2 lines)\n" in text


def test_control_sequences_in_arguments_never_reach_the_terminal(registry: ToolRegistry) -> None:
    cmd = "echo safe \x1b[2K\x1b[1A\x1b]0;t\x07\rls # \u202eevil"
    for color in (False, True):
        text = shown(registry, "exec", {"command": cmd}, color=color)
        raw = re.sub(r"\x1b\[[0-9;]*m", "", text)  # the prompt's own colours only
        assert "\x1b" not in raw and "\r" not in raw and "\u202e" not in raw and "\x07" not in raw
        assert "\\x1b[2K\\x1b[1A\\x1b]0;t\\x07\\rls # \\u202eevil" in raw


def test_a_tall_request_ends_with_a_warning_to_scroll_up(registry: ToolRegistry) -> None:
    content = "".join(f"line {n}\n" for n in range(60))
    text = shown(registry, "write_file", {"path": "big.txt", "content": content})
    assert "more than the screen shows: scroll up" in text  # 80x24 when not on a terminal
    small = shown(registry, "write_file", {"path": "small.txt", "content": "one line\n"})
    assert "scroll up" not in small


def test_the_model_is_told_what_ran_not_what_was_shown(registry: ToolRegistry) -> None:
    """The preview is built from the parsed arguments the tool then runs with."""
    p = prep(registry, "exec", {"command": "echo one", "working_dir": "."})
    assert p.preview.startswith("$ echo one\n(in ")
    assert p.args == {"command": "echo one", "working_dir": "."}


# ---- through a real terminal ----

pty_only = pytest.mark.skipif(sys.platform == "win32", reason="needs a POSIX pty")


@pty_only
def test_on_a_24_line_terminal_the_padded_command_is_on_screen_at_the_question(
    tmp_path: Path, server: fs.FakeServer
) -> None:
    cb = make_cb(tmp_path, server.base_url, tools={"enabled": True})
    pwned = cb.work / "pwned"  # named relative to the workspace: the line fits 80 columns
    padded = [  # wherever pytest's temporary folder is
        ("exec", {"command": "touch pwned" + "\n" * 100 + "ls"}),
        ("exec", {"command": "touch pwned;" + " " * 5000 + "ls"}),
    ]
    server.add(fs.tool_calls(padded), fs.text("ok"))
    child = spawn(cb, "ask", "list files", cols=80, rows=24)
    screen = pyte.Screen(80, 24)
    stream = pyte.Stream(screen)
    try:
        for _ in padded:
            child.expect(r"\(default: no\) ")
            stream.feed(child.before + child.after)  # the screen up to the question
            visible_rows = "\n".join(screen.display)
            assert "$ touch pwned" in visible_rows, visible_rows
            child.sendline("n")
            child.expect("Reason for the model")
            stream.feed(child.before + child.after)
            child.sendline("")
        child.expect(pexpect.EOF)
    finally:
        child.close()
    assert child.exitstatus == 0
    assert not pwned.exists()


# ---- tabs and wide blanks: measured in real cells, expanded, counted ----

PAD = "\t" * 47 + "\u3000"  # 47 tabs and one ideographic space: never 48 [ \t] in a row
SIZES = [(80, 24), (120, 40), (200, 60)]


def padded_commands(rows: int) -> dict[str, str]:
    """Commands whose start a wrong width count let scroll off a `rows`-line terminal."""
    k = rows - 7
    return {
        "pad lines": "rm -rf ~/victim\n" + (PAD + "\n") * k + "ls",
        "one padded line": "rm -rf ~/victim;" + PAD * k + "ls",
        "padded words": "rm -rf ~/victim\n" + ("x" + PAD + "y\n") * k + "ls",
        "taller than the screen": "rm -rf ~/victim\n" + ("x" + PAD + "y\n") * (rows + 5),
    }


def test_layout_expands_tabs_by_column_and_counts_wide_runs_by_width() -> None:
    assert cells("ab中文\u3000e\u0301") == 2 + 4 + 2 + 1  # wide x2, combining accent 0
    assert layout("a\tb", 0) == "a       b" and layout("a\tb", 3) == "a    b"
    assert layout("x" + "\u3000" * 23 + "y") == "x" + "\u3000" * 23 + "y"  # 46 columns
    assert layout("x" + "\u3000" * 24 + "y") == "x[… 24 blanks …]y"  # 48 columns
    assert layout("x" + PAD + "y") == "x[… 48 blanks …]y"
    assert layout("go\t\tfmt") == "go              fmt"  # short runs: as the terminal shows
    marked = layout("x" + " " * 60, count=lambda s: f"<{s}>")
    assert marked == "x<[… 60 blanks …]>"


@pytest.mark.parametrize(("columns", "rows"), SIZES)
def test_tabs_and_wide_blanks_cannot_push_a_command_off_the_screen(
    registry: ToolRegistry, monkeypatch: pytest.MonkeyPatch, columns: int, rows: int
) -> None:
    monkeypatch.setattr(TerminalConfirmer, "_size", lambda self: (columns, rows))
    for name, command in padded_commands(rows).items():
        text = shown(registry, "exec", {"command": command})
        assert "\t" not in text, name  # expanded: the terminal's own tab stops play no part
        screen = pyte.Screen(columns, rows)
        at_question = text[: text.index("(default: no) ")]
        pyte.Stream(screen).feed(at_question.replace("\n", "\r\n"))
        on_screen = "\n".join(screen.display)
        start, warned = "$ rm -rf ~/victim" in on_screen, "scroll up" in on_screen
        assert start or warned, (name, on_screen)
        if name == "taller than the screen":
            assert warned, (name, on_screen)
        else:  # each padded line is one counted run: one row, whatever the terminal's tabs do
            assert re.search(r"\[… \d+ (blanks|more blank lines) …\]", text), name


@pty_only
@pytest.mark.parametrize(("columns", "rows"), SIZES)
def test_on_a_real_terminal_a_tab_padded_command_keeps_its_start_in_view(
    tmp_path: Path, server: fs.FakeServer, columns: int, rows: int
) -> None:
    cb = make_cb(tmp_path, server.base_url, tools={"enabled": True})
    victim = tmp_path / "victim"
    victim.mkdir()
    command = f"rm -rf {victim}\n" + ("x" + PAD + "y\n") * (rows - 7) + "ls"
    server.add(fs.tool_calls([("exec", {"command": command})]), fs.text("ok"))
    child = spawn(cb, "ask", "clean up", cols=columns, rows=rows)
    screen = pyte.Screen(columns, rows)
    stream = pyte.Stream(screen)
    try:
        child.expect(r"\(default: no\) ")
        stream.feed(child.before + child.after)  # the screen up to the question
        on_screen = "\n".join(screen.display)
        assert f"$ rm -rf {victim}" in on_screen or "scroll up" in on_screen, on_screen
        child.sendline("n")
        child.expect("Reason for the model")
        child.sendline("")
        child.expect(pexpect.EOF)
    finally:
        child.close()
    assert child.exitstatus == 0
    assert victim.is_dir()
