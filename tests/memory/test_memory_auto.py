"""Automatic memory (see helpers/memory_rig.py): at 30 messages or 15,000 characters, then every 30
new messages, only messages after its cursor, the newest content kept; the cursor after /undo
and /retry removed messages it had consumed."""

from __future__ import annotations

from typing import Any

import fakeserver as fs
from memory_rig import dialogue_lines, messages_of, q

from countbot_cli.memory.coverage import CURSOR_AUTO, CURSOR_AUTO_AT
from countbot_cli.prompts import NO_MEMORY_SENTINEL


def test_auto_memory_at_30_messages_then_every_30_new(rig_factory: Any) -> None:
    rig = rig_factory(persona={"max_history_messages": 0})
    for k in range(1, 15):
        rig.turn(q(k))
    assert rig.summariser.calls == []  # 28 messages
    rig.turn(q(15))
    assert len(rig.summariser.of("auto")) == 1  # 30 messages
    first = dialogue_lines(rig.summariser.of("auto")[0])
    assert first[0] == "USER: question 1" and first[-1] == "ASSISTANT: answer 15"
    saved = rig.saved()
    assert saved["cursors"][CURSOR_AUTO] == 30
    for k in range(16, 30):
        rig.turn(q(k))
    assert len(rig.summariser.of("auto")) == 1  # 28 new messages
    rig.turn(q(30))
    calls = rig.summariser.of("auto")
    assert len(calls) == 2
    second = dialogue_lines(calls[1])
    # only messages after the cursor, never the head of the conversation again
    assert second == [f"{r.upper()}: {t}" for r, t in messages_of(range(16, 31))]
    entries = rig.entries()
    assert len(entries) == 2 and all(e.split("|")[1] == "auto-memory" for e in entries)
    assert rig.saved()["cursors"][CURSOR_AUTO] == 60


def test_auto_memory_at_15000_characters_keeps_the_newest(rig_factory: Any) -> None:
    rig = rig_factory(persona={"max_history_messages": 0}, provider={"context_window": 1_000_000})
    long = "x" * 3000
    for k in range(1, 5):
        rig.turn(f"question {k} {long}")
    assert rig.summariser.calls == []  # 4 x 3000 + short answers < 15000
    rig.turn(f"question 5 {long}")
    calls = rig.summariser.of("auto")
    assert len(calls) == 1
    lines = dialogue_lines(calls[0])
    assert sum(len(ln) + 1 for ln in lines) <= 4000
    assert lines[-1] == "ASSISTANT: answer 5"  # the newest content is kept
    assert all(len(ln) <= len("ASSISTANT: ") + 303 for ln in lines)
    rig.turn(f"question 6 {long}")  # more characters, but only 2 new messages
    assert len(rig.summariser.of("auto")) == 1


def test_auto_memory_failure_keeps_what_was_said(rig_factory: Any) -> None:
    rig = rig_factory(persona={"max_history_messages": 0}, memory={"auto_messages": 4})
    rig.summariser.replies = [fs.status(500)]
    rig.turn("I am learning Rust this winter.")
    rig.turn(q(2))
    assert len(rig.summariser.calls) == 1 and rig.saved()["cursors"][CURSOR_AUTO] == 4
    assert [e.split("|", 2)[1:] for e in rig.entries()] == [
        ["auto-memory", 'the user said: "I am learning Rust this winter."']
    ]
    assert any("automatic memory failed" in n for n in rig.view.failures)
    rig.summariser.replies = [fs.text(NO_MEMORY_SENTINEL)]
    rig.turn(q(3))
    rig.turn(q(4))  # due again after the backoff's one turn: the sentinel
    assert len(rig.summariser.calls) == 2
    assert len(rig.entries()) == 1  # the sentinel wrote nothing ...
    assert rig.saved()["cursors"][CURSOR_AUTO] == 8  # ... but moved the cursor


# ---- the cursor after /undo and /retry ----


def backdate(rig: Any, seconds: int = 60) -> None:
    """Make every stored message (and the cursor's time) older, as if the turns so far
    happened a minute ago: the next message is then certainly newer."""
    from datetime import datetime, timedelta

    def shift(text: str, fmt: str) -> str:
        return (datetime.strptime(text, fmt) - timedelta(seconds=seconds)).strftime(fmt)

    def apply(s: Any) -> None:
        for m in s.all_messages():
            m.created_at = shift(m.created_at, "%Y-%m-%dT%H:%M:%SZ")
        if CURSOR_AUTO_AT in s.cursors:
            s.cursors[CURSOR_AUTO_AT] = int(shift(str(s.cursors[CURSOR_AUTO_AT]), "%Y%m%d%H%M%S"))

    rig.store.update(rig.sid, apply, touch=False)


def test_turns_after_an_undo_of_summarised_messages_are_summarised(rig_factory: Any) -> None:
    rig = rig_factory(persona={"max_history_messages": 0}, memory={"auto_messages": 4})
    rig.turn(q(1))
    rig.turn(q(2))
    assert len(rig.summariser.of("auto")) == 1  # 4 messages: consumed
    backdate(rig)

    def undo(s: Any) -> None:  # what /undo does: the last exchange leaves the session
        del s.messages[-2:]

    rig.store.update(rig.sid, undo)
    rig.turn(q(3))
    rig.turn(q(4))  # 4 messages since the cursor: the two after the undo and these
    calls = rig.summariser.of("auto")
    assert len(calls) == 2
    assert dialogue_lines(calls[1]) == [f"{r.upper()}: {t}" for r, t in messages_of(range(3, 5))]
    assert rig.saved()["cursors"][CURSOR_AUTO] == 6


def test_a_retried_turn_is_summarised_after_its_failed_attempt_was(rig_factory: Any) -> None:
    rig = rig_factory(persona={"max_history_messages": 0}, memory={"auto_messages": 4})
    rig.turn(q(1))
    rig.turn(q(2))  # automatic memory: 4 messages consumed
    rig.turn(q(3))
    rig.keeper.summariser.run_seconds = 0.0
    rig.turn(q(4))  # due, but the upkeep is out of time: the cursor stays
    rig.keeper.summariser.run_seconds = 30.0
    rig.server.add(fs.status(400))
    assert rig.turn(q(5), ok=False).status == "failed"
    # after the failed turn the summary works: consumed up to the failed question
    calls = rig.summariser.of("auto")
    assert len(calls) == 2 and rig.saved()["cursors"][CURSOR_AUTO] == 9
    backdate(rig)
    session = rig.store.load(rig.sid)
    failed_id = session.messages[-1].id
    rig.turn(q(5), replaces=failed_id)  # /retry: the failed attempt is replaced
    rig.turn(q(6))
    calls = rig.summariser.of("auto")
    assert len(calls) == 3
    assert dialogue_lines(calls[2]) == [f"{r.upper()}: {t}" for r, t in messages_of(range(5, 7))]
