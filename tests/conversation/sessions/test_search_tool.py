"""The `search_sessions` tool against the loopback server: cited excerpts reach the model,
the current session is left out, the answer is bounded, no approval is asked inside the
project; another project's conversations are denied without a terminal, asked about with one,
and searched unasked only when the config says so."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import fakeserver as fs
from cbenv import CB, make_cb

from countbot_cli.conversation.sessions.search_tool import (
    CROSSING,
    OUTPUT_CHARS,
    search_sessions_tool,
)
from countbot_cli.conversation.sessions.session import new_session
from countbot_cli.conversation.sessions.store import SessionStore
from countbot_cli.messages import Message
from countbot_cli.tools.approval import HOW_USER_ONCE, ApprovalPolicy, Decision
from countbot_cli.tools.base import PreparedCall, ToolCall
from countbot_cli.tools.registry import ToolContext, ToolRegistry


def past(cb: CB, sid: str, title: str, *texts: str, workspace: str | None = None) -> None:
    """A saved session started in `workspace` (default: the folder countbot runs in)."""
    where = str(cb.work) if workspace is None else workspace
    s = new_session(provider="test", model="test-model", title=title, workspace=where)
    s.id = sid
    s.messages = [
        Message(role=("user", "assistant")[i % 2], content=t) for i, t in enumerate(texts)
    ]
    SessionStore(cb.sessions_dir).create(s)


def tool_message(body: dict[str, Any]) -> str:
    (msg,) = [m for m in body["messages"] if m["role"] == "tool"]
    content: str = msg["content"]
    return content


def test_excerpts_reach_the_model_and_the_current_session_is_left_out(
    tmp_path: Path, server: fs.FakeServer
) -> None:
    cb = make_cb(tmp_path, server.base_url, tools={"enabled": True})
    past(cb, "oldcat000001", "Pets", "My cat is called Miso, she is grey", "Noted: Miso.")
    past(cb, "noise0000002", "Other", "nothing to see")
    big = "the axolotl " + "lorem ipsum " * 2000
    past(cb, "bigone000003", "Huge", big, "an axolotl reply")
    past(cb, "current00004", "This one", "what was my cat called? Miso rings a bell")
    server.add(
        fs.tool_calls([("search_sessions", {"query": "cat Miso"})]),
        fs.text("Your cat is Miso (session oldcat000001)."),
        fs.tool_calls([("search_sessions", {"query": "axolotl", "max_sessions": 8})]),
        fs.text("ok"),
    )
    proc = cb.invoke("ask", "-s", "current00004", "what is my cat called?")
    assert proc.returncode == 0, proc.stderr
    assert "Miso" in proc.stdout
    bodies = server.chat_bodies()
    assert "search_sessions" in {t["function"]["name"] for t in bodies[0]["tools"]}
    result = tool_message(bodies[1])
    assert "session oldcat000001" in result and '"Pets"' in result
    assert "My cat is called Miso, she is grey" in result  # verbatim
    assert "current00004" not in result and "rings a bell" not in result
    assert "noise0000002" not in result

    proc = cb.invoke("ask", "-s", "current00004", "and the axolotl?")
    assert proc.returncode == 0, proc.stderr
    result = tool_message(server.chat_bodies()[3])
    assert "session bigone000003" in result and "…[cut]" in result
    assert len(result) <= OUTPUT_CHARS
    assert "approve" not in proc.stderr.lower()


def test_nothing_found_and_a_new_session_sees_every_past_one(
    tmp_path: Path, server: fs.FakeServer
) -> None:
    cb = make_cb(tmp_path, server.base_url, tools={"enabled": True})
    past(cb, "pastpast0001", "Trip", "We booked the 京都 hotel for March")
    server.add(
        fs.tool_calls([("search_sessions", {"query": "zeppelin"})]),
        fs.tool_calls([("search_sessions", {"query": "京都 hotel"})]),
        fs.text("March."),
    )
    proc = cb.invoke("ask", "when is the trip?")
    assert proc.returncode == 0, proc.stderr
    bodies = server.chat_bodies()
    assert (
        "No past conversation in this project (all_projects searches the others) matches "
        "'zeppelin'" in tool_message(bodies[1])
    )
    tools = [m for m in bodies[2]["messages"] if m["role"] == "tool"]
    assert "session pastpast0001" in tools[1]["content"]
    assert "京都 hotel for March" in tools[1]["content"]


def test_other_projects_stay_out_without_a_terminal_unless_configured(
    tmp_path: Path, server: fs.FakeServer
) -> None:
    cb = make_cb(tmp_path, server.base_url, tools={"enabled": True})
    past(cb, "mine00000001", "Pets", "My cat is called Miso")
    past(
        cb,
        "other0000002",
        "Bank",
        "my cat's vet bill; the card PIN is 4711",
        workspace="/elsewhere",
    )
    past(cb, "legacy000003", "Old", "the cat from before workspaces were recorded", workspace="")
    server.add(
        fs.tool_calls([("search_sessions", {"query": "cat"})]),
        fs.tool_calls([("search_sessions", {"query": "PIN", "all_projects": True})]),
        fs.text("done"),
    )
    proc = cb.invoke("ask", "what is my cat called?")  # a prompt injection asking for PINs
    assert proc.returncode == 0, proc.stderr
    bodies = server.chat_bodies()
    mine, crossing = [m["content"] for m in bodies[2]["messages"] if m["role"] == "tool"]
    assert "session mine00000001" in mine
    assert "other0000002" not in mine and "legacy000003" not in mine
    assert "only the user can approve" in crossing and CROSSING in crossing
    assert all("4711" not in json.dumps(b) for b in bodies)
    store = SessionStore(cb.sessions_dir)  # the conversation just saved records its workspace
    assert store.load(store.resolve("latest")).workspace == str(cb.work)

    make_cb(tmp_path, server.base_url, tools={"enabled": True, "search_all_sessions": True})
    server.add(
        fs.tool_calls([("search_sessions", {"query": "PIN"})]),
        fs.text("done"),
    )
    proc = cb.invoke("ask", "which PIN was it?")
    assert proc.returncode == 0, proc.stderr
    assert "4711" in tool_message(server.chat_bodies()[-1])


class Asked:
    """A confirmer that records the question and answers once."""

    def __init__(self, approve: bool) -> None:
        self.approve = approve
        self.asked: list[list[str]] = []

    def confirm(self, prepared: PreparedCall, reprepare: object = None) -> Decision:
        self.asked.append(prepared.reasons)
        return Decision(self.approve, HOW_USER_ONCE)


def test_crossing_into_other_projects_asks_first_and_only_then(tmp_path: Path) -> None:
    from countbot_cli.conversation.sessions.store import SessionStore as Store

    root, ws = tmp_path / "sessions", tmp_path / "ws"
    ws.mkdir()
    for sid, where, text in (
        ("here00000001", str(ws), "the blue kayak"),
        ("away00000002", "/x", "the red kayak"),
    ):
        s = new_session(provider="p", model="m", title="Boats", workspace=where)
        s.id = sid
        s.messages = [Message(role="user", content=text)]
        Store(root).create(s)
    ctx = ToolContext(workspace=ws)
    reg = ToolRegistry([search_sessions_tool(root, workspace=str(ws))], ctx)

    def run(args: dict[str, Any], confirmer: Asked) -> str:
        prepared = reg.prepare(ToolCall("c1", "search_sessions", json.dumps(args)))
        decision = ApprovalPolicy(confirmer=confirmer).decide(prepared)
        if not decision.approved:
            return "denied"
        return reg.run(prepared).content

    quiet = Asked(approve=True)
    assert "blue kayak" in (here := run({"query": "kayak"}, quiet)) and "red" not in here
    assert quiet.asked == []  # inside the project: nothing to ask
    no = Asked(approve=False)
    assert run({"query": "kayak", "all_projects": True}, no) == "denied"
    assert no.asked == [[CROSSING]]
    yes = Asked(approve=True)
    both = run({"query": "kayak", "all_projects": True}, yes)
    assert "blue kayak" in both and "red kayak" in both and len(yes.asked) == 1
