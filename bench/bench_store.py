"""Benchmark of the session store (SPEC §8). Prints medians; targets in brackets.

- `sessions list` (SessionStore.list()) over 5,000 sessions of 200 messages each, warm index
  [<= 0.3 s]; also the one-off cold listing after the index is lost, for information.
- saving a turn (update() appending 2 messages) into a 10,000-message session kept in the same
  folder, so the index it updates holds 5,000 rows [<= 50 ms]. This is the steady state of a
  REPL (load() or the previous save left the file's parsed form in the store); the first save of
  a fresh store, which must parse the ~4 MB file, is printed for information.

The 5,000 sessions are built once under bench/.cache/ (git-ignored) and reused.
Run: .venv/bin/python bench/bench_store.py [--runs N]
"""

from __future__ import annotations

import argparse
import io
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from timing import median_of  # noqa: E402

from countbot_cli.commands.sessions import sessions_list  # noqa: E402
from countbot_cli.conversation.sessions.listing import index_file  # noqa: E402
from countbot_cli.conversation.sessions.session import Session, new_session  # noqa: E402
from countbot_cli.conversation.sessions.store import SessionStore  # noqa: E402
from countbot_cli.messages import Message  # noqa: E402

CACHE = Path(__file__).resolve().parent / ".cache" / "store-5000x200"
N_SESSIONS = 5000
N_MESSAGES = 200
BIG_ID = "bench10000msgs"
TEXT = (
    "Here is a fairly ordinary chat message with some `code`, a list and a link: "
    "- one\n- two\n- three\nhttps://example.org/docs. 这里还有一些中文内容。 "
)


def messages(n: int, tag: str) -> list[Message]:
    return [
        Message(role="user" if i % 2 == 0 else "assistant", content=f"{tag} {i}: {TEXT * 2}")
        for i in range(n)
    ]


def build(store: SessionStore) -> None:
    marker = CACHE / ".complete"
    if marker.exists():
        return
    print(f"building {N_SESSIONS} sessions of {N_MESSAGES} messages in {CACHE} (once) ...")
    have = {h["id"] for h in store.list()} if CACHE.exists() else set()
    for i in range(N_SESSIONS):
        sid = f"bench{i:05d}"
        if sid in have:
            continue
        s = new_session(provider="openai", model="gpt-4o-mini", title=f"Bench session {i}")
        s.id = sid
        s.messages = messages(N_MESSAGES, sid)
        store.create(s)
    marker.touch()


def fresh_big(store: SessionStore) -> None:
    if store.path(BIG_ID).exists():
        store.delete(BIG_ID)
    big: Session = new_session(provider="openai", model="gpt-4o-mini", title="Big session")
    big.id = BIG_ID
    big.messages = messages(10_000, "big")
    store.create(big)


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--runs", type=int, default=7)
    runs = parser.parse_args().runs
    store = SessionStore(CACHE)
    build(store)
    fresh_big(store)

    index_file(CACHE).unlink(missing_ok=True)
    t0 = time.perf_counter()
    count = len(store.list())
    cold = time.perf_counter() - t0
    warm = median_of(runs, store.list)
    cli = median_of(runs, lambda: sessions_list(store, io.StringIO()))

    def save_turn() -> None:
        store.update(BIG_ID, lambda s: s.messages.extend(messages(2, "turn")))

    save = median_of(runs, save_turn)

    def save_turn_cold() -> None:  # a new process's first save: nothing remembered, full parse
        SessionStore(CACHE).update(BIG_ID, lambda s: s.messages.extend(messages(2, "turn")))

    cold_save = median_of(runs, save_turn_cold)
    fresh_big(store)  # keep the cached folder the same size from run to run

    print(f"sessions listed:                        {count}")
    print(f"store.list(), warm index (median):      {warm * 1000:7.1f} ms   [target <= 300 ms]")
    print(f"sessions_list() output, warm (median):  {cli * 1000:7.1f} ms")
    print(f"store.list(), cold (index rebuilt):     {cold * 1000:7.1f} ms   (once)")
    print(f"save a turn into 10,000 msgs (median):  {save * 1000:7.1f} ms   [target <= 50 ms]")
    print(f"  same, first save of a fresh store:    {cold_save * 1000:7.1f} ms   (parses the file)")
    ok = warm <= 0.3 and save <= 0.05
    print("within targets" if ok else "OVER TARGET")


if __name__ == "__main__":
    main()
