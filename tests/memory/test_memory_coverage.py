"""Each message is distilled into MEMORY.md by exactly one summary call (memory/coverage.py):
the window step's call also takes the newer messages automatic memory would have taken, and
skips, for its memory line, what automatic memory already took; its rolling summary still gets
the whole block. Driven through the real conversation and the loopback server."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import fakeserver as fs
import pytest
from memory_rig import LEAVING, RigFactory, dialogue_lines, messages_of, q

from countbot_cli.memory.coverage import CURSOR_AUTO
from countbot_cli.memory.summary_prompts import MEMORY_MARK

KNOWN_HEAD = "Messages leaving the window that long-term memory already holds"


@pytest.fixture
def rig_factory(tmp_path: Path) -> Iterator[RigFactory]:
    factory = RigFactory(tmp_path)
    yield factory
    factory.close()


def distilled(calls: list[tuple[str, str, Any]]) -> list[str]:
    """The message lines each call was asked to distil into a memory line, all calls together:
    automatic memory's whole prompt, a step's block and newer messages (not the lines memory
    already holds, which it is shown for the summary only)."""
    return [ln for _kind, prompt, _body in calls for ln in dialogue_lines(prompt)]


def lines(turns: range) -> list[str]:
    return [f"{role.upper()}: {text}" for role, text in messages_of(turns)]


def test_every_message_is_distilled_by_exactly_one_call(rig_factory: Any) -> None:
    # a window of 6 steps by 4 messages (every 2 turns); automatic memory every 6 messages
    rig = rig_factory(persona={"max_history_messages": 6}, memory={"auto_messages": 6})
    for k in range(1, 31):
        rig.turn(q(k))
    calls = rig.summariser.calls
    kinds = [kind for kind, _, _ in calls]
    # automatic memory once, before the first step; after it the steps distil everything
    assert kinds == ["auto", *["overflow"] * 14], kinds
    done = distilled(calls)
    assert len(done) == len(set(done))  # nothing twice
    saved = rig.saved()
    cursor = saved["cursors"][CURSOR_AUTO]
    assert cursor == len(saved["archived"]) + len(saved["messages"])  # the last step took all
    assert sorted(done) == sorted(lines(range(1, 31)))  # and nothing skipped
    entries = rig.entries()
    assert len(entries) == len(calls) == len(set(entries))  # one line a call, no repeats


def test_the_step_summarises_the_whole_block_but_distils_only_what_memory_lacks(
    rig_factory: Any,
) -> None:
    rig = rig_factory(persona={"max_history_messages": 6}, memory={"auto_messages": 6})
    for k in range(1, 5):
        rig.turn(q(k))
    auto, step = rig.summariser.calls
    assert auto[0] == "auto" and dialogue_lines(auto[1]) == lines(range(1, 4))
    prompt = step[1]
    # turns 1-2 leave the window: the summary is shown them as memory already holding them,
    known = prompt.split(KNOWN_HEAD, 1)[1].split(LEAVING, 1)[0]
    assert [ln for ln in known.split("\n") if ln.startswith(("USER", "ASSIST"))] == lines(
        range(1, 3)
    )
    # and the memory line is asked of what automatic memory has not had: turn 4
    assert dialogue_lines(prompt) == lines(range(4, 5))
    assert MEMORY_MARK + " …" in prompt
    assert rig.saved()["cursors"][CURSOR_AUTO] == 8


def test_a_session_whose_steps_are_all_distilled_asks_for_no_memory_line(
    rig_factory: Any,
) -> None:
    """Without the rolling summary a step needs a call only for messages memory lacks."""
    rig = rig_factory(
        persona={"max_history_messages": 6},
        memory={"auto_messages": 2, "session_summary": False},
    )
    for k in range(1, 9):
        rig.turn(q(k))
    done = distilled(rig.summariser.calls)
    assert len(done) == len(set(done)) and sorted(done) == sorted(lines(range(1, 9)))
    # automatic memory takes each turn as it comes; a step (every other turn, before automatic
    # memory in the same upkeep) takes the one turn still new, and no block again
    kinds = [kind for kind, _, _ in rig.summariser.calls]
    assert kinds == ["auto", "auto", "auto", "overflow", "auto", "overflow", "auto", "overflow"]
    assert all(len(dialogue_lines(p)) == 2 for _, p, _ in rig.summariser.calls)
    assert len(rig.saved()["archived"]) == 12


def test_a_reply_without_its_memory_part_leaves_the_newer_messages_for_later(
    rig_factory: Any,
) -> None:
    rig = rig_factory(persona={"max_history_messages": 6}, memory={"auto_messages": 6})
    rig.summariser.replies = [fs.text("fact a: user likes tea"), fs.text("SUMMARY: only this")]
    for k in range(1, 5):
        rig.turn(q(k))
    # the step asked for turn 4's memory too, but the reply had only the summary: turn 4 is
    # not marked distilled (the block, turns 1-2, went to memory before, with turn 3)
    assert rig.saved()["cursors"][CURSOR_AUTO] == 6
    assert rig.saved()["rolling_summary"] == "only this"
    for k in range(5, 7):
        rig.turn(q(k))
    third = rig.summariser.calls[2][1]
    assert dialogue_lines(third) == lines(range(4, 7))  # so the next step takes it
    done = distilled(rig.summariser.calls[:1]) + distilled(rig.summariser.calls[2:])
    assert sorted(done) == sorted(lines(range(1, 7)))
