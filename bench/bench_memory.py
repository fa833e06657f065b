"""Benchmark: searching a 100,000-entry MEMORY.md (budget: 100 ms a search, warm).

Builds bench/.cache/MEMORY.md once (deterministic content, Chinese and English mixed), then
prints: the cold first search (read + parse + index), the warm search time of several queries
(median of 7 runs each, a fresh store per cold run) and the cost of one add() to the big file.
Exits 1 when a warm search is over budget.

    .venv/bin/python bench/bench_memory.py
"""

from __future__ import annotations

import random
import shutil
import statistics
import sys
import time
from datetime import date, timedelta
from pathlib import Path

from countbot_cli.memory.store import DEFAULT_HEADER, MemoryStore

N_ENTRIES = 100_000
BUDGET_MS = 100.0
CACHE = Path(__file__).resolve().parent / ".cache"
QUERIES = [
    "redis",
    "上海 咖啡",
    "用户",
    "postgres 端口 5432",
    "喜欢喝咖啡",
    "deploy kubernetes staging",
    "nonexistentword",
    "用户喜欢喝咖啡住在上海每天早上跑步",  # a sentence as the query (relevant-memory injection)
    "e a o i",  # every entry matches every word
]

_ZH = [
    "用户喜欢喝咖啡",
    "住在上海",
    "项目使用 Python 3.11",
    "数据库是 postgres，端口 5432",
    "每天早上跑步",
    "偏好简洁的回答",
    "部署在 kubernetes staging 集群",
    "邮箱 user{n}@example.com",
    "正在学习日语",
    "周末去杭州",
    "猫的名字叫 {n} 号",
    "不喜欢香菜",
]
_EN = [
    "prefers dark mode",
    "uses Redis for caching",
    "deadline on {d}",
    "works at ACME Corp team {n}",
    "the API key lives in the vault",
    "builds with make and ruff",
    "likes tea, not coffee",
    "timezone UTC+8",
    "repo at git.example.com/p{n}",
]


def build(path: Path, n: int) -> None:
    rng = random.Random(20240115)
    start = date(2023, 1, 1)
    lines = [DEFAULT_HEADER]
    for i in range(n):
        day = start + timedelta(days=i * 1000 // n)
        parts = rng.sample(_ZH, 2) + rng.sample(_EN, 1)
        text = "；".join(p.format(n=i, d=day.isoformat()) for p in parts)
        source = rng.choice(("auto-overflow", "auto-memory", "tool", "user"))
        lines.append(f"{day.isoformat()}|{source}|{text} #{i}\n")
    path.write_text("".join(lines), encoding="utf-8")


def ms(seconds: float) -> str:
    return f"{seconds * 1000:7.1f} ms"


def main() -> int:
    CACHE.mkdir(exist_ok=True)
    path = CACHE / "MEMORY.md"
    if len(MemoryStore(path).entries()) != N_ENTRIES:
        build(path, N_ENTRIES)
    size_mb = path.stat().st_size / 1e6
    print(f"MEMORY.md: {N_ENTRIES} entries, {size_mb:.1f} MB ({path})")

    colds = []
    for _ in range(3):
        t0 = time.perf_counter()
        MemoryStore(path).search("redis")
        colds.append(time.perf_counter() - t0)
    print(f"cold first search (read + parse + index): {ms(statistics.median(colds))}")

    store = MemoryStore(path)
    store.search("warm")
    worst = 0.0
    for q in QUERIES:
        runs = []
        for _ in range(7):
            t0 = time.perf_counter()
            found, total = store.search_total(q, limit=10)
            runs.append(time.perf_counter() - t0)
        med = statistics.median(runs)
        worst = max(worst, med)
        print(f"warm search {q!r:32} {ms(med)}  ({total} matches, top {len(found)})")

    work = CACHE / "add"
    work.mkdir(exist_ok=True)
    copy = work / "MEMORY.md"
    shutil.copyfile(path, copy)
    adder = MemoryStore(copy)
    adder.entries()
    t0 = time.perf_counter()
    adder.add("bench entry added at the end", source="user")
    print(f"add() to the 100k-entry file (parsed already): {ms(time.perf_counter() - t0)}")
    t0 = time.perf_counter()
    MemoryStore(copy).add("a second bench entry", source="user")
    print(f"add() with a fresh store (read + parse + write): {ms(time.perf_counter() - t0)}")
    shutil.rmtree(work)

    verdict = "OK" if worst <= BUDGET_MS / 1000 else "OVER BUDGET"
    print(f"slowest warm search {ms(worst)} vs budget {BUDGET_MS:.0f} ms: {verdict}")
    return 0 if verdict == "OK" else 1


if __name__ == "__main__":
    sys.exit(main())
