"""Tool approvals in the REPL, end to end: the real approval prompt (`TerminalConfirmer` on a
scripted input) inside the in-process REPL harness, against the loopback FakeServer.

Session grants (`[a]lways`) are listed by /tools, shown in the toolbar and revoked by /tools ask,
/new and /resume; Ctrl-C at the prompt or during a running command says the turn stopped in a
tool call; an edited call is shown again (its new diff) and asked about before it runs.
"""

from __future__ import annotations

import io
import json
from pathlib import Path
from typing import Any

import fakeserver as fs
import pytest
from repl_harness import Harness, approval_answers, interrupt_when, write_call

from countbot_cli.tools.approval import ApprovalPolicy
from countbot_cli.tools.diffs import unified_diff
from countbot_cli.ui.confirm import TerminalConfirmer


def tool_results(h: Harness) -> list[tuple[str, str]]:
    """(outcome, approval) of every tool call recorded in the session file."""
    return [(r["outcome"], r["approval"]) for r in h.session_data()["tool_conversations"]]


def test_always_grants_are_listed_shown_in_the_toolbar_and_revoked_by_tools_ask(
    harness: Any, server: fs.FakeServer
) -> None:
    h = harness(tools=True)
    confirmer, asked = approval_answers("a\nn\n\n")
    server.add(write_call("a.txt", "one"), fs.text("Wrote a."))
    server.add(write_call("b.txt", "two"), fs.text("Wrote b."))
    server.add(write_call("c.txt", "three"), fs.text("Not written."))
    toolbars: list[str] = []

    def toolbar(h: Harness) -> None:
        toolbars.append(h.toolbar())

    repl = h.run(
        [
            "write a\r",  # asked: a (always)
            "write b\r",  # not asked: allowed for the session
            "/tools\r",
            toolbar,
            "/tools ask\r",
            lambda h: h.wait_for("Session approvals revoked"),
            toolbar,
            "write c\r",  # asked again: n
        ],
        confirmer=confirmer,
    )
    out = h.text()
    assert "Allowed for this session without asking: write_file (/tools ask revokes)" in out
    assert "Session approvals revoked: write_file" in out
    assert toolbars[0].rstrip().endswith("tools ask +write_file")
    assert toolbars[1].rstrip().endswith("tools ask")
    assert asked.getvalue().count("Allow? [y]es") == 2
    assert (h.cb.work / "b.txt").read_text(encoding="utf-8") == "two"
    assert not (h.cb.work / "c.txt").exists()
    assert [a for _, a in tool_results(h)] == ["user-always", "session", "denied-by-user"]
    assert repl.conversation.policy.session_allowed == set()


@pytest.mark.parametrize("command", ["/new", "/resume latest"])
def test_new_and_resume_revoke_the_grants(
    harness: Any, server: fs.FakeServer, command: str
) -> None:
    h = harness(tools=True)
    confirmer, asked = approval_answers("a\nn\n\n")
    server.add(write_call("a.txt", "one"), fs.text("Wrote a."))
    server.add(write_call("b.txt", "two"), fs.text("Not written."))
    repl = h.run(["write a\r", command + "\r", "write b\r"], confirmer=confirmer)
    assert "Session approvals revoked: write_file" in h.text()
    assert asked.getvalue().count("Allow? [y]es") == 2  # asked again after the switch
    assert not (h.cb.work / "b.txt").exists()
    assert repl.conversation.policy.session_allowed == set()


def test_tools_off_overrides_a_session_grant(tmp_path: Path) -> None:
    from countbot_cli.messages import ToolCall
    from countbot_cli.tools.registry import ToolContext, ToolRegistry, default_tools

    ctx = ToolContext(workspace=tmp_path)
    reg = ToolRegistry(default_tools(ctx), ctx)
    call = ToolCall(id="c1", name="write_file", arguments=json.dumps({"path": "x", "content": "y"}))
    prepared = reg.prepare(call)
    policy = ApprovalPolicy(mode="ask", confirmer=None, session_allowed={"write_file"})
    assert policy.decide(prepared).approved  # the grant
    policy.mode = "off"
    denied = policy.decide(prepared)
    assert not denied.approved and "/tools off" in (denied.reason or "")
    assert policy.revoke_session() == ["write_file"] and policy.session_allowed == set()


class Interrupting:
    """Ctrl-C at the approval prompt: readline raises KeyboardInterrupt."""

    def readline(self) -> str:
        raise KeyboardInterrupt


def test_ctrl_c_at_the_approval_prompt_ends_the_line_and_names_the_tool_call(
    harness: Any, server: fs.FakeServer
) -> None:
    h = harness(tools=True)
    asked = io.StringIO()
    confirmer = TerminalConfirmer(Interrupting(), asked, color=False, editor="")  # type: ignore[arg-type]
    server.add(write_call("note.txt", "hi"), fs.text("next answer"))
    h.run(["write a note\r", "and then?\r"], confirmer=confirmer)
    assert asked.getvalue().endswith("(default: no) \n")  # "interrupted" starts a new line
    err = h.err.getvalue()
    assert "interrupted during a tool call; /retry asks again" in err
    assert "nothing arrived" not in err
    assert tool_results(h)[0][0] == "interrupted"
    assert "next answer" in h.text()


def test_ctrl_c_while_a_command_runs_names_the_tool_call(
    tmp_path: Path, server: fs.FakeServer
) -> None:
    h = Harness(tmp_path, server, tools=True)
    (tmp_path / "work").mkdir(exist_ok=True)
    confirmer, _ = approval_answers("y\n")
    server.add(fs.tool_calls([("exec", {"command": "sleep 20"})]))
    h.run(["wait a while\r", interrupt_when("⚙ exec")], confirmer=confirmer)
    err = h.err.getvalue()
    assert "interrupted during a tool call; /retry asks again" in err
    assert "nothing arrived" not in err
    assert tool_results(h)[0][0] == "interrupted"


def test_an_edited_call_shows_its_new_diff_and_asks_again(
    harness: Any, server: fs.FakeServer
) -> None:
    h = harness(tools=True)
    edited = json.dumps({"path": "note.txt", "content": "edited text\n"})
    confirmer, asked = approval_answers(f"e\n{edited}\ny\ne\n{edited}\nn\n\n")
    server.add(write_call("note.txt", "model text\n"), fs.text("Done."))
    server.add(write_call("other.txt", "model text\n"), fs.text("Fine."))
    h.run(["write a note\r", "write another\r"], confirmer=confirmer)
    shown = asked.getvalue()
    first, second = shown.split("Run the edited call? [y]es / [n]o / [e]dit again", 1)
    before, after = first.split(
        "countbot would run write_file (writes a file) with your edited arguments:", 1
    )
    assert "+model text" in before and "+edited text" not in before
    assert "+edited text" in after and "+model text" not in after  # the new diff
    assert (h.cb.work / "note.txt").read_text(encoding="utf-8") == "edited text\n"
    # the second edit was declined after its preview: nothing is written
    assert "Run the edited call?" in second and not (h.cb.work / "other.txt").exists()
    assert [a for _, a in tool_results(h)] == ["user-edited", "denied-by-user"]


def test_an_edit_that_reaches_outside_the_workspace_is_asked_about_once(
    tmp_path: Path, server: fs.FakeServer
) -> None:
    h = Harness(tmp_path, server, tools=True)
    outside = tmp_path / "outside.txt"
    edited = json.dumps({"path": str(outside), "content": "out\n"})
    confirmer, asked = approval_answers(f"e\n{edited}\ny\n")
    server.add(write_call("note.txt", "in\n"), fs.text("Done."))
    h.run(["write a note\r"], confirmer=confirmer)
    shown = asked.getvalue()
    assert f"! outside the workspace: {outside}" in shown
    assert f"+++ {outside}\n" in shown and "b//" not in shown  # no double slash
    assert shown.count("Allow?") == 1 and shown.count("Run the edited call?") == 1
    assert outside.read_text(encoding="utf-8") == "out\n"


def test_diff_headers_of_absolute_paths_have_no_double_slash() -> None:
    assert unified_diff("a\n", "b\n", "/tmp/x.txt").startswith("--- /tmp/x.txt\n+++ /tmp/x.txt\n")
    assert unified_diff("", "b\n", "/tmp/x.txt", new_file=True).startswith(
        "--- /dev/null\n+++ /tmp/x.txt\n"
    )
    assert unified_diff("a\n", "b\n", "sub/x.txt").startswith("--- a/sub/x.txt\n+++ b/sub/x.txt\n")
