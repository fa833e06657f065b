"""The `search_sessions` tool against the loopback server: cited excerpts reach the model,
the current session is left out, the answer is bounded, no approval is asked."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import fakeserver as fs
from cbenv import CB, make_cb

from countbot_cli.conversation.search_tool import OUTPUT_CHARS
from countbot_cli.conversation.session import new_session
from countbot_cli.conversation.store import SessionStore
from countbot_cli.messages import Message


def past(cb: CB, sid: str, title: str, *texts: str) -> None:
    s = new_session(provider="test", model="test-model", title=title)
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
    assert "No past conversation matches 'zeppelin'" in tool_message(bodies[1])
    tools = [m for m in bodies[2]["messages"] if m["role"] == "tool"]
    assert "session pastpast0001" in tools[1]["content"]
    assert "京都 hotel for March" in tools[1]["content"]
