"""A tool loop's later requests fitted to the token budget again (conversation/round_fit.py):
this turn's oldest tool results, never the latest round's, are left out as few as needed; a
request that cannot fit is sent anyway; the engine fits each request after the first and keeps
the records whole; one notice a turn. End to end: tests/tools/test_tool_loop_window.py."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from cbenv import make_cb
from tools_env import words

from countbot_cli.config.settings import load_settings
from countbot_cli.conversation.budget import TokenBudget
from countbot_cli.conversation.engine import Engine
from countbot_cli.conversation.round_fit import RoundFit
from countbot_cli.conversation.sessions.session import new_session
from countbot_cli.conversation.tokens import TokenCounter
from countbot_cli.conversation.view import NullView
from countbot_cli.messages import Message, ToolCall
from countbot_cli.provider.fake import Reply, ScriptedProvider, tool_call
from countbot_cli.tools.registry import ToolContext, ToolRegistry, default_tools

MARKER = "was left out to fit the context window. Call the tool again if you need it."
SYSTEM = {"role": "system", "content": "You are a test assistant."}
QUESTION = {"role": "user", "content": "read them all"}


def history(n: int) -> list[Message]:
    return [
        Message(role="user" if i % 2 == 0 else "assistant", content=f"{i}: " + words(60))
        for i in range(n)
    ]


def call(i: int, arguments: str = '{"path": "f.txt"}') -> dict[str, Any]:
    return Message(
        role="assistant", content="", tool_calls=[ToolCall(f"c{i}", "read_file", arguments)]
    ).to_api()


def result(i: int, n_words: int) -> dict[str, Any]:
    content = f"result {i}: " + words(n_words)
    return Message(role="tool", content=content, tool_call_id=f"c{i}", name="read_file").to_api()


class Notices(NullView):
    def __init__(self) -> None:
        self.notices: list[str] = []

    def notice(self, text: str) -> None:
        self.notices.append(text)


def test_the_oldest_results_are_left_out_as_few_as_needed_never_the_latest() -> None:
    counter = TokenCounter("gpt-4o")
    results = [result(i, 400) for i in range(1, 5)]
    room = counter.count_messages([SYSTEM, QUESTION, *(call(i) for i in (1, 2, 3)), *results[:3]])
    budget = TokenBudget(counter, context_window=int((room + 100) / 0.9) + 1, reserve=0)
    fit = RoundFit(budget, [], [SYSTEM, QUESTION], [])
    view = Notices()
    sent = []
    for i, r in enumerate(results, 1):
        fit.add_round(call(i), [r])
        sent.append(fit.next_request(view))
    assert [m["content"] for m in sent[2][3::2]] == [r["content"] for r in results[:3]]
    last = [m["content"] for m in sent[3][3::2]]  # round 4: one result had to go, the oldest
    assert MARKER in last[0] and f"({len(results[0]['content']):,} characters)" in last[0]
    assert last[1:] == [r["content"] for r in results[1:]]
    assert counter.count_messages(sent[3]) <= budget.limit
    assert view.notices == [
        "earlier tool output left out to fit the "
        f"{budget.context_window:,}-token context window during tool calls"
    ]
    assert all(MARKER not in r["content"] for r in results)  # what it was handed is unchanged
    assert sent[2][3]["content"] == results[0]["content"]  # and so are the requests sent


def test_a_request_that_cannot_fit_is_sent_with_the_latest_round_whole() -> None:
    counter = TokenCounter("gpt-4o")
    budget = TokenBudget(counter, context_window=1000, reserve=100)
    fit = RoundFit(budget, history(4), [SYSTEM, *(m.to_api() for m in history(4)), QUESTION], [])
    fit.add_round(call(1), [result(1, 300)])
    fit.add_round(call(2), [result(2, 2000)])  # alone over the budget
    sent = fit.next_request(Notices())
    assert [m["role"] for m in sent] == ["system", "user", "assistant", "tool", "assistant", "tool"]
    assert MARKER in sent[3]["content"] and sent[5] == result(2, 2000)
    assert counter.count_messages(sent) > budget.limit  # the provider's refusal will say


def test_without_a_budget_the_request_only_grows() -> None:
    first = [SYSTEM, *(m.to_api() for m in history(2)), QUESTION]
    fit = RoundFit(None, history(2), first, [])
    fit.add_round(call(1), [result(1, 5000)])
    assert fit.next_request(Notices()) == [*first, call(1), result(1, 5000)]


def test_the_engine_fits_each_later_request_and_keeps_the_records_whole(tmp_path: Path) -> None:
    cb = make_cb(tmp_path, "http://127.0.0.1:9/v1")
    settings = load_settings(config_path=cb.config_file, env=cb.env, cwd=cb.work)
    for n in range(1, 4):
        (cb.work / f"f{n}.txt").write_text(words(600) + "\n", encoding="utf-8")
    ctx = ToolContext(workspace=settings.tools.workspace)
    provider = ScriptedProvider(model="gpt-4o")
    budget = TokenBudget(TokenCounter("gpt-4o"), context_window=3000, reserve=256)
    engine = Engine(
        settings=settings,
        provider=provider,
        tools=ToolRegistry(default_tools(ctx), ctx),
        budget=budget,
    )
    session = new_session(provider="fake", model="gpt-4o")
    session.messages = history(30)
    reads = [tool_call("read_file", {"path": f"f{n}.txt"}, f"c{n}") for n in range(1, 4)]
    provider.enqueue(*(Reply(tool_calls=[r]) for r in reads), "done")
    view = Notices()
    record = engine.run_turn(session, "read f1.txt, f2.txt and f3.txt", view)
    assert (record.status, record.answer) == ("ok", "done")
    requests = [r.messages for r in provider.requests]
    assert len(requests) == 4
    tools = engine.tool_schemas()
    for sent in requests:
        assert budget.fixed_tokens([*sent, *tools]) <= budget.limit
    assert len(requests[1]) - 4 < len(requests[0]) - 2  # history was left out after round 1
    assert MARKER in requests[3][-5]["content"]  # f1.txt, by the last request
    assert requests[3][-1]["content"] == record.tools[-1].result  # the latest, whole
    assert all(MARKER not in t.result and len(t.result) > 3000 for t in record.tools)
    assert len(view.notices) == 1 and view.notices[0].startswith("older messages left out")
