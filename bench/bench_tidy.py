"""Benchmark of `memory tidy` (issue 22 point 3) on a 2,000-line MEMORY.md with planted
duplicates, supersessions and merges.

The file: 2,000 entries from templates filled with made-up names, tools, hosts and numbers
(deterministic), of which PLANTED pairs are planted: exact repeats in other case and
punctuation (drop), the same fact with another number, the newer later in the file
(supersede), a fact and a fuller restatement (merge), and "switched" facts that share only two
words with the old one (left to the model). Printed:

- the rules (`tidy.find`): the planted pairs found with the right kind and the right line
  kept (recall), the proposals that are not planted (false), and the time;
- the model's share: how many of the model-only pairs are in the groups sent to it, how many
  calls and prompt tokens (gpt-4o's encoding) that costs (`tidy.ask_model` with a summariser
  that answers `[]`, counting what would be sent), and the time.

Run: .venv/bin/python bench/bench_tidy.py [--entries N]
"""

from __future__ import annotations

import argparse
import random
import sys
import tempfile
import time
from datetime import date, timedelta
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from countbot_cli.conversation.tokens import TokenCounter  # noqa: E402
from countbot_cli.memory.store import DEFAULT_HEADER, MemoryStore  # noqa: E402
from countbot_cli.memory.tidy import ask_model, find  # noqa: E402

PLANTED = {"drop": 60, "supersede": 60, "merge": 40, "model": 40}
SYLLABLES = [
    "ka",
    "lo",
    "mi",
    "ne",
    "ru",
    "ta",
    "vo",
    "xi",
    "ze",
    "qu",
    "fa",
    "bi",
    "do",
    "gu",
    "he",
    "ji",
]
TEMPLATES = (
    "{a} runs {b} version {n} on host {c}",
    "The {a} team deploys {b} every {d}",
    "{a} prefers {b} over {c} for {e}",
    "Project {a} stores its data in {b} at port {n}",
    "The {a} dashboard lives in folder {b}/{c}",
    "{a} was renamed to {b} in release {n}",
    "Backups of {a} go to bucket {b}-{n}",
    "The {a} service talks to {b} through {c}",
)
DAYS = ("Monday", "Tuesday", "Friday", "Sunday")
FIXED = {"The", "Project", "Backups"}  # capitalised template words, not names
SWITCHED = (  # a changed fact in other words: only the names are shared
    "{a} no longer uses {b}: switched to {c}",
    "{a} replaced {b} with {c} last month",
    "Since March {a} has {c} where {b} was",
    "{b} is gone from {a}; {c} took over",
    "{a} dropped {b} in favour of {c}",
    "We moved {a} off {b} onto {c}",
    "{c} now does what {b} did for {a}",
    "{a}: {b} retired, {c} instead",
)


def word(rng: random.Random) -> str:
    return "".join(rng.choice(SYLLABLES) for _ in range(3)).capitalize()


def fact(rng: random.Random, numbered: bool = False) -> str:
    t = rng.choice([t for t in TEMPLATES if "{n}" in t] if numbered else TEMPLATES)
    return t.format(
        a=word(rng),
        b=word(rng),
        c=word(rng),
        e=word(rng),
        d=rng.choice(DAYS),
        n=rng.randint(2, 9999),
    )


def build(path: Path, n: int, rng: random.Random) -> dict[str, list[tuple[str, str]]]:
    """MEMORY.md with `n` entries; the planted (old, new) pairs by kind (new is the one kept,
    later in the file and newer by date)."""
    planted: dict[str, list[tuple[str, str]]] = {k: [] for k in PLANTED}
    for kind, count in PLANTED.items():
        for _ in range(count):
            old = fact(rng, numbered=kind == "supersede")
            if kind == "drop":
                new = old.lower() + "."
            elif kind == "supersede":
                new = old.replace(str(_number(old)), str(_number(old) + 1000))
            elif kind == "merge":
                new = f"{old} and {word(rng)} checks it weekly"
            else:
                names = [w for w in old.replace("/", " ").split() if w.istitle() and w not in FIXED]
                new = rng.choice(SWITCHED).format(a=names[0], b=names[1], c=word(rng))
            planted[kind].append((old, new))
    rows = [old for pairs in planted.values() for old, _ in pairs]
    rows += [fact(rng) for _ in range(n - 2 * len(rows))]
    rng.shuffle(rows)
    for pairs in planted.values():
        for old, new in pairs:
            rows.insert(rng.randint(rows.index(old) + 1, len(rows)), new)
    start = date(2025, 1, 1)
    lines = [DEFAULT_HEADER]
    for i, text in enumerate(rows):
        day = start + timedelta(days=i * 700 // len(rows))
        lines.append(f"{day.isoformat()}|user|{text}\n")
    path.write_text("".join(lines), encoding="utf-8")
    return planted


def _number(text: str) -> int:
    return max(
        (int(w) for w in text.replace("-", " ").replace("/", " ").split() if w.isdigit()), default=1
    )


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--entries", type=int, default=2000)
    args = ap.parse_args()
    rng = random.Random(22)
    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / "MEMORY.md"
        planted = build(path, args.entries, rng)
        store = MemoryStore(path)
        store.entries()  # parsed once: the time below is the tidy's own
        t0 = time.perf_counter()
        found, groups = find(store)
        rules_s = time.perf_counter() - t0
        got = {(p.kind, tuple(e.content for e in p.remove), p.keep.content) for p in found}
        pairs = {
            (kind, (old,), new)
            for kind in ("drop", "supersede", "merge")
            for old, new in planted[kind]
        }
        hits = len(got & pairs)
        false = len(got - pairs)
        print(f"memory tidy on {len(store.entries()):,} entries, planted: {PLANTED}")
        print(
            f"  rules: {hits}/{len(pairs)} planted pairs found right ({100 * hits / len(pairs):.0f} %),"
            f" {false} other proposals, {1000 * rules_s:.0f} ms"
        )
        for kind in ("drop", "supersede", "merge"):
            mine = {(k, o, n) for k, o, n in pairs if k == kind}
            print(f"    {kind:10} {len(got & mine)}/{len(mine)}")
        offered = {e.content for g in groups for e in g}
        model_pairs = planted["model"]
        seen = sum(old in offered and new in offered for old, new in model_pairs)
        prompts: list[str] = []

        def summarise(prompt: str, what: str) -> str:
            prompts.append(prompt)
            return "[]"

        t0 = time.perf_counter()
        ask_model(store, groups, summarise, "en")
        model_s = time.perf_counter() - t0
        tokens = sum(TokenCounter("gpt-4o").count_text(p) for p in prompts)
        print(
            f"  model: {len(groups)} groups; {seen}/{len(model_pairs)} planted 'switched' pairs offered"
            f" to it; {len(prompts)} calls, {tokens:,} prompt tokens, {1000 * model_s:.0f} ms to build"
        )
    return 0


if __name__ == "__main__":
    sys.exit(main())
