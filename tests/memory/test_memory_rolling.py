"""The rolling session summary, read from the requests the loopback server
received: in the stable head after a step and unchanged between steps, made in the same call as
the overflow memory line, never over a user's /summary, and kept when a call fails."""

from __future__ import annotations

from typing import Any

import fakeserver as fs
from memory_rig import backlog_lines, dialogue_lines, messages_of, q, summary_of

from countbot_cli import app
from countbot_cli.conversation.sessions.session import Session
from countbot_cli.memory.rolling import BACKLOG_CHARS, ROLLING_CHARS, clean_summary, split_reply
from countbot_cli.memory.summary_prompts import MEMORY_MARK, SUMMARY_MARK, TITLE_MARK
from countbot_cli.prompts import ROLLING_LEAD

ROLLING = {"auto_memory": False, "inject": "off"}


def heads(rig: Any) -> list[str]:
    """The system prompt of every chat request, in order."""
    return [b["messages"][0]["content"] for b in rig.chat_bodies()]


def test_the_summary_is_in_the_stable_head_after_a_step_and_unchanged_between_steps(
    rig_factory: Any,
) -> None:
    rig = rig_factory(persona={"max_history_messages": 6}, memory=ROLLING)
    for k in range(1, 11):
        rig.turn(q(k))
    # a window of 6 steps by 4 messages: one call after turns 4, 6, 8 and 10 (one call a
    # step: the memory line and the summary come in the same reply)
    calls = rig.summariser.of("overflow")
    assert len(calls) == len(rig.summariser.calls) == 4
    sent = heads(rig)
    assert all(ROLLING_LEAD not in h for h in sent[:4])  # turns 1-4: nothing has left yet
    for k in range(5, 11):  # the request of turn k carries the summary of the last step
        n = (k - 3) // 2  # calls made before turn k
        assert f"{ROLLING_LEAD}\n{summary_of(n)}" in sent[k - 1], k
        assert summary_of(n + 1) not in sent[k - 1]
    assert sent[4] == sent[5] and sent[6] == sent[7] and sent[8] == sent[9]  # between steps
    assert len(set(sent[4:])) == 3  # and one new head a step
    # each call brings the summary so far up to date with the block leaving the window
    assert "Summary so far:\n(none yet)" in calls[0]
    assert (
        f"Summary so far:\n{summary_of(1)}\n" in calls[1]
        and f"Summary so far:\n{summary_of(3)}" in calls[3]
    )
    assert dialogue_lines(calls[1]) == [
        f"{role.upper()}: {text}" for role, text in messages_of(range(3, 5))
    ]
    assert all(backlog_lines(c) == [] for c in calls)
    saved = rig.saved()
    assert saved["rolling_summary"] == summary_of(4) and saved["summary"] == ""
    assert [e.split("|", 2)[2] for e in rig.entries()] == [
        f"user asked question {2 * n + 1} and question {2 * n + 2}" for n in range(4)
    ]  # the labels are not in the memory lines
    assert rig.store.list()[0]["gist"] == summary_of(4)


def test_a_user_summary_wins_and_clearing_it_brings_the_rolling_one_back(
    rig_factory: Any,
) -> None:
    rig = rig_factory(persona={"max_history_messages": 6}, memory=ROLLING)
    for k in range(1, 5):
        rig.turn(q(k))
    rig.conversation.set_summary("We are planning the Lisbon trip.")  # /summary TEXT
    for k in range(5, 9):
        rig.turn(q(k))
    sent = heads(rig)
    assert all("We are planning the Lisbon trip." in h for h in sent[4:])
    assert not any(ROLLING_LEAD in h for h in sent)
    saved = rig.saved()
    assert saved["summary"] == "We are planning the Lisbon trip."  # never overwritten
    assert saved["rolling_summary"] == summary_of(3)  # kept up to date meanwhile
    rig.conversation.set_summary("")  # /summary clear
    rig.turn(q(9))
    assert f"{ROLLING_LEAD}\n{summary_of(3)}" in heads(rig)[-1]
    assert "Lisbon" not in heads(rig)[-1]


def test_a_failed_call_keeps_the_old_summary_and_its_block_comes_back_as_backlog(
    rig_factory: Any,
) -> None:
    rig = rig_factory(persona={"max_history_messages": 6}, memory=ROLLING)
    for k in range(1, 5):
        rig.turn(q(k))
    assert rig.saved()["rolling_summary"] == summary_of(1)
    rig.summariser.replies = [fs.status(500)]
    rig.turn(q(5))
    rig.turn(q(6))  # the step's call fails: the block leaves the window, the summary stays
    assert any("overflow summary failed" in n for n in rig.view.failures)
    assert rig.saved()["rolling_summary"] == summary_of(1)
    rig.turn(q(7))  # its request still carries the summary that was kept
    assert f"{ROLLING_LEAD}\n{summary_of(1)}" in heads(rig)[-1]
    rig.turn(q(8))  # the next step: the failed block comes back for the summary, as a backlog
    calls = rig.summariser.of("overflow")
    assert len(calls) == 3
    assert f"Summary so far:\n{summary_of(1)}\n" in calls[2]  # built on the summary kept
    assert backlog_lines(calls[2]) == [f"{r.upper()}: {t}" for r, t in messages_of(range(3, 5))]
    assert dialogue_lines(calls[2])[0] == "USER: question 5"  # its own block: nothing twice
    assert rig.saved()["rolling_summary"] == summary_of(3)
    rig.turn(q(9))
    assert f"{ROLLING_LEAD}\n{summary_of(3)}" in heads(rig)[-1]


def test_a_reply_without_its_summary_part_writes_the_line_and_shows_the_backlog_next_time(
    rig_factory: Any,
) -> None:
    rig = rig_factory(persona={"max_history_messages": 6}, memory=ROLLING)
    rig.summariser.replies = [fs.text(f"{MEMORY_MARK} User drinks green tea")]
    for k in range(1, 7):
        rig.turn(q(k))
    saved = rig.saved()
    assert [e.split("|", 2)[2] for e in rig.entries()][0] == "User drinks green tea"
    assert len(saved["archived"]) == 8  # both steps archived
    second = rig.summariser.of("overflow")[1]
    assert backlog_lines(second) == [
        f"{role.upper()}: {text}" for role, text in messages_of(range(1, 3))
    ]  # the messages the first summary missed, for the summary only
    assert saved["rolling_summary"] == summary_of(2)


def test_session_summary_alone_writes_no_memory(rig_factory: Any) -> None:
    rig = rig_factory(
        persona={"max_history_messages": 6}, memory={**ROLLING, "overflow_summary": False}
    )
    for k in range(1, 6):
        rig.turn(q(k))
    (prompt,) = rig.summariser.of("overflow")
    assert f"{MEMORY_MARK} …" not in prompt and f"{SUMMARY_MARK} …" in prompt
    assert rig.entries() == []
    assert rig.saved()["rolling_summary"] == summary_of(1)
    assert f"{ROLLING_LEAD}\n{summary_of(1)}" in heads(rig)[-1]


def test_replies_are_read_by_their_labels_and_the_summary_is_bounded() -> None:
    assert split_reply("MEMORY: likes tea； SUMMARY: planning a trip") == (
        "likes tea；",
        "planning a trip",
    )
    assert split_reply("**Summary**: a trip\n**Memory:** 无需记录") == ("无需记录", "a trip")
    assert split_reply("just a line") == (None, None)
    long = "word " * 1000
    cut = clean_summary(long)
    assert cut is not None and len(cut) <= ROLLING_CHARS and cut.endswith("…")
    assert clean_summary("  ") is None and clean_summary("无需记录") is None


def test_a_session_file_without_a_rolling_summary_loads() -> None:
    old = Session.from_dict(
        {"id": "abc", "title": "t", "created_at": "", "updated_at": "", "summary": "mine"}
    )
    assert old.rolling_summary == "" and old.context_summary() == "mine"
    old.summary = ""
    assert old.context_summary() == ""
    old.rolling_summary = "the gist"
    assert old.context_summary() == f"{ROLLING_LEAD}\nthe gist"
    assert Session.from_dict(old.to_dict()).rolling_summary == "the gist"


def test_a_model_made_title_replaces_the_first_questions_once_never_the_users(
    rig_factory: Any,
) -> None:
    titled = f"{MEMORY_MARK} fact\n{SUMMARY_MARK} a trip\n{TITLE_MARK} “Planning the Lisbon trip”."
    rig = rig_factory(persona={"max_history_messages": 6}, memory=ROLLING)
    rig.summariser.replies = [fs.text(titled), fs.text(titled.replace("Lisbon", "Porto"))]
    for k in range(1, 7):
        rig.turn(q(k))
    first, second = rig.summariser.of("overflow")
    assert f"{TITLE_MARK} …" in first and f"{TITLE_MARK} …" not in second  # asked once
    assert "3. TITLE: a title for the conversation" in first  # and said what it is
    assert rig.saved()["title"] == "Planning the Lisbon trip"
    assert rig.store.list()[0]["title"] == "Planning the Lisbon trip"
    mine = rig_factory(persona={"max_history_messages": 6}, memory=ROLLING)
    mine.summariser.replies = [fs.text(titled)]
    mine.turn(q(1))
    mine.conversation.rename("My own name")  # /rename
    for k in range(2, 5):
        mine.turn(q(k))
    assert f"{TITLE_MARK} …" not in mine.summariser.of("overflow")[0]
    assert mine.saved()["title"] == "My own name"


def test_a_title_the_user_gives_while_the_call_runs_is_kept(rig_factory: Any) -> None:
    titled = f"{MEMORY_MARK} fact\n{SUMMARY_MARK} a trip\n{TITLE_MARK} Planning the Lisbon trip"
    rig = rig_factory(persona={"max_history_messages": 6}, memory=ROLLING)
    rig.summariser.replies = [fs.text(titled)]
    elsewhere = app.make_store(rig.settings)  # `countbot sessions rename` in another terminal

    def rename_first(body: dict[str, Any]) -> fs.Reply:
        if body["messages"][0]["role"] != "system":  # the summary call, asking for a title
            elsewhere.rename(rig.sid, "My own name")
        return rig.summariser(body)

    rig.server.responder = rename_first
    for k in range(1, 5):
        rig.turn(q(k))
    (call,) = rig.summariser.of("overflow")
    assert f"{TITLE_MARK} …" in call  # the title was still the first question's when it began
    assert rig.saved()["title"] == "My own name"
    assert rig.saved()["rolling_summary"] == "a trip"  # the rest of the reply is written


def newest_that_fit(lines: list[str], cap: int) -> list[str]:
    """The last of `lines` whose text (each with its newline) fits in `cap` characters."""
    kept: list[str] = []
    used = 0
    for line in reversed(lines):
        if used + len(line) + 1 > cap:
            break
        kept.insert(0, line)
        used += len(line) + 1
    return kept


def test_a_backlog_past_its_cap_keeps_the_newest_messages(rig_factory: Any) -> None:
    rig = rig_factory(
        provider={"context_window": 200_000}, persona={"max_history_messages": 120}, memory=ROLLING
    )
    rig.summariser.replies = [fs.text(f"{MEMORY_MARK} fact {i}") for i in range(8)]  # no summary
    filler = " ".join(f"w{i}" for i in range(100))  # a message is cut at 300 characters
    for k in range(1, 51):
        rig.turn(f"{q(k)} {filler}")
    rig.conversation.compact()  # /compact: a long session in several calls of one run
    rig.turn(q(51))
    rig.turn(q(52))
    rig.conversation.compact()  # a later run: the backlog from what the session archived
    calls = rig.summariser.of("overflow")
    assert len(calls) >= 4
    shown = dialogue_lines(calls[0])
    for call in calls[1:]:
        assert backlog_lines(call) == newest_that_fit(shown, BACKLOG_CHARS)
        shown += dialogue_lines(call)
    assert sum(len(line) + 1 for line in shown[:-4]) > 2 * BACKLOG_CHARS  # well past the cap
