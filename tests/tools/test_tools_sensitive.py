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

from countbot_cli.config.own_files import OwnFiles
from countbot_cli.messages import ToolCall
from countbot_cli.tools.approval import (
    HOW_DENIED_POLICY,
    HOW_SESSION,
    HOW_USER_ALWAYS,
    HOW_YES_FLAG,
    ApprovalPolicy,
    Decision,
)
from countbot_cli.tools.paths import sensitive_reason
from countbot_cli.tools.registry import PreparedCall, ToolContext, ToolRegistry, default_tools
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
    reg = make(ws, protected=OwnFiles(paths=(config, ws / "sessions")))
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


# ---- countbot's own files (config/own_files.py), with the data folder in the workspace ----

# written by the model; relative paths are in the workspace, where a trusted project's
# config.yaml puts the data folder; "@" paths are in the user's countbot folder
OWN_FILES = [
    "config.yaml",
    "sessions/20260101-000000-abcd.json",
    "sessions/search-index.sqlite3",
    "MEMORY.md",
    "MEMORY.marks.json",
    "MEMORY.sources.jsonl",
    "MEMORY.vectors.npy",  # a cache kept beside the memory later
    "costs.json",
    "costs.json.lock",
    "context_windows.json",
    "servers.json",
    "cache_savings.json",
    "MEMORY.archive.jsonl",
    ".countbot_tokens.json",
    ".countbot_history",
    "@trusted.json",
    "@allow.yaml",
    "@config.yaml",  # the user's own config, also while a project's config.yaml is the one used
]


def own_files_cb(tmp_path: Path, server: fs.FakeServer) -> Any:
    """A trusted project config in the workspace (so the data folder is the workspace), and the
    user's countbot folder on a path without a hidden folder (only the own-file rule can catch
    trusted.json and allow.yaml there), outside paths allowed without asking."""
    from cbenv import CB, clean_env, provider_config

    work = tmp_path / "work"
    work.mkdir()
    env = {**clean_env(tmp_path), "XDG_CONFIG_HOME": str(tmp_path / "home" / "config")}
    cb = CB(root=tmp_path, work=work, env=env)
    tools = {"enabled": True, "allow_outside_workspace": True}
    cb.write_config({**provider_config(server.base_url), "tools": tools})
    return cb


def own_path(cb: Any, rel: str) -> str:
    return str(cb.user_home / rel[1:]) if rel.startswith("@") else rel


def test_countbots_own_files_are_asked_about_also_with_yes(
    tmp_path: Path, server: fs.FakeServer
) -> None:
    from countbot_cli.app import _tool_registry
    from countbot_cli.config.settings import load_settings
    from countbot_cli.memory.store import MemoryStore

    cb = own_files_cb(tmp_path, server)
    settings = load_settings(env=cb.env, cwd=cb.work)
    assert settings.data_dir == cb.work.resolve() or settings.data_dir == cb.work
    reg = _tool_registry(settings, MemoryStore(settings.memory.file))
    for rel in OWN_FILES:
        p = prep(reg, "write_file", {"path": own_path(cb, rel), "content": "{}"})
        assert any("countbot's own file" in s for s in p.sensitive), (rel, p.sensitive)
        confirmer = Always()
        decision = ApprovalPolicy(yes_writes=True, confirmer=confirmer).decide(p)
        assert confirmer.asked == 1 and decision.approved, rel  # asked, never waved through
        assert not ApprovalPolicy(yes_writes=True, mode="auto").decide(p).approved, rel
    for rel in ("notes.txt", "MEMORY-notes.md", "costs.txt", "sessions.md"):
        assert not prep(reg, "write_file", {"path": rel, "content": "x"}).sensitive, rel


def test_ask_yes_never_writes_countbots_own_files(tmp_path: Path, server: fs.FakeServer) -> None:
    cb = own_files_cb(tmp_path, server)
    (cb.work / "costs.json").write_text('{"2026-01-01": 1.5}', encoding="utf-8")
    before = {p: p.read_bytes() for p in cb.root.rglob("*") if p.is_file()}
    calls: list[tuple[str, dict[str, Any]]] = [
        ("write_file", {"path": own_path(cb, rel), "content": '{"pinned": ["obey me"]}'})
        for rel in OWN_FILES
    ]
    calls.append(("edit_file", {"path": "costs.json", "old_text": "1.5", "new_text": "0"}))
    calls.append(("write_file", {"path": "notes.txt", "content": "fine\n"}))
    server.add(fs.tool_calls(calls), fs.text("Done."))
    proc = cb.invoke("ask", "--yes", "tidy up")
    assert proc.returncode == 0, proc.stderr
    results = [m["content"] for m in server.chat_bodies()[1]["messages"] if m["role"] == "tool"]
    assert len(results) == len(OWN_FILES) + 2
    for rel, result in zip([*OWN_FILES, "costs.json"], results, strict=False):
        assert result.startswith("Denied: sensitive path ("), (rel, result)
        assert "countbot's own file" in result, (rel, result)
    assert results[-1].startswith("Created notes.txt")
    assert proc.stderr.count("not run (sensitive path") == len(OWN_FILES) + 1
    after = {p: p.read_bytes() for p in before}
    assert after == before  # nothing countbot keeps was touched (the session is new)
    assert not (cb.work / "MEMORY.marks.json").exists()
    assert not (cb.work / "MEMORY.vectors.npy").exists()
