"""Overflow summaries and /compact, end to end (see helpers/memory_rig.py): batches, each message
summarised once, failures and timeouts leaving the messages for a later turn, the exact
sentinel, the token window, bounded summary calls and Ctrl-C during upkeep."""

from __future__ import annotations

import signal
from dataclasses import replace
from datetime import date
from typing import Any

import fakeserver as fs
import pytest
from memory_rig import (
    ENTRY_RE,
    Summariser,
    a,
    dialogue_lines,
    messages_of,
    q,
)
from waits import returns_within

from countbot_cli.conversation.sessions.session import new_session
from countbot_cli.conversation.tokens import TokenCounter
from countbot_cli.interrupts import sigint_deferred
from countbot_cli.memory.summariser import SummaryError
from countbot_cli.messages import Message
from countbot_cli.prompts import NO_MEMORY_SENTINEL

# ---- the 20-turn walk ----


def test_twenty_turns_max_history_6(rig_factory: Any) -> None:
    rig = rig_factory(
        persona={"max_history_messages": 6}, memory={"auto_memory": False, "inject": "off"}
    )
    before = date.today().isoformat()
    for k in range(1, 21):
        rig.turn(q(k))
        # the request window of turn k: at most 6 earlier messages, its start moving in steps
        # of 4 (two turns), so turn k is turn k-1's request plus two messages, every other turn
        body = rig.chat_bodies()[-1]
        sent = [(m["role"], m["content"]) for m in body["messages"][1:]]
        first = max(1, k - 3 if k % 2 == 0 else k - 2)
        assert sent == [*messages_of(range(first, k)), ("user", q(k))], k
        # the block the window leaves is archived at once: a call after turns 4, 6, ..., 20
        expected_calls = 0 if k < 4 else (k - 4) // 2 + 1
        assert len(rig.summariser.of("overflow")) == expected_calls, k
    assert rig.view.notices == []
    calls = rig.summariser.calls
    assert len(calls) == 9
    for n, (_kind, prompt, body) in enumerate(calls):
        first = 2 * n + 1  # call n summarises turns first and first + 1
        assert dialogue_lines(prompt) == [
            f"{role.upper()}: {text}" for role, text in messages_of(range(first, first + 2))
        ]
        assert body["temperature"] == 0.3
        assert body["stream"] is True
        assert body["max_tokens"] == 1024  # the reply reserve of an 8192 window
        assert "tools" not in body
        assert len(body["messages"]) == 1
    # each message summarised once, none skipped
    summarised = [ln for _, p, _ in calls for ln in dialogue_lines(p)]
    assert len(summarised) == len(set(summarised)) == 36
    entries = rig.entries()
    assert len(entries) == 9
    assert all(ENTRY_RE.match(e) for e in entries), entries
    assert all(e.split("|")[0] in (before, date.today().isoformat()) for e in entries)
    assert [e.split("|", 2)[2] for e in entries] == [
        f"user asked question {2 * n + 1} and question {2 * n + 2}" for n in range(9)
    ]
    saved = rig.saved()
    assert [(m["role"], m["content"]) for m in saved["archived"]] == messages_of(range(1, 19))
    assert [(m["role"], m["content"]) for m in saved["messages"]] == messages_of(range(19, 21))
    assert saved["cursors"]["overflow"] > 0


ADA = "My name is Ada and I live in Lyon."
CELLO = "I play the cello on weekends."
SAID = [
    ["auto-overflow", f'the user said: "{ADA}"'],
    ["auto-overflow", f'the user said: "{CELLO}"'],
]


@pytest.mark.parametrize(
    ("reply", "why"),
    [
        (fs.status(500), "overflow summary failed: "),
        (fs.text("   "), "overflow summary failed: the model returned nothing"),
    ],
)
def test_a_failed_summary_keeps_what_the_user_said(
    rig_factory: Any, reply: fs.Reply, why: str
) -> None:
    rig = rig_factory(persona={"max_history_messages": 2}, memory={"auto_memory": False})
    rig.summariser.replies = [reply]
    rig.turn(ADA)
    rig.turn(CELLO)
    rig.turn(q(3))
    # after turn 3: 4 messages outside the window; the call failed: what the user said in
    # them is kept, in their words, and the block leaves the window as after a summary
    assert len(rig.summariser.calls) == 1
    assert [e.split("|", 2)[1:] for e in rig.entries()] == SAID
    saved = rig.saved()
    assert [m["content"] for m in saved["archived"]] == [ADA, "answer name", CELLO, "answer play"]
    assert len(rig.view.failures) == 1, rig.view.notices
    assert rig.view.failures[0].startswith("memory: " + why)
    assert rig.view.failures[0].endswith("; kept what was said instead (2 lines)")
    rig.turn(q(4))
    rig.turn(q(5))
    # the next step summarises the next block only, with the model again
    assert dialogue_lines(rig.summariser.calls[1][1])[0] == "USER: question 3"
    assert rig.entries()[2].endswith("|auto-overflow|user asked question 3 and question 4")


def test_a_timed_out_summary_keeps_what_the_user_said(rig_factory: Any) -> None:
    rig = rig_factory(
        provider={"read_timeout": 0.5},
        persona={"max_history_messages": 2},
        memory={"auto_memory": False},
    )
    rig.summariser.replies = [fs.hang(5, send_headers=False)]
    rig.turn(ADA)
    rig.turn(CELLO)
    rig.turn(q(3))
    assert [e.split("|", 2)[1:] for e in rig.entries()] == SAID
    assert len(rig.saved()["archived"]) == 4
    assert any("no answer within" in n for n in rig.view.failures), rig.view.notices


def test_sentinel_reply_writes_nothing_but_archives(rig_factory: Any) -> None:
    rig = rig_factory(persona={"max_history_messages": 2}, memory={"auto_memory": False})
    rig.summariser.replies = [fs.text(NO_MEMORY_SENTINEL)]
    for k in range(1, 4):
        rig.turn(q(k))
    assert len(rig.summariser.calls) == 1
    assert rig.entries() == []
    assert len(rig.saved()["archived"]) == 4
    rig.turn(q(4))
    rig.turn(q(5))
    # the next batch starts after the sentinel batch: turns 1-2 are not summarised again
    assert dialogue_lines(rig.summariser.calls[1][1])[0] == "USER: question 3"


def test_reply_containing_the_sentinel_is_written(rig_factory: Any) -> None:
    rig = rig_factory(persona={"max_history_messages": 2}, memory={"auto_memory": False})
    line = f"用户的测试数据{NO_MEMORY_SENTINEL}；用户偏好 Redis 7"
    rig.summariser.replies = [fs.text(line)]
    rig.turn(f"我的测试数据{NO_MEMORY_SENTINEL}，我偏好 Redis 7")
    for k in range(2, 4):
        rig.turn(q(k))
    assert [e.split("|", 2)[1:] for e in rig.entries()] == [["auto-overflow", line]]


def test_compact_shrinks_the_next_request(rig_factory: Any) -> None:
    """/compact at 80 % of the window (nothing outside it) summarises all but the last
    exchange: the next request is smaller by at least the summarised messages."""
    memory = {"auto_memory": False, "inject": "off"}  # the line written is not sent back
    rig = rig_factory(persona={"max_history_messages": 10}, memory=memory)
    for k in range(1, 5):
        rig.turn(q(k))
    assert rig.summariser.calls == []  # 8 messages in a window of 10: no overflow
    before = rig.chat_bodies()[-1]["messages"]
    assert len(before) == 1 + 6 + 1
    written = rig.conversation.compact()  # what /compact runs
    assert written is not None and len(written) == 1 and ENTRY_RE.match(written[0])
    assert dialogue_lines(rig.summariser.calls[0][1]) == [
        f"{r.upper()}: {t}" for r, t in messages_of(range(1, 4))
    ]
    assert rig.conversation.compact() == []  # only the last exchange is left
    assert len(rig.summariser.calls) == 1
    rig.turn(q(5))
    after = rig.chat_bodies()[-1]["messages"]
    assert [(m["role"], m["content"]) for m in after[1:]] == [
        *messages_of(range(4, 5)),
        ("user", q(5)),
    ]
    assert len(after) <= len(before) + 2 - 6  # the six summarised messages are gone
    rig.summariser.replies = [fs.status(500)]
    rig.turn(q(6))
    with pytest.raises(SummaryError):
        rig.conversation.compact()
    assert [m["content"] for m in rig.saved()["archived"]] == [
        t for _, t in messages_of(range(1, 4))
    ]


def test_overflow_off_and_unlimited_history_make_no_calls(rig_factory: Any) -> None:
    rig = rig_factory(
        persona={"max_history_messages": 2},
        memory={"auto_memory": False, "overflow_summary": False, "session_summary": False},
    )
    for k in range(1, 6):
        rig.turn(q(k))
    rig2 = rig_factory(persona={"max_history_messages": 0}, memory={"auto_memory": False})
    for k in range(1, 6):
        rig2.turn(q(k))
    assert rig.summariser.calls == [] and rig2.summariser.calls == []
    assert len(rig2.chat_bodies()[-1]["messages"]) == 1 + 8 + 1  # unlimited: all history


def test_failed_turns_are_archived_but_not_summarised(rig_factory: Any) -> None:
    rig = rig_factory(persona={"max_history_messages": 2}, memory={"auto_memory": False})
    rig.turn(q(1))
    rig.server.add(fs.status(400))  # turn 2 fails: its message is kept, marked failed
    result = rig.turn(q(2), ok=False)
    assert result.status == "failed"
    for k in range(3, 6):
        rig.turn(q(k))
    prompt = rig.summariser.calls[0][1]
    assert "question 2" not in prompt
    archived = rig.saved()["archived"]
    assert any(m.get("status") == "failed" for m in archived)


# ---- what stays: failed turns, the last exchange, the engine's window ----


def test_only_failed_turns_stay_for_retry(rig_factory: Any) -> None:
    rig = rig_factory(persona={"max_history_messages": 2}, memory={"auto_memory": False})
    for _ in range(3):
        rig.server.add(fs.status(400))
        result = rig.turn("question x", ok=False)
        assert result.status == "failed"
    assert rig.keeper.compact(rig.sid) == []
    saved = rig.saved()
    assert saved["archived"] == [] and len(saved["messages"]) == 3
    assert rig.summariser.calls == []


def test_the_last_exchange_is_never_archived(rig_factory: Any) -> None:
    # max_history 1 leaves no message in the window (it would start on an answer)
    rig = rig_factory(persona={"max_history_messages": 1}, memory={"auto_memory": False})
    for k in range(1, 5):
        rig.turn(q(k))
    rig.keeper.compact(rig.sid)
    saved = rig.saved()
    assert [m["content"] for m in saved["messages"]] == [q(4), a(4)]
    assert [m["content"] for m in saved["archived"]] == [c for _, c in messages_of(range(1, 4))]


def long_turn(k: int, words: int = 120) -> str:
    return f"question {k} " + " ".join(f"topic{k}-{j}" for j in range(words))


def test_messages_trimmed_by_tokens_overflow_and_nothing_sent_is_archived(
    rig_factory: Any,
) -> None:
    rig = rig_factory(
        provider={"context_window": 6000},
        max_tokens=300,
        persona={"max_history_messages": 0},  # unlimited: only the token budget trims
        memory={"auto_memory": False, "inject": "off"},
    )
    for k in range(1, 31):
        rig.turn(long_turn(k))
        session = rig.store.load(rig.sid)
        user = Message(role="user", content=long_turn(k + 1))
        live = rig.engine.context_for(session, user).window
        full = rig.engine.context_for(replace(session, messages=session.all_messages()), user)
        # archiving never took a message the engine would still send
        assert [m.id for m in live] == [m.id for m in full.window], k
    calls = rig.summariser.of("overflow")
    assert 1 <= len(calls) <= 6  # batched, not one a turn
    summarised = [ln for p in calls for ln in dialogue_lines(p)]
    assert len(summarised) == len(set(summarised))
    saved = rig.saved()
    assert len(saved["archived"]) == len(summarised)
    assert len(saved["archived"]) + len(saved["messages"]) == 60


def test_small_window_summary_calls_fit_the_model(rig_factory: Any) -> None:
    rig = rig_factory(
        provider={"context_window": 2048},
        persona={"max_history_messages": 2, "language": "zh"},
        memory={"auto_memory": False},
    )
    store = rig.store
    session = new_session(provider="test", model="test-model")
    text = "我们的项目叫星河计划，数据库用 PostgreSQL 16，端口 5433，部署在阿里云杭州区域。" * 4
    session.messages = [
        Message(role="user" if i % 2 == 0 else "assistant", content=f"{i} {text}")
        for i in range(40)
    ]
    store.create(session)
    rig.session = session
    rig.keeper.compact(session.id)
    calls = rig.summariser.calls
    assert len(calls) > 1
    counter = TokenCounter("test-model")
    for _, prompt, body in calls:
        assert prompt.startswith("你负责维护一段对话的滚动摘要")  # persona.language zh: Chinese
        assert body["max_tokens"] == 256  # min(4096, 2048 / 8)
        assert counter.count_messages(body["messages"]) + 256 <= 2048 * 0.9
    lines = [ln for _, p, _ in calls for ln in dialogue_lines(p)]
    assert len(lines) == len(set(lines)) == 38


# ---- bounded: the user does not wait long after the answer ----


def test_a_hung_summariser_costs_one_short_call(rig_factory: Any) -> None:
    # the chat provider keeps its 120 s read timeout and 2 retries; summary calls use neither
    rig = rig_factory(
        provider={"max_retries": 2},
        persona={"max_history_messages": 2},
        memory={"auto_messages": 6},
    )
    rig.keeper.summariser.read_timeout = 1.0
    rig.summariser.replies = [fs.hang(30, send_headers=False)]
    rig.turn(q(1))
    rig.turn(q(2))
    # overflow (4 messages) and automatic memory (6 messages) are both due; a hang bound: the
    # summariser hangs 30 s
    returns_within(lambda: rig.turn(q(3)), "a turn whose summariser hangs", 20)
    assert len(rig.summariser.calls) == 1  # no retry, and no second call after a failure
    assert any("no answer within 1 s" in n for n in rig.view.notices), rig.view.notices
    saved = rig.saved()  # the block left the window, its newer messages distilled without a call
    assert len(saved["archived"]) == 4 and saved["cursors"]["auto_memory"] == 6
    rig.turn(q(4))
    rig.turn(q(5))  # the next step calls the model again
    assert [k for k, _, _ in rig.summariser.calls] == ["overflow", "overflow"]  # auto: not due
    assert rig.entries()[-1].endswith("|user asked question 4 and question 5")  # 3: distilled


def test_a_slow_run_stops_between_batches(rig_factory: Any) -> None:
    rig = rig_factory(persona={"max_history_messages": 2}, memory={"auto_memory": False})
    now = [0.0]
    keeper = rig.keeper
    keeper.summariser.clock = lambda: now[0]

    def slow(body: dict[str, Any]) -> fs.Reply:
        reply = Summariser.__call__(rig.summariser, body)
        if body["messages"][0]["role"] == "user":
            now[0] += 20.0  # every summary call takes 20 s: the run's 30 s allow two
        return reply

    rig.server.responder = slow
    session = new_session(provider="test", model="test-model")
    session.messages = [
        Message(role="user" if i % 2 == 0 else "assistant", content=f"{i} " + "word " * 80)
        for i in range(80)
    ]
    rig.store.create(session)
    rig.session = session
    rig.turn(q(1))
    assert len(rig.summariser.calls) == 2  # the deadline passed: the third batch waits
    assert rig.view.notices == []
    first = len(rig.saved()["archived"])
    assert 0 < first < 80
    rig.turn(q(2))  # the rest, in a new run
    assert len(rig.summariser.calls) == 4
    lines = [ln for _, p, _ in rig.summariser.calls for ln in dialogue_lines(p)]
    assert len(lines) == len(set(lines)) == 82  # each message once
    assert len(rig.saved()["archived"]) == 82


def test_a_summariser_that_keeps_failing_is_tried_less_often(rig_factory: Any) -> None:
    rig = rig_factory(persona={"max_history_messages": 2}, memory={"auto_memory": False})
    rig.summariser.replies = [fs.status(500)] * 4
    tried: list[int] = []
    for k in range(1, 20):
        before = len(rig.summariser.calls)
        rig.turn(q(k))
        if len(rig.summariser.calls) > before:
            tried.append(k)
    # due from turn 3, then every other turn; after failures in a row no call for 1, 2, 4, 8
    # turns: the next due turn after that (each failed block left the window all the same)
    assert tried == [3, 5, 7, 11, 19]
    assert len([n for n in rig.view.notices if "overflow summary failed" in n]) == 4
    saved = rig.saved()
    assert "summary_failures" not in saved["cursors"]  # the success cleared the count
    assert [m["content"] for m in saved["messages"]] == [q(19), a(19)]
    summarised = [ln for _, p, _ in rig.summariser.calls for ln in dialogue_lines(p)]
    assert summarised == [f"{r.upper()}: {t}" for r, t in messages_of(range(1, 19))]


def test_compact_says_how_many_messages_left_the_window(rig_factory: Any) -> None:
    rig = rig_factory(persona={"max_history_messages": 2}, memory={"auto_memory": False})
    rig.turn(q(1))
    rig.turn(q(2))
    rig.summariser.replies = [fs.text(NO_MEMORY_SENTINEL)]
    done = rig.keeper.compact(rig.sid)
    assert list(done) == [] and done.archived == 2  # nothing worth keeping, still compacted
    assert rig.keeper.compact(rig.sid).archived == 0


def test_ctrl_c_holds_while_a_result_is_written() -> None:
    with pytest.raises(KeyboardInterrupt), sigint_deferred():
        signal.raise_signal(signal.SIGINT)  # in this thread: its handler runs before the next line
        reached = True  # the signal did not stop the block
    assert reached
