"""Benchmark of the rolling session summary (issue 22 point 1): what it costs in calls and in
the cached prefix.

bench_prefix.py's scripted conversation (300 turns by default) at the default window
(`max_history_messages: 50`), `memory.inject: relevant`, through the real conversation, store
and HTTP to the loopback server, which records every request. The summariser answers the
rolling prompt with a memory line and a summary that only grows (the summary so far plus a
sentence a step), so the bound on its length is what keeps it short. Printed, side by side with
the rolling summary off (`memory.session_summary: false`, today's overflow-only behaviour):

- summary calls per 100 turns: the steps' (overflow + rolling summary; they share one call a
  step), automatic memory's, and both together [<= 12] (a step's call also distils the newer
  messages automatic memory would have taken, memory/coverage.py, so in a long session
  automatic memory calls only before the first step);
- the average share of each request's tokens that is a prefix shared with the previous request
  (gpt-4o's encoding) [>= 85 %];
- the rolling summary's longest length in characters (bounded by rolling.ROLLING_CHARS).

Run: .venv/bin/python bench/bench_rolling.py [--turns N]
"""

from __future__ import annotations

import argparse
import contextlib
import io
import json
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "tests" / "helpers"))
sys.path.insert(0, str(ROOT / "bench"))

import bench_prefix  # noqa: E402
import fakeserver as fs  # noqa: E402
import prefix  # noqa: E402

from countbot_cli import app  # noqa: E402
from countbot_cli.conversation.tokens import TokenCounter  # noqa: E402
from countbot_cli.conversation.view import SilentView  # noqa: E402
from countbot_cli.memory.rolling import ROLLING_CHARS  # noqa: E402
from countbot_cli.memory.store import MemoryStore  # noqa: E402
from countbot_cli.memory.summary_prompts import conversation_memory_prompt  # noqa: E402

AUTO_MARK = conversation_memory_prompt("", "en").split("\n")[0]


def run(turns: int, rolling: bool) -> dict[str, Any]:
    questions, answers = bench_prefix.script(turns)
    calls = {"step": 0, "auto": 0}
    lengths: list[int] = []

    def responder(body: dict[str, Any]) -> fs.Reply:
        answer = bench_prefix.turn_answer(body, answers)
        if answer is not None:
            return answer
        prompt = body["messages"][0]["content"]
        if prompt.startswith(AUTO_MARK):
            calls["auto"] += 1
            return fs.text(f"auto fact {calls['auto']}：用户使用 PostgreSQL 16")
        calls["step"] += 1
        fact = f"fact {calls['step']}：部署用 Ansible 9"
        return fs.text(bench_prefix.summary_reply(prompt, fact, calls["step"]))

    quiet = contextlib.redirect_stderr(io.StringIO())
    with quiet, tempfile.TemporaryDirectory() as tmp, fs.FakeServer(responder=responder) as server:
        root = Path(tmp)
        settings = bench_prefix.settings_for(root, server.base_url, rolling=rolling)
        MemoryStore(settings.memory.file).add_many(list(bench_prefix.TOPICS.values()), "user")
        provider = app.make_provider(settings)
        store = app.make_store(settings)
        conversation = app.build_conversation(
            settings, store, provider_for=lambda _s: provider, tools_enabled=False, yes=False
        )
        for k in range(turns):
            result = conversation.send(questions[k], SilentView())
            assert result.status == "ok", result.error
            if result.session_id is not None:
                saved = json.loads(store.path(result.session_id).read_text(encoding="utf-8"))
                lengths.append(len(saved.get("rolling_summary", "")))
        provider.close()
        bodies = prefix.chat_bodies(server.chat_bodies())
    return {"bodies": bodies, "calls": calls, "longest": max(lengths or [0])}


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--turns", type=int, default=300)
    args = ap.parse_args()
    count = TokenCounter("gpt-4o").count_text
    print(
        f"{args.turns} turns, max_history_messages {bench_prefix.MAX_HISTORY}, memory.inject "
        "relevant (requests as the loopback server received them):"
    )
    print(
        f"  {'':28} {'step calls/100 turns':>21} {'auto memory/100':>16} {'total/100':>10} "
        f"{'shared prefix':>14} {'longest summary':>16}"
    )
    for label, rolling in (("rolling summary (this)", True), ("overflow only (before)", False)):
        t0 = time.perf_counter()
        got = run(args.turns, rolling)
        _ext, _pairs, share = prefix.stats(got["bodies"], count)
        per = 100 / args.turns
        step, auto = got["calls"]["step"] * per, got["calls"]["auto"] * per
        print(
            f"  {label:28} {step:>21.1f} {auto:>16.1f} {step + auto:>10.1f}"
            f" {100 * share:>13.1f}% {got['longest']:>10} chars   ({time.perf_counter() - t0:.1f} s)"
        )
    print(
        "  targets: summary calls in total (automatic memory included) <= 12 per 100 turns, "
        f"shared prefix >= 85 %, summary <= {ROLLING_CHARS} chars"
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
