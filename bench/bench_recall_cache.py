"""What the recall model's cache saves where it could not be used before: `ask --plain` with a
read-only memory folder, and `sessions search` run alone (a sentence: searched by meaning).

Each countbot given gets a home of its own under a temporary folder (config, cache folder,
sessions, a 12-line MEMORY.md in `notes/`) and one warm-up run of each command (the one that
builds the cache where a cache is built); then the rounds run interleaved, one countbot after
the other, against one loopback server. The memory folder is read-only from the start: a
read-only bind mount in a mount namespace of its own for root, its mode for anyone else (before
the shared cache, each run loaded USE from its package and embedded every line again; now the
load is mapped and the vectors are kept in the cache folder). Per command and countbot: the
median wall time and CPU time (user+sys of the reaped processes).

Run: .venv/bin/python bench/bench_recall_cache.py --countbot today=/work/wt/base/.venv/bin/countbot \\
         --countbot now=.venv/bin/countbot [-n 7]
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "bench"))

from bench_startup import bench_env, start_server  # noqa: E402

LINES = [
    "has taken cello lessons since 2019",
    "drives a Toyota Corolla",
    "usually flies KLM to Amsterdam",
    "favourite colour is dark green",
    "the production database is PostgreSQL 15",
    "grows tomatoes and basil on the balcony",
    "父母住在杭州西湖边",
    "the book club is reading Middlemarch",
    "prefers dark mode in every app",
    "每周一早上开周会",
    "sold the Corolla, now drives a Tesla Model 3",
    "the espresso machine needs descaling every two months",
]
SAID = [
    ("Tuesday", "I have cello lessons every Tuesday evening"),
    ("Weekend", "周末我们去望京那家海底捞吃火锅"),
    ("Work", "the deploy window is Thursday morning"),
    ("Tea", "I drink green tea in the morning"),
]
QUESTION = "which instrument do I play?"
READ_ONLY = 'mount --bind "$1" "$1" && mount -o remount,bind,ro "$1" "$1" && shift && exec "$@"'


def home_for(tmp: Path, base: str) -> Path:
    """A user's home: config (recall by meaning, memory in notes/), memory, sessions."""
    cfg = tmp / "xdg" / "countbot" / "config.yaml"
    cfg.parent.mkdir(parents=True)
    cfg.write_text(
        "default_provider: bench\nproviders:\n  bench:\n    type: openai\n"
        f"    api_base: {base}\n    api_key: sk-bench\n    model: test-model\n"
        "tools:\n  enabled: false\nmemory:\n  overflow_summary: false\n  auto_memory: false\n"
        f"  inject: relevant\n  file: {json.dumps(str(tmp / 'notes' / 'MEMORY.md'))}\n",
        encoding="utf-8",
    )
    notes = tmp / "notes"
    notes.mkdir()
    body = "".join(f"2025-0{1 + i % 9}-1{i % 10}|user|{c}\n" for i, c in enumerate(LINES))
    (notes / "MEMORY.md").write_text("# MEMORY\n" + body, encoding="utf-8")
    from countbot_cli.conversation.sessions.session import new_session
    from countbot_cli.conversation.sessions.store import SessionStore
    from countbot_cli.messages import Message

    store = SessionStore(tmp / "xdg" / "countbot" / "sessions")
    for title, said in SAID:
        s = new_session(provider="bench", model="test-model", title=title)
        s.messages = [Message(role="user", content=said), Message(role="assistant", content="ok")]
        store.create(s)
    return notes


def read_only(notes: Path, cmd: list[str]) -> list[str]:
    """`cmd` run with `notes` read-only (root: a bind mount in its own mount namespace)."""
    if os.geteuid() != 0:
        notes.chmod(0o555)
        return cmd
    return ["unshare", "-m", "sh", "-c", READ_ONLY, "sh", str(notes), *cmd]


def run(cmd: list[str], env: dict[str, str], cwd: Path, expect: str) -> tuple[float, float]:
    """(wall ms, CPU ms) of one run of `cmd`, which must print `expect`."""
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    t0 = time.perf_counter()
    res = subprocess.run(cmd, env=env, cwd=cwd, stdin=subprocess.DEVNULL, capture_output=True)
    wall = (time.perf_counter() - t0) * 1000
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    if res.returncode != 0 or expect.encode() not in res.stdout:
        raise SystemExit(f"{cmd} failed ({res.returncode}): {res.stderr.decode()[-600:]}")
    cpu = (after.ru_utime - before.ru_utime + after.ru_stime - before.ru_stime) * 1000
    return wall, cpu


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--countbot", action="append", required=True, help="NAME=PATH")
    ap.add_argument("-n", type=int, default=7, help="rounds after the warm-up")
    args = ap.parse_args()
    bots = [(n, os.path.abspath(p)) for n, p in (s.split("=", 1) for s in args.countbot)]
    server, base = start_server()
    results: dict[tuple[str, str], list[tuple[float, float]]] = {}
    try:
        with tempfile.TemporaryDirectory(prefix="bench-recall-cache-") as top:
            plans = []
            for name, path in bots:
                tmp = Path(top) / name
                tmp.mkdir()
                notes = home_for(tmp, base)
                env = bench_env(tmp, XDG_CACHE_HOME=str(tmp / "cache"))
                ask = read_only(notes, [path, "ask", "--plain", "--no-save", QUESTION])
                search = [path, "sessions", "search", "--json", "-n", "1", QUESTION]
                plans.append((name, env, tmp, ask, search))
            for rnd in range(args.n + 1):
                for name, env, tmp, ask, search in plans:
                    for what, cmd, expect in (("ask", ask, "Hello"), ("search", search, "Tuesday")):
                        figure = run(cmd, env, tmp, expect)
                        if rnd:  # round 0 is the warm-up
                            results.setdefault((what, name), []).append(figure)
    finally:
        server.kill()
    print(f"median of {args.n} runs (ms); memory folder read-only for ask")
    print(f"{'command':44} {'countbot':10} {'wall':>8} {'cpu':>8}")
    for (what, name), figures in results.items():
        label = "ask --plain (read-only memory folder)" if what == "ask" else "sessions search"
        wall = statistics.median(w for w, _ in figures)
        cpu = statistics.median(c for _, c in figures)
        print(f"{label:44} {name:10} {wall:8.0f} {cpu:8.0f}")


if __name__ == "__main__":
    main()
