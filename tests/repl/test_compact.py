"""/compact in the REPL: at 80 % of the window, where nothing is outside it yet,
it summarises all but the last exchange, the next request is smaller by at least those messages,
and the toolbar's context meter shows the smaller request at once."""

from __future__ import annotations

import re
from typing import Any

import fakeserver as fs
from repl_harness import Harness
from waits import wait_until


def test_compact_shrinks_the_next_request_and_the_toolbar_shows_it(
    harness: Any, server: fs.FakeServer
) -> None:
    h = harness(persona={"max_history_messages": 10})

    def answer(body: dict[str, Any]) -> fs.Reply:
        prompt = body["messages"][-1]["content"]
        if body["messages"][0]["role"] != "system":  # a summary call
            return fs.text("user plans a trip to Lisbon；budget 900 EUR", usage=None)
        return fs.text("a fairly long answer about the trip " * 20 + prompt[-1] + " done")

    server.responder = answer
    seen: list[tuple[str, int, int]] = []

    def meter(h: Harness) -> None:
        assert h.repl is not None
        session = h.repl.conversation.session
        wait_until(lambda: len(session.messages) % 2 == 0, "the last turn saved")
        b = h.repl.meter.breakdown(h.repl.conversation)
        seen.append((h.toolbar(), b.total, b.messages))

    turns = [f"Lisbon trip, budget 900 EUR: question {k}\r" for k in range(1, 5)]
    h.run(
        [
            *turns,
            lambda h: h.wait_for("4 done"),
            meter,
            "/compact\r",
            lambda h: h.wait_for("Lisbon"),
            meter,
            "one more\r",
        ]
    )
    (bar_before, total_before, msgs_before), (bar_after, total_after, msgs_after) = seen
    assert "Nothing to compact" not in h.text()
    assert (msgs_before, msgs_after) == (8, 2)  # 4 exchanges, then only the last one
    assert total_after < total_before
    shown = [re.findall(r"~?([\d.]+k?)/", bar) for bar in (bar_before, bar_after)]
    assert shown[0] and shown[1] and shown[0] != shown[1]  # the toolbar follows
    chats = [b for b in server.chat_bodies() if b["messages"][0]["role"] == "system"]
    before, after = chats[3]["messages"], chats[4]["messages"]
    assert len(after) <= len(before) - 6 + 2  # six messages summarised, one exchange added
    assert [m["content"] for m in after[1:-1]][0] == "Lisbon trip, budget 900 EUR: question 4"
