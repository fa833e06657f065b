"""Benchmark of session search (`countbot sessions search`). Prints medians; targets in brackets.

Over bench_store.py's corpus (5,000 sessions of 200 messages, built once under bench/.cache/):

- the cold index build (the index file deleted; every session read and indexed), once;
- a warm search [<= 200 ms]: the reconcile against the folder listing, the FTS5 query and the
  matching messages of the 10 best sessions, for a rare word (one session), a word in every
  session, and a CJK word in every session, each through `sessions_search` as the CLI runs it;
- a search after one session changed (one file re-read and re-indexed).

Run: .venv/bin/python bench/bench_search.py [--runs N]
"""

from __future__ import annotations

import argparse
import io
import os
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from bench_store import CACHE, build, median_of, messages  # noqa: E402

from countbot_cli.commands.session_search import sessions_search  # noqa: E402
from countbot_cli.conversation.sessions.search import INDEX_FILE, SessionSearch  # noqa: E402
from countbot_cli.conversation.sessions.store import SessionStore  # noqa: E402

QUERIES = (("rare word", "bench04321"), ("word in all", "ordinary"), ("CJK in all", "中文"))


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--runs", type=int, default=7)
    runs = parser.parse_args().runs
    store = SessionStore(CACHE)
    build(store)
    for suffix in ("", "-wal", "-shm"):
        (CACHE / (INDEX_FILE + suffix)).unlink(missing_ok=True)
    search = SessionSearch(store)
    t0 = time.perf_counter()
    count = search.refresh()
    cold = time.perf_counter() - t0
    size = os.stat(CACHE / INDEX_FILE).st_size
    print(f"sessions indexed:                       {count}")
    print(
        f"cold index build:                       {cold:7.1f} s    (once; {size / 2**20:.0f} MiB)"
    )
    worst = 0.0
    for label, query in QUERIES:

        def run(q: str = query) -> None:
            sessions_search(SessionSearch(store), [q], io.StringIO(), limit=10)

        t = median_of(runs, run)
        worst = max(worst, t)
        print(f"search, warm, {label:<12} (median):  {t * 1000:7.1f} ms   [target <= 200 ms]")
    victim = "bench00007"

    def changed() -> None:
        store.update(victim, lambda s: s.messages.extend(messages(2, "turn")))
        sessions_search(SessionSearch(store), ["ordinary"], io.StringIO(), limit=10)

    t = median_of(runs, changed)
    store.update(victim, lambda s: s.messages.__delitem__(slice(200, None)))
    print(f"search after one session changed:       {t * 1000:7.1f} ms   (one file re-indexed)")
    print("within targets" if worst <= 0.2 else "OVER TARGET")


if __name__ == "__main__":
    main()
