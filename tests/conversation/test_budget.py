"""The token budget (conversation/budget.py): system + tools + history + current message + reply reserve fit
the context window with a 10 % margin; trimming keeps the newest, starts on a user message and
never splits a tool-call unit; no encoding is loaded when the request obviously fits."""

from __future__ import annotations

import json
from dataclasses import replace
from datetime import date
from pathlib import Path
from typing import Any

import fakeserver as fs
import pytest
from cbenv import make_cb

from countbot_cli.config.settings import load_settings
from countbot_cli.conversation.budget import (
    RATIOS_FILE,
    RatioFile,
    TokenBudget,
    make_budget,
    reply_reserve,
)
from countbot_cli.conversation.context import build_context, window_step
from countbot_cli.conversation.sessions.session import new_session
from countbot_cli.conversation.sessions.store import SessionStore
from countbot_cli.conversation.tokens import EncodingLoader, TokenCounter
from countbot_cli.messages import Message, ToolCall
from countbot_cli.prompts import PromptFacts
from countbot_cli.provider.context_window_probe import ContextWindow

WORDS = [
    "alpha",
    "beta",
    "gamma",
    "delta",
    "epsilon",
    "zeta",
    "eta",
    "theta",
    "iota",
    "kappa",
    "lambda",
    "mu",
]


def chat(n: int, size: int = 40) -> list[Message]:
    out = []
    for i in range(n):
        text = f"message {i}: " + " ".join(WORDS[(i + j) % len(WORDS)] for j in range(size + i % 7))
        out.append(Message(role="user" if i % 2 == 0 else "assistant", content=text))
    return out


def fixed_for(system: str, user: str) -> list[dict[str, Any]]:
    return [{"role": "system", "content": system}, {"role": "user", "content": user}]


def expected_trim(
    budget: TokenBudget, window: list[Message], fixed: list[dict[str, Any]]
) -> list[Message]:
    """Brute force: the longest suffix that fits, then drop until it starts on a user message."""
    room = budget.limit - budget.fixed_tokens(fixed)
    for n in range(len(window), -1, -1):
        if budget.costs(window[len(window) - n :]) <= room:
            kept = window[len(window) - n :]
            break
    while kept and kept[0].role != "user":
        kept = kept[1:]
    return kept


@pytest.mark.parametrize("context_window", [1200, 2000, 3000, 5000])
def test_history_is_trimmed_to_fit_with_the_margin(context_window: int) -> None:
    counter = TokenCounter("gpt-4o")
    budget = TokenBudget(counter, context_window=context_window, reserve=200)
    assert budget.limit == int(context_window * 0.9) - 200
    window = chat(150)
    fixed = fixed_for("You are a test assistant. " * 20, "and now?")
    kept = budget(window, fixed)
    assert kept == expected_trim(budget, window, fixed)
    assert kept and kept[0].role == "user" and len(kept) < len(window)
    assert kept == window[len(window) - len(kept) :]  # the newest are kept
    request = [fixed[0], *(m.to_api() for m in kept), fixed[1]]
    assert counter.count_messages(request) + 200 <= context_window * 0.9
    # one more user-started unit would not have fitted
    bigger = window[len(window) - len(kept) - 2 :]
    assert counter.count_messages([fixed[0], *(m.to_api() for m in bigger), fixed[1]]) + 200 > (
        context_window * 0.9
    )


def test_tools_count_against_the_budget() -> None:
    counter = TokenCounter("gpt-4o")
    budget = TokenBudget(counter, context_window=3000, reserve=200)
    window = chat(60)
    fixed = fixed_for("system", "hi")
    tool = {
        "type": "function",
        "function": {
            "name": "read_file",
            "description": "Read a text file. " * 40,
            "parameters": {"type": "object", "properties": {"path": {"type": "string"}}},
        },
    }
    without = budget(window, fixed)
    with_tools = budget(window, [*fixed, tool])
    assert len(with_tools) < len(without)
    assert budget.costs(with_tools) + budget.fixed_tokens([*fixed, tool]) <= budget.limit


def test_tool_call_units_are_never_split() -> None:
    counter = TokenCounter("gpt-4o")
    calls = [ToolCall("c1", "read_file", '{"path": "a"}'), ToolCall("c2", "list_dir", "{}")]
    window = [
        *chat(4),
        Message(role="user", content="read a please " + "word " * 30),
        Message(role="assistant", content="", tool_calls=calls),
        Message(
            role="tool", content="file a " + "data " * 200, tool_call_id="c1", name="read_file"
        ),
        Message(role="tool", content="x y z", tool_call_id="c2", name="list_dir"),
        Message(role="assistant", content="done " * 30),
        Message(role="user", content="thanks " * 20),
        Message(role="assistant", content="welcome " * 20),
    ]
    fixed = fixed_for("system", "next")
    base = TokenBudget(counter, context_window=100_000, reserve=0)
    tail_cost = base.costs(window[-3:])  # the answer after the tools, and the last exchange
    room = base.fixed_tokens(fixed) + tail_cost + 5  # the walk stops inside the tool unit
    budget = TokenBudget(counter, context_window=int(room / 0.9) + 1, reserve=0)
    kept = budget(window, fixed)
    assert kept == window[-2:]  # the orphan answer and the tool unit are dropped together
    assert not any(m.role == "tool" for m in kept)
    roomy = TokenBudget(counter, context_window=100_000, reserve=0)
    assert roomy(window, fixed) == window


def test_nothing_fits_gives_an_empty_window() -> None:
    budget = TokenBudget(TokenCounter("gpt-4o"), context_window=300, reserve=200)
    assert budget(chat(10), fixed_for("x " * 100, "y")) == []


def test_an_obvious_fit_loads_no_encoding(tmp_path: Path) -> None:
    loader = EncodingLoader(data_dir=tmp_path / "none", cache_dir=tmp_path / "none")
    counter = TokenCounter("gpt-4o", loader=loader)
    budget = TokenBudget(counter, context_window=128_000, reserve=4096)
    window = chat(40)
    assert budget(window, fixed_for("system", "hi")) == window
    assert not loader.is_loaded("o200k_base")
    small = TokenBudget(counter, context_window=2000, reserve=100)
    kept = small(window, fixed_for("system", "hi"))  # must count: the estimate is used
    assert loader.is_loaded("o200k_base") and 0 < len(kept) < len(window)
    assert kept[0].role == "user"


def test_the_cheap_bound_counts_a_tool_loops_calls_in_the_fixed_part(tmp_path: Path) -> None:
    """A tool loop's later requests carry this turn's calls as fixed (conversation/round_fit.py):
    their arguments count in the bound that spares the count."""
    loader = EncodingLoader(data_dir=tmp_path / "none", cache_dir=tmp_path / "none")
    budget = TokenBudget(TokenCounter("gpt-4o", loader=loader), context_window=8000, reserve=200)
    window = chat(6)

    def calling(arguments: str) -> list[dict[str, Any]]:
        call = Message(role="assistant", content="", tool_calls=[ToolCall("c1", "t", arguments)])
        return [*fixed_for("system", "hi"), call.to_api()]

    small = calling('{"path": "a.txt"}')
    assert budget(window, small) == window and budget.overflow(small) == 0
    assert not loader.is_loaded("o200k_base")  # proved without counting
    big = calling('{"content": "' + "x " * 20_000 + '"}')  # write_file with 20,000 words
    assert budget(window, big) == [] and budget.overflow(big) > 0


def test_calibration_invalidates_memoised_counts() -> None:
    counter = TokenCounter("deepseek-chat")  # not OpenAI: counts scale with the learned ratio
    budget = TokenBudget(counter, context_window=4000, reserve=100)
    window = chat(60)
    fixed = fixed_for("system", "hi")
    before = budget(window, fixed)
    counter.calibrate(1000, 2000)  # the provider counts twice as many tokens
    after = budget(window, fixed)
    assert len(after) < len(before)
    assert budget.costs(after) + budget.fixed_tokens(fixed) <= budget.limit


def test_make_budget_reads_the_settings(tmp_path: Path) -> None:
    cb = make_cb(
        tmp_path, "http://127.0.0.1:9/v1", provider={"context_window": 5000}, max_tokens=700
    )
    settings = load_settings(config_path=cb.config_file, env=cb.env, cwd=cb.work)
    budget = make_budget(settings, TokenCounter(settings.provider.model))
    assert isinstance(budget, TokenBudget)
    assert (budget.context_window, budget.reserve, budget.limit) == (5000, 700, 3800)
    unset = replace(
        settings, max_tokens=None, provider=replace(settings.provider, context_window=None)
    )
    b2 = make_budget(unset, TokenCounter("gpt-4o"))
    assert isinstance(b2, TokenBudget)
    assert (b2.context_window, b2.reserve) == (128_000, 4096)
    assert reply_reserve(None, 8192) == 1024 and reply_reserve(0, 8192) == 1024


def test_ask_trims_an_overflowing_history_end_to_end(tmp_path: Path) -> None:
    """`countbot ask -s` on a stored session far larger than a small context_window."""
    with fs.FakeServer() as server:
        server.add(fs.text("ok"))
        cb = make_cb(
            tmp_path,
            server.base_url,
            provider={"context_window": 3000},
            max_tokens=300,
            persona={"max_history_messages": 0},
            memory={"auto_memory": False, "inject": "off"},
        )
        store = SessionStore(cb.sessions_dir)
        session = new_session(provider="test", model="test-model")
        session.messages = chat(80, size=60)
        store.create(session)
        proc = cb.invoke("ask", "-s", session.id, "what next?")
        assert proc.returncode == 0, proc.stderr
        body = server.chat_bodies()[0]
    msgs = body["messages"]
    history = msgs[1:-1]
    assert history and history[0]["role"] == "user"
    stored = [m.to_api() for m in session.messages]
    assert history == stored[len(stored) - len(history) :]
    counter = TokenCounter("test-model")
    assert counter.count_messages(msgs) + 300 <= 3000 * 0.9
    # trimmed in the window's blocks (window_step messages, on a user message): the oldest
    # block start that fits, so one block more would not fit
    step = window_step(0)
    start = len(stored) - len(history)
    assert start % step in (0, 1)  # a block start, moved on to the user message after it
    one_more = stored[start - step :]
    assert counter.count_messages([msgs[0], *one_more, msgs[-1]]) + 300 > 3000 * 0.9


def test_ten_thousand_messages_are_fast_when_warm(monkeypatch: pytest.MonkeyPatch) -> None:
    facts = PromptFacts("countbot", "user", "", "en", "/tmp", date(2026, 1, 1), False)
    history = chat(10_000, size=20)
    counter = TokenCounter("gpt-4o")
    budget = TokenBudget(counter, context_window=128_000, reserve=4096)
    user = Message(role="user", content="next")

    def build() -> list[dict[str, Any]]:
        ctx = build_context(
            facts=facts, summary="", history=history, user=user, max_history=0, budget=budget
        )
        return ctx.api_messages()

    first = build()
    assert 1000 < len(first) < 10_000
    # warm: counted, not timed (bench/bench_context.py holds the figure, <= 15 ms): nothing is
    # tokenized again and a handful of messages are looked up, not the 10,000
    tokenized: list[str] = []
    looked_up: list[Any] = []
    real_text, real_raw = counter._text, counter._raw_message
    monkeypatch.setattr(counter, "_text", lambda t: tokenized.append(t) or real_text(t))
    monkeypatch.setattr(counter, "_raw_message", lambda m: looked_up.append(m) or real_raw(m))
    for _ in range(5):
        assert build() == first
    assert tokenized == [] and len(looked_up) <= 5 * 4, len(looked_up)
    assert json.dumps(first[-1]) == json.dumps({"role": "user", "content": "next"})


# ---- calibration against the provider's prompt_tokens ----


def test_observe_learns_the_ratio_and_the_next_process_starts_with_it(tmp_path: Path) -> None:
    ratios = RatioFile(tmp_path / RATIOS_FILE)
    # the bundled SmolLM2 counts a Chinese conversation at about 1.6 times cl100k's figure
    window = [
        Message(
            role="user" if i % 2 == 0 else "assistant", content=f"第{i}点：" + "数据库端口" * 60
        )
        for i in range(24)
    ]
    fixed = fixed_for("system prompt " * 20, "下一个问题")
    first = TokenBudget(TokenCounter("smollm2"), context_window=8192, reserve=200, ratios=ratios)
    assert first(window, fixed) == window  # uncalibrated, everything seems to fit
    sent = [*fixed[:1], *(m.to_api() for m in window), fixed[1]]
    ours = first.counter.count_messages(sent)
    assert ours + 200 <= 8192 * 0.9 < ours * 1.6 + 200  # ... but the model sees more
    first.observe(sent, None, int(ours * 1.6))
    assert first.counter.ratio == pytest.approx(1.6, rel=0.01)
    assert json.loads((tmp_path / RATIOS_FILE).read_text())["smollm2"] == pytest.approx(1.6, 0.01)
    # another `ask` process: a new counter and budget, seeded from the file
    again = TokenBudget(TokenCounter("smollm2"), context_window=8192, reserve=200, ratios=ratios)
    kept = again(window, fixed)
    assert 0 < len(kept) < len(window) and kept[0].role == "user"
    assert again.counter.ratio == pytest.approx(1.6, rel=0.01)
    assert again.costs(kept) + again.fixed_tokens(fixed) <= again.limit


def test_observe_ignores_what_it_cannot_learn_from(tmp_path: Path) -> None:
    path = tmp_path / RATIOS_FILE
    path.write_text("not json")
    budget = TokenBudget(
        TokenCounter("gpt-4o"), context_window=8192, reserve=200, ratios=RatioFile(path)
    )
    msgs = [{"role": "user", "content": "hello " * 100}]
    budget.observe(msgs, None, 0)  # nothing reported
    budget.observe([], None, 500)
    assert budget.counter.ratio == 1.0
    budget.observe(msgs, None, 5000)  # an OpenAI model: its counts are exact, nothing is kept
    assert path.read_text() == "not json"
    window = chat(4)
    assert budget(window, fixed_for("s", "u")) == window  # a bad file never breaks it
    assert RatioFile(path).load("gpt-4o") is None


def test_make_budget_keeps_ratios_for_the_data_dir_in_the_cache_folder(tmp_path: Path) -> None:
    cb = make_cb(tmp_path, "http://127.0.0.1:9/v1")
    settings = load_settings(config_path=cb.config_file, env=cb.env, cwd=cb.work)
    budget = make_budget(settings, TokenCounter("qwen-plus"))
    assert budget.ratios is not None
    assert budget.ratios.path == cb.derived(settings.data_dir, RATIOS_FILE)


def test_ask_learns_the_token_ratio_from_reported_usage(tmp_path: Path) -> None:
    with fs.FakeServer() as server:
        cb = make_cb(tmp_path, server.base_url, provider={"context_window": 2000})
        # the provider reports twice what we estimate for a request that fills the window
        server.responder = lambda body: fs.text(
            "ok",
            usage={"prompt_tokens": 1500, "completion_tokens": 1, "total_tokens": 1501},
        )
        assert cb.invoke("ask", "word " * 300).returncode == 0
        learned = cb.derived(cb.work, RATIOS_FILE)
        assert not (cb.work / RATIOS_FILE).exists()  # nothing derived in the data folder
        ratios = json.loads(learned.read_text(encoding="utf-8"))
        assert list(ratios) == ["test-model"] and ratios["test-model"] > 1.2
        # a short exchange far from the limit loads no tokenizer and learns nothing new
        server.responder = lambda body: fs.text(
            "ok", usage={"prompt_tokens": 40, "completion_tokens": 1, "total_tokens": 41}
        )
        before = learned.read_bytes()
        assert cb.invoke("ask", "--no-save", "hi").returncode == 0
        assert learned.read_bytes() == before


def test_a_window_the_server_reports_late_is_taken_at_the_next_turn() -> None:
    """The server's context window asked beside the first request
    (server_window.LateContextWindow): turns before its answer are budgeted against the assumed
    one, the turn after it against the reported one, with the reply reserve for it."""
    reported: list[ContextWindow | None] = [None]

    class Late:
        def value(self) -> ContextWindow | None:
            return reported[0]

        def after_request(self) -> None:
            pass

    budget = TokenBudget(
        TokenCounter("gpt-4o"), context_window=2000, reserve=250, late=Late(), source="assumed"
    )
    window, fixed = chat(150), fixed_for("system", "next")
    first = budget(window, fixed)
    assert len(first) < len(window) and not budget.reported  # the assumed 2,000 tokens
    reported[0] = ContextWindow(100_000, "the server's model list")
    assert budget(window, fixed) == window  # the reported 100,000
    assert budget.reported and budget.context_window == 100_000
    assert budget.source == "the server's model list"  # what /context says
    assert budget.reserve == reply_reserve(None, 100_000)
