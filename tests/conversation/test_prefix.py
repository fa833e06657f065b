"""Issue 11: a request prefix that stays the same from turn to turn.

The prefix property read from what the loopback server received (recall on, overflow steps),
and the window's rules at odd and even sizes (conversation/context.py, conversation/budget.py).
"""

from __future__ import annotations

import random
from pathlib import Path
from typing import Any

import pytest
from prefix import extends, stats

from countbot_cli.conversation.budget import TokenBudget
from countbot_cli.conversation.context import history_window, sendable, window_step
from countbot_cli.conversation.tokens import TokenCounter
from countbot_cli.messages import STATUS_FAILED, STATUS_INTERRUPTED, Message, ToolCall

TOPICS = ("redis", "postgres", "ansible", "backoff", "logging", "pytest", "docker", "nginx")


def test_requests_extend_the_previous_one_with_recall_and_overflow_steps(
    rig_factory: Any,
) -> None:
    memory = {"auto_memory": False, "inject": "relevant", "recall_lines": 1}  # a line a turn
    rig = rig_factory(persona={"max_history_messages": 50}, memory=memory)
    for topic in TOPICS:
        rig.keeper.memory.add(f"the {topic} setting we chose is number {len(topic)}", "user")
    turns = 70
    for k in range(1, turns + 1):
        rig.turn(f"turn {k}: what about {TOPICS[k % len(TOPICS)]} here?")
    bodies = rig.chat_bodies()
    assert len(bodies) == turns
    # what happened is what the issue is about: recall of different lines, overflow steps
    recalled = {b["messages"][-1]["content"].split("\n")[1] for b in bodies}
    assert len(recalled) >= len(TOPICS)
    assert len(rig.summariser.of("overflow")) >= 2
    # the stable head: the system prompt changes only at a step (the rolling summary), one
    # version a step, and recalled memory is never in it
    heads = [b["messages"][0]["content"] for b in bodies]
    steps = [i for i in range(1, turns) if not extends(bodies[i - 1], bodies[i])]
    assert [i for i in range(1, turns) if heads[i] != heads[i - 1]] == steps
    assert len(set(heads)) == len(rig.summariser.of("overflow")) + 1
    assert not any("setting we chose" in h for h in heads)
    ext, pairs, share = stats(bodies)
    assert ext >= 0.9 * pairs, (ext, pairs)
    assert share >= 0.8, share
    for prev, cur in zip(bodies, bodies[1:], strict=False):
        history = cur["messages"][1:-1]
        assert len(history) <= 50
        if extends(prev, cur):
            # only the volatile tail differs: the previous message comes back clean
            n = len(prev["messages"])
            assert cur["messages"][n - 1]["content"].startswith("turn ")
            assert prev["messages"][-1]["content"].endswith(cur["messages"][n - 1]["content"])
        else:  # a step: the window starts later, on a user message
            assert history[0]["role"] == "user"
            assert history[0] != prev["messages"][1]
    saved = rig.saved()
    everything = saved["archived"] + saved["messages"]
    assert [m["content"] for m in everything if m["role"] == "user"] == [
        f"turn {k}: what about {TOPICS[k % len(TOPICS)]} here?" for k in range(1, turns + 1)
    ]


# ---- the window's rules ----


def _random_history(rng: random.Random, n: int, *, alternate: bool) -> list[Message]:
    """A stored history: turns that succeeded, failed or were interrupted; with
    `alternate=False` also runs of one role (hand-edited or older session files)."""
    out: list[Message] = []
    while len(out) < n:
        roll = rng.random()
        if not alternate and roll < 0.2:
            out.append(Message(role=rng.choice(("user", "assistant")), content=f"m{len(out)}"))
        elif roll < 0.3:
            out.append(Message(role="user", content=f"m{len(out)}", status=STATUS_FAILED))
        elif roll < 0.4:
            out.append(Message(role="user", content=f"m{len(out)}", status=STATUS_INTERRUPTED))
        else:
            out.append(Message(role="user", content=f"m{len(out)}"))
            out.append(Message(role="assistant", content=f"m{len(out)}"))
    return out


@pytest.mark.parametrize("max_history", [1, 2, 3, 4, 5, 6, 7, 10, 11, 50, 51])
@pytest.mark.parametrize("alternate", [True, False])
def test_window_rules_at_odd_and_even_sizes(max_history: int, alternate: bool) -> None:
    rng = random.Random(max_history * 7 + alternate)
    step = window_step(max_history)
    assert 1 <= step <= max_history
    for _ in range(30):
        history = _random_history(rng, rng.randint(0, 3 * max_history + 8), alternate=alternate)
        usable = sendable(history)
        window = history_window(history, max_history)
        assert len(window) <= max_history
        assert window == usable[len(usable) - len(window) :]  # the newest, in order
        if window:
            assert window[0].role == "user"  # never starts on an assistant message
        # it keeps at least what the step allows: the newest max_history - step + 1 messages,
        # from their first user message on
        tail = usable[max(0, len(usable) - (max_history - step + 1)) :]
        first_user = next((i for i, m in enumerate(tail) if m.role == "user"), len(tail))
        assert len(window) >= len(tail) - first_user


def test_the_window_moves_in_steps() -> None:
    """Appended turn by turn, the window's start stays put between steps: each request's
    window is the previous one plus the new messages, except once a step."""
    for max_history in (6, 7, 10, 50):
        step = window_step(max_history)
        history: list[Message] = []
        prev: list[Message] | None = None
        moves = 0
        for k in range(300):
            history += [Message(role="user", content=f"q{k}"), Message("assistant", f"a{k}")]
            window = history_window(history, max_history)
            if prev is not None and window[: len(prev)] != prev:
                moves += 1
                assert window[0].role == "user"
            prev = window
        assert moves <= 600 // step + 1, (max_history, moves)
        assert moves >= 600 // max_history - 1


def test_a_window_starting_on_assistant_messages_moves_to_the_next_user() -> None:
    hist = [Message("assistant", "orphan"), Message("assistant", "orphan 2")]
    hist += [Message("user", "q"), Message("assistant", "a")]
    assert [m.content for m in history_window(hist, 10)] == ["q", "a"]
    assert [m.content for m in history_window(hist, 0)] == ["q", "a"]
    odd = [Message("user" if i % 2 == 0 else "assistant", f"m{i}") for i in range(9)]
    for max_history in (3, 5, 7):
        window = history_window(odd, max_history)
        assert window and window[0].role == "user", max_history


def _tool_window(rng: random.Random, n: int) -> list[Message]:
    out: list[Message] = []
    while len(out) < n:
        out.append(Message("user", "question " * rng.randint(1, 40)))
        for r in range(rng.randint(0, 2)):
            calls = [ToolCall(id=f"c{len(out)}_{i}", name="t", arguments="{}") for i in range(2)]
            out.append(Message("assistant", "", tool_calls=calls))
            out += [
                Message("tool", "result " * rng.randint(1, 30), tool_call_id=c.id, name="t")
                for c in calls
            ]
            del r
        out.append(Message("assistant", "answer " * rng.randint(1, 40)))
    return out


@pytest.mark.parametrize("step", [1, 3, 4, 5, 24])
def test_the_token_budget_trims_in_blocks_and_keeps_tool_calls_with_results(step: int) -> None:
    rng = random.Random(step)
    counter = TokenCounter("gpt-4o")
    fixed = [{"role": "system", "content": "system"}, {"role": "user", "content": "next"}]
    for context_window in (600, 1200, 3000):
        budget = TokenBudget(counter, context_window=context_window, reserve=50, step=step)
        for _ in range(10):
            window = _tool_window(rng, rng.randint(5, 80))
            kept = budget(window, fixed)
            assert kept == window[len(window) - len(kept) :]
            if not kept:
                continue
            assert kept[0].role == "user"
            calls = {c.id for m in kept for c in m.tool_calls or ()}
            results = {m.tool_call_id for m in kept if m.role == "tool"}
            assert results <= calls and calls <= results
            assert budget.costs(kept) <= budget.history_budget(fixed)


def test_tools_are_offered_in_a_stable_sorted_order(tmp_path: Path) -> None:
    from cbenv import make_cb

    from countbot_cli import app
    from countbot_cli.config.settings import load_settings

    cb = make_cb(tmp_path, "http://127.0.0.1:9/v1", tools={"enabled": True})
    settings = load_settings(config_path=cb.config_file, env=cb.env, cwd=cb.work)
    provider = app.make_provider(settings)
    engine = app.build_engine(settings, provider, None, tools_enabled=True, yes=False)
    assert engine.tools is not None
    # whatever order the registry holds them in (MCP servers answer when they answer)
    engine.tools._specs = dict(reversed(list(engine.tools._specs.items())))
    registered = [s["function"]["name"] for s in engine.tools.schemas()]
    offered = [s["function"]["name"] for s in engine.tool_schemas()]
    assert registered != sorted(registered)
    assert offered == sorted(registered)
    provider.close()
