"""TerminalConfirmer (the approval prompt) with injected input/output, its policy integration,
and its wiring into `run_ask` in-process (a fake terminal on stdin and stderr)."""

from __future__ import annotations

import io
import json
import sys
from pathlib import Path
from typing import Any

import fakeserver as fs
import pytest
import yaml
from cbenv import provider_config

from countbot_cli.commands.ask import AskOptions, run_ask
from countbot_cli.messages import ToolCall
from countbot_cli.textsafe import visible
from countbot_cli.tools.approval import (
    HOW_DENIED_USER,
    HOW_SESSION,
    HOW_USER_ALWAYS,
    HOW_USER_EDITED,
    HOW_USER_ONCE,
    ApprovalPolicy,
    Decision,
)
from countbot_cli.tools.registry import PreparedCall, ToolContext, ToolRegistry, default_tools
from countbot_cli.ui.confirm import TerminalConfirmer, check_arguments, question


class FakeTTY(io.StringIO):
    def isatty(self) -> bool:
        return True


class Interrupting(io.StringIO):
    def readline(self, size: int | None = -1) -> str:
        raise KeyboardInterrupt


@pytest.fixture
def registry(tmp_path: Path) -> ToolRegistry:
    ws = tmp_path / "ws"
    ws.mkdir()
    (ws / "a.txt").write_text("one\ntwo\n", encoding="utf-8")
    ctx = ToolContext(workspace=ws)
    return ToolRegistry(default_tools(ctx), ctx)


def prep(registry: ToolRegistry, name: str, args: dict[str, Any]) -> PreparedCall:
    prepared = registry.prepare(ToolCall(id="call_1", name=name, arguments=json.dumps(args)))
    assert prepared.error is None, prepared.error
    return prepared


def confirmer(answers: str, **kw: Any) -> tuple[TerminalConfirmer, io.StringIO]:
    out = io.StringIO()
    kw.setdefault("editor", "")
    return TerminalConfirmer(io.StringIO(answers), out, color=False, **kw), out


WRITE = {"path": "a.txt", "content": "one\nTWO\n"}


# ---- what is shown ----


def test_write_shows_the_diff_and_every_option(registry: ToolRegistry) -> None:
    c, out = confirmer("y\n")
    assert c.confirm(prep(registry, "write_file", WRITE)) == Decision(True, HOW_USER_ONCE)
    text = out.getvalue()
    assert "countbot wants to run write_file (writes a file):" in text
    assert "  --- a/a.txt\n  +++ b/a.txt\n" in text
    assert "  -two\n  +TWO\n" in text
    assert text.endswith(
        "Allow? [y]es / [n]o / [a]lways for this tool / [A]lways this tool, saved / [e]dit "
        "(default: no) "
    )
    assert "\x1b" not in text  # color=False


def test_colour_marks_added_and_removed_lines(registry: ToolRegistry) -> None:
    out = io.StringIO()
    c = TerminalConfirmer(io.StringIO("n\n\n"), out, color=True, editor="")
    c.confirm(prep(registry, "write_file", WRITE))
    text = out.getvalue()
    assert "\x1b[31m  -two\x1b[0m" in text and "\x1b[32m  +TWO\x1b[0m" in text


def test_exec_shows_the_exact_command_and_folder_without_always(
    registry: ToolRegistry,
) -> None:
    c, out = confirmer("\n")
    cmd = "printf 'ok\\n' \x1b[8mhidden\x1b[0m; echo \u202eevil"
    prepared = prep(registry, "exec", {"command": cmd})
    assert c.confirm(prepared).approved is False
    text = out.getvalue()
    ws = registry.ctx.workspace.resolve()
    assert "  $ printf 'ok\\n' \\x1b[8mhidden\\x1b[0m; echo \\u202eevil\n" in text
    assert f"(in {ws}, timeout 60 s)" in text
    assert "[a]lways" not in text and question(prepared) in text
    assert "\x1b" not in text and "\u202e" not in text


def test_outside_paths_are_named_in_a_warning(registry: ToolRegistry, tmp_path: Path) -> None:
    (tmp_path / "ws-evil").mkdir()
    (tmp_path / "ws-evil" / "s.txt").write_text("secret", encoding="utf-8")
    c, out = confirmer("a\n")
    prepared = prep(registry, "read_file", {"path": "../ws-evil/s.txt"})
    decision = c.confirm(prepared)
    assert decision.approved is False and decision.how == HOW_DENIED_USER  # 'a' is not offered
    text = out.getvalue()
    assert f"! outside the workspace: {tmp_path / 'ws-evil' / 's.txt'}" in text
    assert "path: ../ws-evil/s.txt" in text  # no preview: the arguments are listed
    assert "[a]lways" not in text and "not available" in text
    assert "secret" not in text


def test_visible_escapes_controls_and_invisible_characters() -> None:
    assert visible("a\x1b[31mb\rc\x07d\x9be") == "a\\x1b[31mb\\rc\\x07d\\x9be"
    assert visible("x\u200by\u202ez\ufeff") == "x\\u200by\\u202ez\\ufeff"
    assert visible("中文\tand\nlines [red]") == "中文\tand\nlines [red]"


def test_before_prompt_runs_before_anything_is_drawn(registry: ToolRegistry) -> None:
    seen: list[str] = []
    out = io.StringIO()
    c = TerminalConfirmer(
        io.StringIO("y\n"),
        out,
        color=False,
        editor="",
        before_prompt=lambda: seen.append(out.getvalue()),
    )
    c.confirm(prep(registry, "write_file", WRITE))
    assert seen == [""]


# ---- answers ----


@pytest.mark.parametrize("answer", ["y", "Y", "yes", " y "])
def test_yes(registry: ToolRegistry, answer: str) -> None:
    c, _ = confirmer(answer + "\n")
    assert c.confirm(prep(registry, "write_file", WRITE)) == Decision(True, HOW_USER_ONCE)


@pytest.mark.parametrize("answers", ["\n", "", "maybe\n", "yy\n", "ok\n"])
def test_anything_else_is_no_without_a_reason_prompt(registry: ToolRegistry, answers: str) -> None:
    c, out = confirmer(answers)
    decision = c.confirm(prep(registry, "write_file", WRITE))
    assert decision == Decision(False, HOW_DENIED_USER, reason="the user declined this call")
    assert "Reason" not in out.getvalue()


def test_n_with_an_inline_reason(registry: ToolRegistry) -> None:
    c, out = confirmer("n   use pathlib instead  \n")
    decision = c.confirm(prep(registry, "write_file", WRITE))
    assert decision.approved is False
    assert decision.reason == "the user declined this call; their reason: use pathlib instead"
    assert "Reason" not in out.getvalue()


def test_n_asks_for_an_optional_reason(registry: ToolRegistry) -> None:
    c, out = confirmer("no\nkeep the file as it is\n")
    decision = c.confirm(prep(registry, "write_file", WRITE))
    assert decision.reason == "the user declined this call; their reason: keep the file as it is"
    assert "Reason for the model (optional, Enter to skip): " in out.getvalue()
    c, _ = confirmer("n\n\n")
    assert c.confirm(prep(registry, "write_file", WRITE)).reason == "the user declined this call"


def test_ctrl_c_at_the_prompt_propagates(registry: ToolRegistry) -> None:
    c = TerminalConfirmer(Interrupting(), io.StringIO(), color=False, editor="")
    with pytest.raises(KeyboardInterrupt):
        c.confirm(prep(registry, "write_file", WRITE))


class Counting:
    def __init__(self, inner: TerminalConfirmer) -> None:
        self.inner = inner
        self.asked = 0

    def confirm(self, prepared: PreparedCall, reprepare: object = None) -> Decision:
        self.asked += 1
        return self.inner.confirm(prepared)


def test_always_allows_the_tool_for_the_session_only(registry: ToolRegistry) -> None:
    c, _ = confirmer("a\nn\n\n")
    counting = Counting(c)
    policy = ApprovalPolicy(confirmer=counting)
    first = policy.decide(prep(registry, "write_file", WRITE))
    assert first.approved and first.how == HOW_USER_ALWAYS and first.always
    second = policy.decide(prep(registry, "write_file", {"path": "b.txt", "content": "b"}))
    assert second == Decision(True, HOW_SESSION)
    assert counting.asked == 1
    third = policy.decide(prep(registry, "edit_file", {"path": "a.txt", "old_text": "one"}))
    assert third.approved is False and counting.asked == 2  # another tool is still asked


def test_always_is_not_accepted_for_exec(registry: ToolRegistry) -> None:
    c, _ = confirmer("a\n")
    policy = ApprovalPolicy(confirmer=c)
    decision = policy.decide(prep(registry, "exec", {"command": "true"}))
    assert decision.approved is False and policy.session_allowed == set()


# ---- editing the arguments ----


def test_edit_inline(registry: ToolRegistry) -> None:
    new = {"path": "a.txt", "content": "edited\n"}
    c, out = confirmer("e\n" + json.dumps(new) + "\n")
    decision = c.confirm(prep(registry, "write_file", WRITE))
    assert decision == Decision(True, HOW_USER_EDITED, args=new)
    assert 'Current arguments:\n  {"path": "a.txt", "content": "one\\nTWO\\n"}' in out.getvalue()


def test_edit_inline_invalid_or_unchanged_asks_again(registry: ToolRegistry) -> None:
    answers = [
        "e",
        '{"path": "a.txt", "content": ',  # invalid JSON
        "e",
        '["a.txt"]',  # not an object
        "e",
        '{"path": "a.txt", "content": "x", "mode": "sideways"}',  # schema
        "e",
        json.dumps(WRITE),  # unchanged
        "e",
        "",  # nothing typed
        "n",
        "",
    ]
    c, out = confirmer("\n".join(answers) + "\n")
    assert c.confirm(prep(registry, "write_file", WRITE)).approved is False
    text = out.getvalue()
    assert "edited arguments not used: not valid JSON" in text
    assert "must be a JSON object, not list" in text
    assert "'mode' must be one of overwrite, append" in text
    assert text.count("arguments unchanged") == 2
    assert text.count("Allow?") == 6


def test_edit_with_an_editor_runner(registry: ToolRegistry) -> None:
    calls: list[list[str]] = []

    def fake_editor(argv: list[str], path: str) -> int:
        calls.append(argv)
        args = json.loads(Path(path).read_text(encoding="utf-8"))
        assert args == {"command": "rm -rf build"}
        Path(path).write_text('{"command": "rm -rf build/tmp", "timeout": "30"}')
        return 0

    c, _ = confirmer("e\n", editor="myvim -f", run_editor=fake_editor)
    decision = c.confirm(prep(registry, "exec", {"command": "rm -rf build"}))
    assert decision == Decision(
        True, HOW_USER_EDITED, args={"command": "rm -rf build/tmp", "timeout": 30}
    )
    assert calls == [["myvim", "-f"]]


def test_editor_failure_asks_again(registry: ToolRegistry) -> None:
    c, out = confirmer("e\ny\n", editor="ed", run_editor=lambda argv, path: 1)
    assert c.confirm(prep(registry, "write_file", WRITE)) == Decision(True, HOW_USER_ONCE)
    assert "the editor exited with status 1" in out.getvalue()


def test_a_real_editor_process(registry: ToolRegistry, tmp_path: Path) -> None:
    script = tmp_path / "ed.py"
    script.write_text(
        "import sys, pathlib\n"
        "p = pathlib.Path(sys.argv[1])\n"
        "p.write_text(p.read_text().replace('TWO', 'Two'))\n",
        encoding="utf-8",
    )
    c, _ = confirmer("e\n", editor=f"{sys.executable} {script}")
    decision = c.confirm(prep(registry, "write_file", WRITE))
    assert decision.args == {"path": "a.txt", "content": "one\nTwo\n"}
    missing, out = confirmer("e\n\n", editor="/nonexistent/editor")
    assert missing.confirm(prep(registry, "write_file", WRITE)).approved is False
    assert "cannot start the editor" in out.getvalue()


def test_check_arguments(registry: ToolRegistry) -> None:
    prepared = prep(registry, "read_file", {"path": "a.txt"})
    assert check_arguments('{"path": "b", "start_line": "2"}', prepared) == (
        {"path": "b", "start_line": 2},
        None,
    )
    args, why = check_arguments('{"start_line": 2}', prepared)
    assert args is None and why is not None and "'path' is required" in why


# ---- run_ask wiring: interactive only with a terminal ----


def _config(tmp_path: Path, server: fs.FakeServer) -> Path:
    ws = tmp_path / "ws"
    ws.mkdir(exist_ok=True)
    cfg = provider_config(server.base_url)
    cfg["tools"] = {"enabled": True, "workspace": str(ws)}
    path = tmp_path / "config.yaml"
    path.write_text(yaml.safe_dump(cfg), encoding="utf-8")
    return path


@pytest.fixture
def isolated(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("HOME", str(tmp_path / "home"))
    monkeypatch.setenv("XDG_CONFIG_HOME", str(tmp_path / "home" / ".config"))
    monkeypatch.delenv("EDITOR", raising=False)
    monkeypatch.delenv("VISUAL", raising=False)
    monkeypatch.setenv("COUNTBOT_NO_LOCAL_MODEL", "1")


@pytest.mark.usefixtures("isolated")
def test_run_ask_prompts_on_a_terminal(tmp_path: Path) -> None:
    with fs.FakeServer() as server:
        config = _config(tmp_path, server)
        server.add(
            fs.tool_calls([("write_file", {"path": "n.txt", "content": "hi"})]), fs.text("done")
        )
        err = FakeTTY()
        opts = AskOptions(prompt=["write"], config=str(config), no_save=True)
        code = run_ask(opts, stdin=FakeTTY("y\n"), out=io.StringIO(), err=err)
        assert code == 0
        assert (tmp_path / "ws" / "n.txt").read_text() == "hi"
        text = err.getvalue()
        # the "waiting" status line was cleared before the prompt was drawn
        assert text.index("\r\x1b[2K") < text.index("countbot wants to run write_file")


@pytest.mark.usefixtures("isolated")
def test_run_ask_without_a_terminal_denies_with_a_notice(tmp_path: Path) -> None:
    with fs.FakeServer() as server:
        config = _config(tmp_path, server)
        server.add(
            fs.tool_calls([("write_file", {"path": "n.txt", "content": "hi"})]), fs.text("done")
        )
        err = io.StringIO()
        opts = AskOptions(prompt=["write"], config=str(config), no_save=True)
        # a terminal on stdin is not enough: the prompt would be drawn where nobody sees it
        code = run_ask(opts, stdin=FakeTTY("y\n"), out=io.StringIO(), err=err)
        assert code == 0
        assert not (tmp_path / "ws" / "n.txt").exists()
        notices = [ln for ln in err.getvalue().splitlines() if "write_file: not run" in ln]
        assert len(notices) == 1 and "Allow?" not in err.getvalue()
        tool = server.chat_bodies()[1]["messages"][-1]
        assert tool["role"] == "tool" and tool["content"].startswith("Denied: ")
