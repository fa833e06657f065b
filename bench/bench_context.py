"""Benchmark of the history window and memory upkeep (SPEC §5). Targets in brackets.

1. Summary calls per 100 turns at `max_history_messages: 50` [<= 10], against CountBot's design
   (one overflow call per turn once the window is full), and the tokens sent to the summariser
   per turn, both ways. Real conversation (`app.build_conversation`), real session store, real HTTP to the
   loopback test server; messages of realistic, varied length.
2. Building the messages array of one turn for a 10,000-message session with warm caches
   [<= 15 ms]: `Engine.context_for` (recall from a 1,000-entry MEMORY.md, system prompt, history
   window, token budget) + `api_messages()`, with `max_history_messages` 50 and 0 (unlimited:
   then the token budget trims the 10,000 messages to gpt-4o's 128k window).

Run: .venv/bin/python bench/bench_context.py [--turns N] [--runs N]
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
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "tests" / "helpers"))

import fakeserver as fs  # noqa: E402
import yaml  # noqa: E402

from countbot_cli import app  # noqa: E402
from countbot_cli.config.settings import Settings, load_settings  # noqa: E402
from countbot_cli.conversation.sessions.session import new_session  # noqa: E402
from countbot_cli.conversation.tokens import TokenCounter  # noqa: E402
from countbot_cli.conversation.view import SilentView  # noqa: E402
from countbot_cli.memory.digest import summary_line  # noqa: E402
from countbot_cli.memory.store import MemoryStore  # noqa: E402
from countbot_cli.memory.summary_prompts import overflow_summary_prompt  # noqa: E402
from countbot_cli.messages import Message  # noqa: E402

MAX_HISTORY = 50
SENTENCES = (
    "We moved the staging database to PostgreSQL 16 last week.",
    "The deploy script lives in ops/deploy.sh and needs Ansible 9.",
    "用户希望所有日志都保留 30 天，并且每天凌晨三点轮换。",
    "Here is the function with the retry loop fixed and a test for the timeout case.",
    "Use exponential backoff capped at eight seconds, with jitter.",
    "The API key is read from the environment, never from the config file.",
    "我们决定用 Redis 7 做缓存，端口 6380。",
    "Can you explain why the benchmark regressed after the last merge?",
)


def text_of(rng: random.Random, low: int, high: int) -> str:
    n = rng.randint(low, high)
    return " ".join(rng.choice(SENTENCES) for _ in range(n))


def settings_for(root: Path, base_url: str, **config: Any) -> Settings:
    cfg = {
        "default_provider": "bench",
        "providers": {
            "bench": {
                "type": "openai",
                "api_base": base_url,
                "api_key": "sk-bench",
                "model": "gpt-4o",
            }
        },
        "tools": {"enabled": False},
        **config,
    }
    (root / "config.yaml").write_text(yaml.safe_dump(cfg), encoding="utf-8")
    env = {"HOME": str(root), "XDG_CONFIG_HOME": str(root / ".config")}
    return load_settings(config_path=root / "config.yaml", env=env, cwd=root)


# ---- 1. summary calls ----


def summary_calls(turns: int) -> None:
    rng = random.Random(7)
    answers = [text_of(rng, 2, 12) for _ in range(turns)]
    questions = [text_of(rng, 1, 3) for _ in range(turns)]
    prompts: list[str] = []

    def responder(body: dict[str, Any]) -> fs.Reply:
        msgs = body["messages"]
        if msgs[0]["role"] == "system":
            k = int(msgs[-1]["content"].split(":", 1)[0].split()[-1])
            return fs.text(answers[k], chunk_size=200)
        prompts.append(msgs[0]["content"])
        return fs.text(f"fact {len(prompts)}：用户使用 PostgreSQL 16；部署用 Ansible 9")

    counter = TokenCounter("gpt-4o")
    quiet = contextlib.redirect_stderr(io.StringIO())  # the server logs clients' closed sockets
    with quiet, tempfile.TemporaryDirectory() as tmp, fs.FakeServer(responder=responder) as server:
        settings = settings_for(
            Path(tmp),
            server.base_url,
            persona={"max_history_messages": MAX_HISTORY},
            memory={"auto_memory": False},
        )
        provider = app.make_provider(settings)
        conversation = app.build_conversation(  # turns and memory upkeep as the REPL runs them
            settings,
            app.make_store(settings),
            provider_for=lambda _settings: provider,
            tools_enabled=False,
            yes=False,
        )
        t0 = time.perf_counter()
        for k in range(turns):
            conversation.send(f"turn {k}: {questions[k]}", SilentView())
        elapsed = time.perf_counter() - t0
        provider.close()
    ours_tokens = sum(counter.count_text(p) for p in prompts)
    # CountBot's design: once the window is full (its window counts the current message, so
    # more than 50 stored messages), one call per turn over the 2 messages that just left it.
    full_from = MAX_HISTORY // 2 + 1
    theirs_calls = max(0, turns - full_from + 1)
    theirs_tokens = 0
    for k in range(full_from, turns + 1):
        left = k - full_from  # the exchange that left the window after turn k
        pair = [
            Message(role="user", content=f"turn {left}: {questions[left]}"),
            Message(role="assistant", content=answers[left]),
        ]
        lines = [ln for m in pair if (ln := summary_line(m))]
        theirs_tokens += counter.count_text(overflow_summary_prompt("\n".join(lines), "en"))
    per100 = 100 / turns
    print(f"summary calls per 100 turns at max_history_messages {MAX_HISTORY}:")
    print(f"  countbot (ours) : {len(prompts) * per100:6.1f} calls   [<= 10]")
    print(
        f"  CountBot design : {theirs_calls * per100:6.1f} calls   (one a turn once the window is full)"
    )
    print("tokens sent to the summariser per turn:")
    print(f"  countbot (ours) : {ours_tokens / turns:8.1f}")
    print(
        f"  CountBot design : {theirs_tokens / turns:8.1f}   (a prompt for the 2 messages that just left, every turn)"
    )
    print(f"  ({turns} real turns over loopback HTTP took {elapsed:.2f} s)")


# ---- 2. the messages array of a 10,000-message session ----


def build_time(runs: int, max_history: int) -> tuple[float, int]:
    rng = random.Random(11)
    with tempfile.TemporaryDirectory() as tmp:
        settings = settings_for(
            Path(tmp), "http://127.0.0.1:9/v1", persona={"max_history_messages": max_history}
        )
        memory = MemoryStore(settings.memory.file)
        memory.add_many([f"note {i}: {text_of(rng, 1, 2)}" for i in range(1000)], "user")
        provider = app.make_provider(settings)
        engine = app.build_engine(settings, provider, None, tools_enabled=True, yes=False)
        session = new_session(provider="bench", model="gpt-4o")
        session.messages = [
            Message(role="user" if i % 2 == 0 else "assistant", content=text_of(rng, 1, 6))
            for i in range(10_000)
        ]
        user = Message(role="user", content="what did we decide about the Redis port?")
        sent = len(engine.context_for(session, user).api_messages())  # warm-up: fills caches
        times = []
        for _ in range(runs):
            t0 = time.perf_counter()
            engine.context_for(session, user).api_messages()
            times.append(time.perf_counter() - t0)
        provider.close()
    return statistics.median(times), sent


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--turns", type=int, default=100)
    ap.add_argument("--runs", type=int, default=30)
    args = ap.parse_args()
    summary_calls(args.turns)
    print("building the messages array of a 10,000-message session (warm, median):")
    for max_history in (MAX_HISTORY, 0):
        seconds, sent = build_time(args.runs, max_history)
        label = f"max_history_messages {max_history:>2}"
        print(f"  {label}: {seconds * 1000:6.2f} ms  ({sent} messages sent)   [<= 15 ms]")
    return 0


if __name__ == "__main__":
    sys.exit(main())
