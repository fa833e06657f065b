"""The memory upkeep never holds an answer back, in the REPL: on a model that answers one call at
a time (the embedded one; here the loopback server, treated so) a question typed while the
upkeep's summary call streams stops that call, the answer comes, and its usage line says how
long the turn waited; the step is done after a later turn, nothing skipped."""

from __future__ import annotations

from typing import Any

import fakeserver as fs
import pytest
from waits import wait_until

from countbot_cli.conversation import chat


def test_a_question_typed_during_the_upkeep_stops_its_call_and_is_answered(
    harness: Any, server: fs.FakeServer, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(chat, "SERIAL_PROVIDERS", ("openai",))  # one call at a time
    summaries: list[int] = []

    def responder(body: dict[str, Any]) -> fs.Reply:
        if body["messages"][0]["role"] == "system":
            return fs.text("ok.")
        summaries.append(len(summaries))
        if len(summaries) == 1:  # the first summary trickles: 30 chunks, 1 s apart
            return fs.text("MEMORY: user asked question one\nSUMMARY: s" + "." * 29, delay=1.0)
        return fs.text("MEMORY: user asked question one\nSUMMARY: question one")

    server.responder = responder
    h = harness(persona={"max_history_messages": 2}, memory={"auto_memory": False, "inject": "off"})

    def when_summarising(h: Any) -> None:
        wait_until(lambda: summaries, "the step's summary call", 20)

    h.run(
        [
            "question one\r",
            "question two\r",
            "question three\r",  # 4 messages leave the window: the step's call starts
            when_summarising,
            "question four\r",
            lambda h: h.wait_for("waited", stream="err", timeout=20),
            "question five\r",
        ],
        timeout=90,
    )
    err = " ".join(h.err.getvalue().split())
    waited = [float(w) for w in err.split("waited ")[1:] for w in [w.split(" s for")[0]]]
    assert waited and max(waited) < 10, err  # the call was stopped, not waited out (30 s)
    assert "waited" in err and "for the memory upkeep" in err
    chats = [messages for messages in h.sent() if messages[0]["role"] == "system"]
    assert chats[3][-1]["content"] == "question four"
    archived = [m["content"] for m in h.session_data()["archived"]]
    assert archived[:4] == ["question one", "ok.", "question two", "ok."]  # done later
    assert len(summaries) >= 2
