"""A tool loop on a small context window, end to end: `countbot ask` on a long saved session,
the model reading large files one round after another, against a loopback server that refuses a
prompt over its window as a provider does (400 `context_length_exceeded`). Each request after
the first is fitted again (conversation/round_fit.py): older history left out first, then this
turn's oldest tool results; the turn completes, the user is told once, and the session keeps
every tool output whole."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import fakeserver as fs
import prefix
from cbenv import CB, QUIET_MEMORY
from tools_env import tool_messages, tools_cb, words

from countbot_cli.conversation.sessions.session import new_session
from countbot_cli.conversation.sessions.store import SessionStore
from countbot_cli.conversation.tokens import TokenCounter
from countbot_cli.messages import Message

WINDOW = 4096  # the server's, and what countbot is told
MAX_TOKENS = 256  # the reply reserve
ANSWER = "All four files are about rivers."
NOTICE = f"left out to fit the {WINDOW:,}-token context window during tool calls"
MARKER = "was left out to fit the context window. Call the tool again if you need it."


def small_window_cb(tmp_path: Path, server: fs.FakeServer, history: int) -> tuple[CB, str]:
    """Tools on, a 4,096-token window on both sides, and a saved session of `history` messages
    of 90 words each; (the installation, the session's id)."""
    server.context_window = WINDOW
    cb = tools_cb(
        tmp_path,
        server,
        config={
            **QUIET_MEMORY,
            "provider": {"context_window": WINDOW},
            "max_tokens": MAX_TOKENS,
        },
    )
    session = new_session(provider="test", model="test-model")
    session.messages = [
        Message(role="user" if i % 2 == 0 else "assistant", content=words(90, i))
        for i in range(history)
    ]
    SessionStore(cb.sessions_dir).create(session)
    return cb, session.id


def read(name: str) -> fs.Reply:
    return fs.tool_calls([("read_file", {"path": name, "show_line_numbers": False})])


def counted(body: dict[str, Any]) -> int:
    """The request's prompt as countbot counts it (cl100k, exact for these words)."""
    c = TokenCounter("test-model")
    return c.count_messages(body["messages"]) + c.count_tools(body.get("tools") or [])


def assert_every_request_fits(server: fs.FakeServer) -> list[dict[str, Any]]:
    bodies = server.chat_bodies()
    assert server.refused == []
    for body in bodies:
        assert fs.prompt_tokens_at_least(body) <= WINDOW
        assert counted(body) + MAX_TOKENS <= WINDOW
    return bodies


def test_a_tool_loop_over_the_window_completes_and_keeps_every_output(
    tmp_path: Path, server: fs.FakeServer
) -> None:
    cb, sid = small_window_cb(tmp_path, server, history=40)
    for n in range(1, 5):
        (cb.work / f"f{n}.txt").write_text(words(600, n) + "\n", encoding="utf-8")
    server.add(*(read(f"f{n}.txt") for n in range(1, 5)), fs.text(ANSWER))
    proc = cb.invoke("ask", "-s", sid, "read f1.txt to f4.txt, one at a time")
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout == ANSWER + "\n"
    assert proc.stderr.count(NOTICE) == 1, proc.stderr

    bodies = assert_every_request_fits(server)
    assert len(bodies) == 5
    records = cb.only_session()["tool_conversations"]
    whole = [r["result"] for r in records]
    assert len(whole) == 4 and all(len(w) > 3000 and MARKER not in w for w in whole)
    assert all(f"[File: f{n}.txt" in w for n, w in enumerate(whole, 1))
    for body in bodies[1:]:  # the latest round's result is sent whole, as the session keeps it
        results = [t["content"] for t in tool_messages(body)]
        assert results[-1] == whole[len(results) - 1]
        assert results == [whole[i] if MARKER not in r else r for i, r in enumerate(results)]
    assert_oldest_left_out_as_needed(bodies[-1], whole)
    history = [len(b["messages"]) - 2 * n - 2 for n, b in enumerate(bodies)]
    assert history[0] > 0 and history == sorted(history, reverse=True) and history[-1] == 0


def assert_oldest_left_out_as_needed(body: dict[str, Any], whole: list[str]) -> None:
    """The oldest results were left out, never the latest, and no more than needed: with the
    newest of them sent whole the request would be over the budget."""
    sent = tool_messages(body)
    out = [MARKER in t["content"] for t in sent]
    k = out.count(True)
    assert 0 < k < len(sent) and out == [True] * k + [False] * (len(sent) - k)
    assert all(
        f"({len(w):,} characters)" in t["content"] for w, t in zip(whole[:k], sent[:k], strict=True)
    )
    sent[k - 1]["content"] = whole[k - 1]
    assert counted(body) + MAX_TOKENS > int(WINDOW * 0.9)


def test_rounds_that_fit_extend_the_request_and_one_that_does_not_trims_history(
    tmp_path: Path, server: fs.FakeServer
) -> None:
    cb, sid = small_window_cb(tmp_path, server, history=20)  # all of it fits, and two reads
    for name, n in (("s1", 10), ("s2", 10), ("big", 1700)):
        (cb.work / f"{name}.txt").write_text(words(n) + "\n", encoding="utf-8")
    server.add(read("s1.txt"), read("s2.txt"), read("big.txt"), fs.text(ANSWER))
    proc = cb.invoke("ask", "-s", sid, "read s1.txt, s2.txt, then big.txt")
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout == ANSWER + "\n"
    assert proc.stderr.count(NOTICE) == 1 and "older messages " + NOTICE in proc.stderr

    bodies = assert_every_request_fits(server)
    assert len(bodies) == 4
    first = bodies[0]["messages"]
    assert len(first) == 22  # the system prompt, the whole saved session, the question
    assert [grown(a, b) for a, b in zip(bodies, bodies[1:], strict=False)] == [
        True,  # the rounds that fit: each request the previous one plus the new messages
        True,
        False,  # big.txt: older history left out
    ]
    trimmed = bodies[3]["messages"]
    kept = trimmed[1 : len(trimmed) - 7]  # the history it kept: a suffix of the first's
    assert kept and kept[0]["role"] == "user"
    assert first[1:-1][-len(kept) :] == kept and len(kept) < len(first) - 2
    assert trimmed[0] == first[0] and trimmed[-7:-2] == bodies[2]["messages"][-5:]
    assert MARKER not in json.dumps(bodies)  # this turn's own messages fitted: none left out


def grown(prev: dict[str, Any], cur: dict[str, Any]) -> bool:
    """`cur` is `prev`, every message of it, plus more (prompt caching's prefix)."""
    return prefix.layout(cur)[: len(prefix.layout(prev))] == prefix.layout(prev)
