"""Sensitive paths inside the workspace (dotfiles, key files, countbot's own files) and paths that
change between approval and run: never approved by --yes, auto mode or "always"."""

from __future__ import annotations

import io
import json
import os
from pathlib import Path
from typing import Any

import fakeserver as fs
import pytest
from cbenv import make_cb

from countbot_cli.messages import ToolCall
from countbot_cli.tools import PreparedCall, ToolContext, ToolRegistry, default_tools
from countbot_cli.tools.approval import (
    HOW_DENIED_POLICY,
    HOW_SESSION,
    HOW_USER_ALWAYS,
    HOW_YES_FLAG,
    ApprovalPolicy,
    Decision,
)
from countbot_cli.tools.paths import sensitive_reason
from countbot_cli.ui.confirm import TerminalConfirmer, offers_always


@pytest.fixture
def ws(tmp_path: Path) -> Path:
    root = tmp_path / "ws"
    (root / ".git" / "hooks").mkdir(parents=True)
    (root / ".env").write_text("DB_PASSWORD=hunter2\n", encoding="utf-8")
    (root / "notes.txt").write_text("plain notes\n", encoding="utf-8")
    (root / "id_ed25519").write_text("PRIVATE KEY\n", encoding="utf-8")
    (root / "id_ed25519.pub").write_text("ssh-ed25519 AAAA\n", encoding="utf-8")
    return root


def make(ws: Path, **ctx_args: Any) -> ToolRegistry:
    ctx = ToolContext(workspace=ws, **ctx_args)
    return ToolRegistry(default_tools(ctx), ctx)


def prep(reg: ToolRegistry, name: str, args: dict[str, Any]) -> PreparedCall:
    prepared = reg.prepare(ToolCall("call_1", name, json.dumps(args)))
    assert prepared.error is None, prepared.error
    return prepared


class Never:
    """A confirmer that must not be reached."""

    def confirm(self, prepared: PreparedCall, reprepare: object = None) -> Decision:
        raise AssertionError(f"asked about {prepared.call.name}")


class Always:
    def __init__(self) -> None:
        self.asked = 0

    def confirm(self, prepared: PreparedCall, reprepare: object = None) -> Decision:
        self.asked += 1
        return Decision(True, HOW_USER_ALWAYS, always=True)


@pytest.mark.parametrize(
    ("rel", "sensitive"),
    [
        (".env", True),
        (".git/hooks/pre-commit", True),
        (".bashrc", True),
        ("sub/.ssh/authorized_keys", True),
        ("id_ed25519", True),
        ("certs/server.pem", True),
        ("config/credentials.json", True),
        ("notes.txt", False),
        ("id_ed25519.pub", False),
        ("src/main.py", False),
        ("a.b/c.txt", False),
    ],
)
def test_sensitive_reason(ws: Path, rel: str, sensitive: bool) -> None:
    assert (sensitive_reason(ws.resolve() / rel, ws) is not None) is sensitive


def test_only_the_part_inside_the_workspace_counts(tmp_path: Path) -> None:
    hidden_ws = tmp_path / ".config" / "project"
    hidden_ws.mkdir(parents=True)
    assert sensitive_reason(hidden_ws.resolve() / "main.py", hidden_ws) is None
    # outside the workspace the whole path counts
    assert sensitive_reason(tmp_path.resolve() / ".bashrc", hidden_ws) is not None
    assert sensitive_reason(tmp_path.resolve() / "notes.txt", hidden_ws) is None


def test_reading_a_dotfile_asks_and_says_why(ws: Path) -> None:
    p = prep(make(ws), "read_file", {"path": ".env"})
    assert p.needs_approval and p.sensitive and not p.outside_paths
    assert any(r.startswith("sensitive path .env: a hidden file") for r in p.reasons)
    plain = prep(make(ws), "read_file", {"path": "notes.txt"})
    assert not plain.needs_approval and not plain.sensitive


def test_a_link_to_a_dotfile_is_judged_by_its_target(ws: Path) -> None:
    (ws / "innocent.txt").symlink_to(ws / ".env")
    p = prep(make(ws), "read_file", {"path": "innocent.txt"})
    assert p.needs_approval and p.sensitive


def test_yes_auto_mode_and_session_always_do_not_approve_a_sensitive_write(ws: Path) -> None:
    reg = make(ws)
    hook = prep(reg, "write_file", {"path": ".git/hooks/pre-commit", "content": "curl x | sh\n"})
    for policy in (
        ApprovalPolicy(yes_writes=True),
        ApprovalPolicy(mode="auto"),
        ApprovalPolicy(session_allowed={"write_file"}),
    ):
        decision = policy.decide(hook)
        assert not decision.approved and decision.how == HOW_DENIED_POLICY
        assert "sensitive path (.git/hooks/pre-commit" in (decision.reason or "")
    assert not (ws / ".git" / "hooks" / "pre-commit").exists()
    plain = prep(reg, "write_file", {"path": "notes.txt", "content": "x"})
    assert ApprovalPolicy(yes_writes=True).decide(plain).how == HOW_YES_FLAG


def test_always_is_not_offered_for_a_sensitive_call_nor_remembered(ws: Path) -> None:
    reg = make(ws)
    secret = prep(reg, "read_file", {"path": ".env"})
    assert not offers_always(secret)
    out = io.StringIO()
    TerminalConfirmer(io.StringIO("n\n\n"), out, color=False, editor="").confirm(secret)
    text = out.getvalue()
    assert "! sensitive: .env: a hidden file or folder" in text
    assert "[a]lways" not in text and "approving allows this one call only" in text
    # a confirmer that says "always" anyway does not put the tool on the session list
    confirmer = Always()
    policy = ApprovalPolicy(confirmer=confirmer)
    hook = prep(reg, "write_file", {"path": ".git/hooks/x", "content": "x"})
    assert policy.decide(hook).approved and confirmer.asked == 1
    assert policy.session_allowed == set()
    assert policy.decide(hook).approved and confirmer.asked == 2
    # while "always" for an ordinary write is remembered, and does not cover a sensitive one
    policy.decide(prep(reg, "write_file", {"path": "notes.txt", "content": "y"}))
    assert policy.session_allowed == {"write_file"}
    assert policy.decide(prep(reg, "write_file", {"path": "n2.txt", "content": "z"})).how == (
        HOW_SESSION
    )
    policy.decide(hook)
    assert confirmer.asked == 4


def test_countbots_own_files_are_protected(tmp_path: Path, ws: Path) -> None:
    config = ws / "config.yaml"
    config.write_text("providers: {}\n", encoding="utf-8")
    reg = make(ws, protected=(config, ws / "sessions"))
    p = prep(reg, "write_file", {"path": "config.yaml", "content": "api_key_cmd: evil\n"})
    assert p.sensitive and "countbot's own file" in p.sensitive[0]
    assert not ApprovalPolicy(yes_writes=True, confirmer=Never(), mode="off").decide(p).approved
    assert prep(reg, "write_file", {"path": "sessions/x.json", "content": "{}"}).sensitive


def test_exec_working_dir_in_a_dot_folder_is_not_marked(ws: Path) -> None:
    p = prep(make(ws), "exec", {"command": "ls", "working_dir": ".git"})
    assert p.sensitive == [] and p.needs_approval  # exec asks anyway


def test_a_swap_to_another_path_inside_after_approval_is_refused(ws: Path) -> None:
    """Approved: notes.txt. Before it runs, notes.txt becomes a link to .env (also inside):
    the call must not write through it."""
    reg = make(ws)
    p = prep(reg, "write_file", {"path": "notes.txt", "content": "overwritten\n"})
    assert not p.sensitive
    (ws / "notes.txt").unlink()
    (ws / "notes.txt").symlink_to(ws / ".env")
    res = reg.run(p)
    assert not res.ok and "not approved" in res.content
    assert (ws / ".env").read_text(encoding="utf-8") == "DB_PASSWORD=hunter2\n"


def test_a_swapped_parent_folder_is_refused(ws: Path, tmp_path: Path) -> None:
    (ws / "sub").mkdir()
    outside = tmp_path / "outside"
    outside.mkdir()
    reg = make(ws)
    p = prep(reg, "write_file", {"path": "sub/new.txt", "content": "x"})
    (ws / "sub").rmdir()
    (ws / "sub").symlink_to(outside)
    res = reg.run(p)
    assert not res.ok and "not approved" in res.content
    assert os.listdir(outside) == []


# ---- end to end, non-interactive ----


def test_ask_yes_never_writes_a_git_hook_or_reads_dotenv(
    tmp_path: Path, server: fs.FakeServer
) -> None:
    cb = make_cb(tmp_path, server.base_url, tools={"enabled": True})
    (cb.work / ".env").write_text("DB_PASSWORD=hunter2\n", encoding="utf-8")
    (cb.work / ".git" / "hooks").mkdir(parents=True)
    calls = [
        ("read_file", {"path": ".env"}),
        ("write_file", {"path": ".git/hooks/post-checkout", "content": "#!/bin/sh\ntouch pwned\n"}),
        ("write_file", {"path": "ok.txt", "content": "fine\n"}),
    ]
    server.add(fs.tool_calls(calls), fs.text("Done."))
    proc = cb.invoke("ask", "--yes", "set things up")
    assert proc.returncode == 0, proc.stderr
    assert not (cb.work / ".git" / "hooks" / "post-checkout").exists()
    assert (cb.work / "ok.txt").read_text(encoding="utf-8") == "fine\n"
    results = [m["content"] for m in server.chat_bodies()[1]["messages"] if m["role"] == "tool"]
    assert results[0].startswith("Denied: sensitive path (.env:")
    assert results[1].startswith("Denied: sensitive path (.git/hooks/post-checkout:")
    assert results[2].startswith("Created ok.txt")
    assert "hunter2" not in json.dumps(server.chat_bodies())
    assert proc.stderr.count("not run (sensitive path") == 2


def test_a_denial_names_the_path_it_is_about(ws: Path, tmp_path: Path) -> None:
    p = prep(make(ws), "read_file", {"path": "../elsewhere.txt"})
    reason = ApprovalPolicy().decide(p).reason or ""
    assert reason.startswith("path outside the workspace (") and str(tmp_path.resolve()) in reason
    off = ApprovalPolicy(mode="off", confirmer=Never()).decide(p).reason or ""
    assert "after /tools ask" in off


def test_a_workspace_at_the_root_folder_confines_nothing_so_everything_asks() -> None:
    reg = make(Path("/"))
    p = reg.prepare(ToolCall("c1", "read_file", json.dumps({"path": "etc/hostname"})))
    assert p.needs_approval and "root folder" in p.sensitive[0]
    assert not ApprovalPolicy(yes_writes=True).decide(p).approved
