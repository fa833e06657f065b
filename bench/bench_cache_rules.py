"""Simulator of each provider's documented prompt-cache rule (issue 24 point 4), over the same
scripted conversation, today's layout beside the alternatives.

The conversation is bench_prefix.py's: 200 scripted turns at the default window (50 messages),
`memory.inject: relevant` with a MEMORY.md whose lines match most turns, overflow summaries and
automatic memory on, the real conversation against the loopback server, every request recorded.
Each request is read as a provider renders it for its cache (tests/helpers/prefix.py: system
message, tool definitions, then the messages, each as its JSON text) and counted in gpt-4o's
tokens. The rules, as their documentation states them (research/peers-2.md §3d):

- OpenAI: prompts of 1,024 tokens or more; a hit is the longest prefix shared with an earlier
  prompt, from 1,024 tokens in 128-token steps (idle expiry not modelled: the turns are back to
  back);
- DeepSeek (kv_cache guide): each request persists two cache prefix units, at the end of the
  user input (its whole prompt) and at the end of the model output (prompt + answer); a common
  prefix detected across requests is persisted as a unit too (usable from the next request
  on). A request hits the longest unit it *fully* matches. Units "at fixed token intervals" of
  long inputs are documented without their interval and left out (they would add hits to
  every layout alike);
- longest common prefix (llama.cpp's server, vLLM's prefix cache): the longest prefix shared
  with the previous request and its answer (the slot's KV cache).

Layouts: `today` (recalled memory lines in the current message only, never saved, so the next
request carries the message without them), `keep` (the lines, once sent, stay in that user
message for the rest of the conversation: every request extends the previous request and its
answer exactly), `keep new` (as `keep`, but a line a message of the window keeps already is not
sent again), both derived from today's requests, and `countbot`: the same conversation run for
real on the `deepseek` preset (context.py's keep layout), which should match `keep new`.
Printed per rule and layout: the share of prompt tokens read from the cache, the prompt tokens a
request carries on average (what keeping the lines costs), and the input cost of a request in
fresh-token equivalents at each provider's cached-token price ratio.

Run: .venv/bin/python bench/bench_cache_rules.py [--turns N]
"""

from __future__ import annotations

import argparse
import json
import sys
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any
from unittest import mock

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "bench"))
sys.path.insert(0, str(ROOT / "tests" / "helpers"))

import bench_prefix  # noqa: E402
import prefix  # noqa: E402
import yaml  # noqa: E402

from countbot_cli.conversation.tokens import TokenCounter  # noqa: E402
from countbot_cli.prompts import with_recalled_memory  # noqa: E402

Count = Callable[[str], int]
MIN_OPENAI, STEP_OPENAI = 1024, 128


def render(body: dict[str, Any]) -> str:
    return "".join(prefix.layout(body))


def answer_piece(text: str) -> str:
    """The answer as the next request carries it (an assistant message, prefix.layout's form)."""
    return json.dumps({"content": text, "role": "assistant"}, ensure_ascii=False, sort_keys=True)


def common(a: str, b: str) -> int:
    n, i = min(len(a), len(b)), 0
    while i < n and a[i] == b[i]:
        i += 1
    return i


def keep_layout(bodies: Sequence[dict[str, Any]], questions: Sequence[str]) -> list[dict[str, Any]]:
    """The same requests with every recalled line kept in its user message once sent: a history
    user message is replaced by the form it was sent in (its own request's last message)."""
    sent = {q: body["messages"][-1]["content"] for q, body in zip(questions, bodies, strict=False)}
    out = []
    for body in bodies:
        msgs = [
            {**m, "content": sent.get(m["content"], m["content"])} if m["role"] == "user" else m
            for m in body["messages"][:-1]
        ]
        out.append({**body, "messages": [*msgs, body["messages"][-1]]})
    return out


def recalled_lines(sent: str, question: str) -> list[str]:
    """The memory lines a message was sent with (prompts.with_recalled_memory's form)."""
    head = sent[: len(sent) - len(question)] if sent.endswith(question) else ""
    return [ln[2:] for ln in head.splitlines() if ln.startswith("- ")]


def keep_new_layout(
    bodies: Sequence[dict[str, Any]], questions: Sequence[str], language: str = "en"
) -> list[dict[str, Any]]:
    """`keep`, sending only the recalled lines not already kept in a message of the window."""
    kept: dict[str, str] = {}  # question -> the form it was sent (and is kept) in
    lines_of: dict[str, list[str]] = {}
    out = []
    for q, body in zip(questions, bodies, strict=False):
        history = body["messages"][1:-1]
        in_window = {
            ln for m in history if m["role"] == "user" for ln in lines_of.get(m["content"], [])
        }
        new = [
            ln for ln in recalled_lines(body["messages"][-1]["content"], q) if ln not in in_window
        ]
        lines_of[q] = new
        kept[q] = with_recalled_memory(q, new, language)
        msgs = [
            {**m, "content": kept.get(m["content"], m["content"])} if m["role"] == "user" else m
            for m in body["messages"][:-1]
        ]
        out.append({**body, "messages": [*msgs, {**body["messages"][-1], "content": kept[q]}]})
    return out


def openai_rule(texts: Sequence[str], answers: Sequence[str], count: Count) -> list[int]:
    out, seen = [], []
    for text in texts:
        best = max((common(p, text) for p in seen[-4:]), default=0)  # the newest few suffice
        tokens = count(text[:best])
        out.append(
            0
            if tokens < MIN_OPENAI
            else MIN_OPENAI + (tokens - MIN_OPENAI) // STEP_OPENAI * STEP_OPENAI
        )
        seen.append(text)
    return out


def deepseek_rule(texts: Sequence[str], answers: Sequence[str], count: Count) -> list[int]:
    units: list[str] = []
    out = []
    for k, text in enumerate(texts):
        hit = max((len(u) for u in units if text.startswith(u)), default=0)
        out.append(count(text[:hit]))
        if k:  # a common prefix with the previous request, persisted from now on
            units.append(texts[k - 1][: common(texts[k - 1], text)])
        units += [text, text + answer_piece(answers[k])]
        units = units[-64:]
    return out


def lcp_rule(texts: Sequence[str], answers: Sequence[str], count: Count) -> list[int]:
    out, slot = [], ""
    for k, text in enumerate(texts):
        out.append(count(text[: common(slot, text)]))
        slot = text + answer_piece(answers[k])
    return out


RULES = {
    "OpenAI (1,024 + 128 steps)": openai_rule,
    "DeepSeek (prefix units)": deepseek_rule,
    "longest common prefix": lcp_rule,
}


def answers_of(bodies: Sequence[dict[str, Any]]) -> list[str]:
    """Each request's answer, as the next request carries it (the last one: none)."""
    out = []
    for nxt in bodies[1:]:
        msgs = nxt["messages"]
        out.append(next(m["content"] for m in reversed(msgs[:-1]) if m["role"] == "assistant"))
    return [*out, ""]


def deepseek_run(turns: int) -> list[dict[str, Any]]:
    """The same conversation with the provider on the `deepseek` preset: countbot's own keep
    layout (context.py), as the server received it."""
    plain = bench_prefix.settings_for

    def settings_for(root: Path, base_url: str) -> Any:
        plain(root, base_url)
        cfg = yaml.safe_load((root / "config.yaml").read_text(encoding="utf-8"))
        cfg["providers"]["bench"]["preset"] = "deepseek"
        (root / "config.yaml").write_text(yaml.safe_dump(cfg), encoding="utf-8")
        return bench_prefix.load_settings(
            config_path=root / "config.yaml",
            env={"HOME": str(root), "XDG_CONFIG_HOME": str(root / ".config")},
            cwd=root,
        )

    with mock.patch.object(bench_prefix, "settings_for", settings_for):
        bodies, _summaries = bench_prefix.run(turns)
    return bodies


def input_cost(texts: Sequence[str], cached: Sequence[int], count: Count, ratio: float) -> float:
    """Prompt tokens a request costs on average, a cached token counted at `ratio` of one."""
    total = sum(count(t) for t in texts)
    return (total - sum(cached) + ratio * sum(cached)) / len(texts)


# the price of a cached prompt token against a fresh one (research/peers-2.md §3d): gpt-4o-mini
# 0.075 / 0.15; DeepSeek v4-flash 0.028 / 0.139; a local server: only the tokens it computes
RATIO = {
    "OpenAI (1,024 + 128 steps)": 0.5,
    "DeepSeek (prefix units)": 0.2,
    "longest common prefix": 0.0,
}


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--turns", type=int, default=200)
    args = ap.parse_args()
    count = TokenCounter("gpt-4o").count_text
    bodies, _summaries = bench_prefix.run(args.turns)
    recalled = sum("\n- " in b["messages"][-1]["content"] for b in bodies)
    answers = answers_of(bodies)
    questions, _answers = bench_prefix.script(args.turns)
    layouts = {
        "today": bodies,
        "keep": keep_layout(bodies, questions),
        "keep new": keep_new_layout(bodies, questions),
        "countbot": deepseek_run(args.turns),
    }
    print(
        f"{len(bodies)} requests ({recalled} with recalled memory), max_history_messages "
        f"{bench_prefix.MAX_HISTORY}, memory.inject relevant; cached share of prompt tokens:"
    )
    print(f"  {'rule':34}" + "".join(f" {name:>9}" for name in layouts))
    costs: dict[str, list[float]] = {}
    for name, rule in RULES.items():
        shares = []
        for layout in layouts.values():
            texts = [render(b) for b in layout]
            cached = rule(texts, answers, count)
            shares.append(100 * sum(cached) / sum(count(t) for t in texts))
            costs.setdefault(name, []).append(input_cost(texts, cached, count, RATIO[name]))
        print(f"  {name:34}" + "".join(f" {share:7.1f} %" for share in shares))
    sizes = [sum(count(render(b)) for b in layout) / len(layout) for layout in layouts.values()]
    print(f"  {'prompt tokens / request':34}" + "".join(f" {size:9.0f}" for size in sizes))
    print("input cost a request, in fresh prompt tokens (a cached one at the provider's ratio):")
    for name, row in costs.items():
        label = f"{name} x{RATIO[name]:g}"
        print(f"  {label:34}" + "".join(f" {c:9.0f}" for c in row))
    print(
        "  (countbot: the real conversation on the deepseek preset, whose layout is `keep new`;"
        " every other provider sends `today`'s)"
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
