"""Benchmark of session search (`countbot sessions search`). Prints medians; targets in brackets.

Over bench_store.py's corpus (5,000 sessions of 200 messages, built once under bench/.cache/)
plus one 10,000-message session (bench_store.BIG_ID), for this checkout and, with
`--before DIR`, an older checkout (its own `.venv`) in the same run, side by side:

- the index size against the size of the messages it indexes (their text, UTF-8) [<= 0.5];
- the cold index build (the index files deleted; every session read and indexed), once, and
  how many progress lines it printed;
- a warm search [<= 200 ms]: the reconcile against the folder listing, the FTS5 query and the
  matching messages of the 10 best sessions, for a rare word (one session), a word in every
  session, a CJK word in every session and two common words, each through `sessions_search`
  as the CLI runs it;
- saving a turn into the 10,000-message session (the store's save, with whatever the
  checkout does to the search index on a save), and a search after one session changed.

Each checkout runs in its own process (`--worker`), one after the other, on the same folder (each
starts by deleting the index); `--rounds N` alternates them N times and prints medians. The
save also shows what the search index took of it. Run: .venv/bin/python bench/bench_search.py
[--runs N] [--before /work/wt/before] [--rounds N]
"""

from __future__ import annotations

import argparse
import importlib
import io
import json
import os
import statistics
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

from timing import median_of

HERE = Path(__file__).resolve().parent
CACHE = HERE / ".cache" / "store-5000x200"  # bench_store.py's corpus
BIG_ID = "bench10000msgs"  # bench_store.BIG_ID (not imported: the worker may be an older checkout)
QUERIES = (
    ("rare word", "bench04321"),
    ("word in all", "ordinary"),
    ("CJK in all", "中文"),
    ("two in all", "ordinary link"),
)
FIGURES = (  # (key, label, unit, target)
    ("ratio", "index size / message text", "", 0.5),
    ("index_mib", "index size", "MiB", None),
    ("cold_s", "cold index build", "s", None),
    ("progress_lines", "  progress lines printed", "", None),
    *((f"q:{label}", f"search, warm, {label}", "ms", 200.0) for label, _q in QUERIES),
    ("save_ms", "save a turn into 10,000 msgs", "ms", 50.0),
    ("save_index_ms", "  of which the search index", "ms", None),
    ("changed_ms", "search after one session changed", "ms", None),
)


def _module(*names: str) -> Any:
    """The first of `names` that imports (the session modules moved to conversation/sessions/)."""
    for name in names:
        try:
            return importlib.import_module(name)
        except ModuleNotFoundError:
            continue
    raise SystemExit(f"none of {names} imports")


def _timed_index_saves() -> list[float]:
    """The milliseconds each save spends putting its session in the search index, from now on
    (none for a checkout whose saves do not touch the index)."""
    try:
        saves = importlib.import_module("countbot_cli.conversation.sessions.search_saves")
    except ModuleNotFoundError:
        return []
    spent: list[float] = []
    real = saves.index_saved

    def timed(*args: Any) -> None:
        t0 = time.perf_counter()
        real(*args)
        spent.append((time.perf_counter() - t0) * 1000)

    setattr(saves, "index_saved", timed)  # noqa: B010 (a module attribute mypy cannot see)
    return spent


def worker(runs: int) -> dict[str, float]:
    """Every figure for the countbot importable here (sys.path[0] is its checkout)."""
    from countbot_cli.messages import Message

    def messages(n: int, tag: str) -> list[Any]:
        return [Message(role=("user", "assistant")[i % 2], content=f"{tag} {i}") for i in range(n)]

    search_mod = _module(
        "countbot_cli.conversation.sessions.search", "countbot_cli.conversation.search"
    )
    store_mod = _module(
        "countbot_cli.conversation.sessions.store", "countbot_cli.conversation.store"
    )
    sessions_search = _module(
        "countbot_cli.commands.session_search", "countbot_cli.ui.session_search"
    ).sessions_search

    notes: list[str] = []
    store = store_mod.SessionStore(CACHE, on_notice=notes.append)
    index = search_mod.SessionSearch(store).path  # wherever this version keeps it
    for suffix in ("", "-wal", "-shm"):
        Path(f"{index}{suffix}").unlink(missing_ok=True)
    t0 = time.perf_counter()
    search_mod.SessionSearch(store).search("quokka")  # its index built first
    out: dict[str, float] = {"cold_s": time.perf_counter() - t0, "progress_lines": len(notes)}
    size = sum(
        os.stat(f"{index}{s}").st_size for s in ("", "-wal") if os.path.exists(f"{index}{s}")
    )
    out["index_mib"] = size / 2**20
    for label, query in QUERIES:

        def run(q: str = query) -> None:
            sessions_search(search_mod.SessionSearch(store), q.split(), io.StringIO(), limit=10)

        out[f"q:{label}"] = median_of(runs, run) * 1000

    indexing = _timed_index_saves()

    def save_turn() -> None:
        store.update(BIG_ID, lambda s: s.messages.extend(messages(2, "turn")))

    out["save_ms"] = median_of(runs, save_turn) * 1000
    out["save_index_ms"] = sorted(indexing)[len(indexing) // 2] if indexing else 0.0
    store.update(BIG_ID, lambda s: s.messages.__delitem__(slice(10_000, None)))
    victim = "bench00007"

    def changed() -> None:
        store.update(victim, lambda s: s.messages.extend(messages(2, "turn")))
        sessions_search(search_mod.SessionSearch(store), ["ordinary"], io.StringIO(), limit=10)

    out["changed_ms"] = median_of(runs, changed) * 1000
    store.update(victim, lambda s: s.messages.__delitem__(slice(200, None)))
    return out


def corpus() -> int:
    """Build the corpus once (5,000 sessions and the big one); the bytes of its message text."""
    from bench_store import build, fresh_big

    store_mod = _module(
        "countbot_cli.conversation.sessions.store", "countbot_cli.conversation.store"
    )
    store = store_mod.SessionStore(CACHE)
    build(store)
    if not store.path(BIG_ID).exists():
        fresh_big(store)
    total = 0
    for path in CACHE.glob("*.json"):
        if path.name == "index.json":
            continue
        doc = json.loads(path.read_bytes())
        for m in [*doc.get("archived", []), *doc.get("messages", [])]:
            if m.get("role") in ("user", "assistant"):
                total += len(m.get("content", "").encode())
    return total


def _medians(runs: list[dict[str, float]]) -> dict[str, float]:
    return {k: statistics.median(r[k] for r in runs) for k in runs[0]}


def run_worker(python: str, checkout: Path, runs: int) -> dict[str, float]:
    done = subprocess.run(
        [python, str(HERE / "bench_search.py"), "--worker", str(checkout), "--runs", str(runs)],
        capture_output=True,
        text=True,
        check=False,
    )
    if done.returncode != 0:
        raise SystemExit(f"the worker for {checkout} failed:\n{done.stderr[-3000:]}")
    return dict(json.loads(done.stdout.strip().splitlines()[-1]))


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--runs", type=int, default=7)
    parser.add_argument("--before", type=Path, help="an older checkout with its own .venv")
    parser.add_argument("--rounds", type=int, default=1, help="alternate the checkouts N times")
    parser.add_argument("--worker", type=Path, help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.worker:
        sys.path[:0] = [str(HERE), str(args.worker)]
        print(json.dumps(worker(args.runs)))
        return
    sys.path[:0] = [str(HERE), str(HERE.parent)]
    text = corpus()
    checkouts = [("this", sys.executable, HERE.parent)]
    if args.before:
        python = args.before / ".venv" / "bin" / "python"
        checkouts.insert(0, ("before", str(python), args.before.resolve()))
    runs: dict[str, list[dict[str, float]]] = {name: [] for name, _p, _c in checkouts}
    for _round in range(args.rounds):  # A B A B ...: a machine's load drifts alike for both
        for name, python_path, checkout in checkouts:
            runs[name].append(run_worker(python_path, checkout, args.runs))
    columns = [(name, _medians(rs)) for name, rs in runs.items()]
    for _name, figures in columns:
        figures["ratio"] = figures["index_mib"] * 2**20 / text
    print(f"message text indexed: {text / 2**20:.0f} MiB (5,000 x 200 messages + one of 10,000)")
    print(f"{'':38}" + "".join(f"{name:>12}" for name, _f in columns))
    worst_ok = True
    for key, label, unit, target in FIGURES:
        cells = "".join(f"{f[key]:>12.{0 if unit == 'ms' else 2}f}" for _n, f in columns)
        mark = f"   [target <= {target:g}{(' ' + unit) if unit else ''}]" if target else ""
        print(f"{label + (f' ({unit})' if unit else ''):<38}{cells}{mark}")
        if target and columns[-1][1][key] > target:
            worst_ok = False
    print("within targets" if worst_ok else "OVER TARGET")


if __name__ == "__main__":
    main()
