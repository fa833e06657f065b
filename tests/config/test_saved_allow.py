"""Saved approvals (config/saved_allow.py) without a terminal: a command saved in the user's
allow.yaml runs in a non-interactive `ask` (as a config allow rule would), matched by its exact
text only; an allow.yaml in the project folder means nothing; a damaged file is a usage error
naming it; and `A` is not offered for a command shown with escapes."""

from __future__ import annotations

import io
import json
from pathlib import Path

import fakeserver as fs
from cbenv import make_cb

from countbot_cli.config import saved_allow
from countbot_cli.messages import ToolCall
from countbot_cli.tools.registry import PreparedCall, ToolContext, ToolRegistry, default_tools
from countbot_cli.ui.confirm import TerminalConfirmer, offers_saving


def _results(server: fs.FakeServer, n: int) -> str:
    return str(server.chat_bodies()[n]["messages"][-1]["content"])


def test_a_saved_command_runs_unasked_by_its_exact_text_only(
    tmp_path: Path, server: fs.FakeServer
) -> None:
    cb = make_cb(tmp_path, server.base_url, tools={"enabled": True})
    saved_allow.add_command(cb.user_home / "allow.yaml", "echo a*b")
    (cb.work / "allow.yaml").write_text('commands:\n  - "echo project"\n', encoding="utf-8")
    server.add(fs.tool_calls([("exec", {"command": "  echo a*b "})]), fs.text("one"))
    server.add(fs.tool_calls([("exec", {"command": "echo aXb"})]), fs.text("two"))
    server.add(fs.tool_calls([("exec", {"command": "echo project"})]), fs.text("three"))
    for i in range(3):
        run = cb.invoke("ask", f"go {i}")
        assert run.returncode == 0, run.stderr
    assert _results(server, 1) == "a*b"  # saved: ran without asking, no terminal
    assert "Denied" in _results(server, 3)  # `*` in a saved command is not a wildcard
    assert "Denied" in _results(server, 5)  # a project's allow.yaml is not read


def test_a_damaged_allow_file_is_a_usage_error_naming_it(
    tmp_path: Path, server: fs.FakeServer
) -> None:
    cb = make_cb(tmp_path, server.base_url)
    cb.user_home.mkdir(parents=True, exist_ok=True)
    (cb.user_home / "allow.yaml").write_text("commands: [unclosed\n", encoding="utf-8")
    run = cb.invoke("ask", "hi")
    assert run.returncode == 2
    assert "allow.yaml" in run.stderr
    listed = cb.invoke("config", "allow", "list")
    assert listed.returncode == 2 and "allow.yaml" in listed.stderr


def test_A_is_offered_only_for_a_command_shown_as_it_is(tmp_path: Path) -> None:
    ctx = ToolContext(workspace=tmp_path)
    registry = ToolRegistry(default_tools(ctx), ctx)

    def prep(command: str, **extra: str) -> PreparedCall:
        args = {"command": command, **extra}
        return registry.prepare(ToolCall(id="c1", name="exec", arguments=json.dumps(args)))

    assert offers_saving(prep("git status"))
    assert not offers_saving(prep("echo \x1b[2Jhidden"))
    assert not offers_saving(prep("echo one\necho two"))
    assert not offers_saving(prep("ls", working_dir="/"))
    # answering A where it is not offered saves nothing and does not run the call
    out = io.StringIO()
    allow = tmp_path / "home" / "allow.yaml"
    confirmer = TerminalConfirmer(io.StringIO("A\n"), out, color=False, allow_path=allow)
    decision = confirmer.confirm(prep("echo \x1b[2Jhidden"))
    assert not decision.approved and not allow.exists()


def test_the_allow_file_is_one_of_countbots_own_files_for_the_tools(tmp_path: Path) -> None:
    # even where the config folder is inside the workspace and not hidden, a tool call that
    # writes allow.yaml (to plant a lasting approval) always asks, also with --yes
    from countbot_cli import app
    from countbot_cli.config.settings import load_settings
    from countbot_cli.memory.store import MemoryStore

    work = tmp_path / "work"
    env = {"HOME": str(tmp_path), "XDG_CONFIG_HOME": str(work / "conf")}
    (work / "conf" / "countbot").mkdir(parents=True)
    s = load_settings(env=env, cwd=work, require_provider=False, find_local_model=lambda: None)
    assert s.tools.saved_file == work / "conf" / "countbot" / "allow.yaml"
    registry = app._tool_registry(s, MemoryStore(s.memory.file))
    args = json.dumps({"path": "conf/countbot/allow.yaml", "content": "commands: ['rm -rf /']"})
    prepared = registry.prepare(ToolCall("call_1", "write_file", args))
    assert prepared.error is None and prepared.sensitive, prepared
    assert "countbot's own file" in prepared.sensitive[0]
