"""The count cache that every counter of one loader shares (token_cache.py): two threads that
need the same long text at once (the REPL's toolbar and the memory upkeep, right after a huge
answer was shown) count it once, whatever the scheduler does between them."""

from __future__ import annotations

import itertools
import threading
from types import TracebackType
from typing import Any

import pytest

from countbot_cli.conversation import tokens
from countbot_cli.conversation.tokens import EncodingLoader, TokenCounter

HANG = 30.0  # seconds: a bound on waiting for the other thread, never reached unless it hangs


class HandOverLock:
    """A lock for exactly two holders, the second arriving while the first holds it. When the
    first lets go it waits until the second has held it and let go too: the moment in which a
    holder that stores its count only after letting go has not stored it yet. `waiting` is set
    when the second thread comes to the lock."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._enters, self._exits = itertools.count(), itertools.count()
        self._second_done = threading.Event()
        self.waiting = threading.Event()

    def __enter__(self) -> None:
        if next(self._enters) == 1:
            self.waiting.set()
        self._lock.acquire()

    def __exit__(self, *exc: type[BaseException] | BaseException | TracebackType | None) -> None:
        first = next(self._exits) == 0
        self._lock.release()
        if first:
            assert self._second_done.wait(HANG), "the second thread never got the lock"
        else:
            self._second_done.set()


def test_a_long_text_two_threads_need_at_once_is_sampled_once(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    loader = EncodingLoader()  # its own cache: nothing counted yet
    counters = [TokenCounter("gpt-4o", loader=loader) for _ in range(2)]
    counters[0].preload(background=False)
    text = "q" * (tokens.EXACT_MAX_CHARS + 1)
    expected = TokenCounter("gpt-4o", loader=EncodingLoader()).count_text(text)
    sampled: list[str] = []
    sampling, go = threading.Event(), threading.Event()
    real_sampled = tokens._sampled

    def sample(enc: Any, t: str) -> int:
        sampled.append(threading.current_thread().name)
        if len(sampled) == 1:  # the first thread holds the lock until the second is at it
            sampling.set()
            assert go.wait(HANG)
        return real_sampled(enc, t)

    monkeypatch.setattr(tokens, "_sampled", sample)
    lock = HandOverLock()
    monkeypatch.setattr(loader.counts, "long_text_lock", lock)
    counts: dict[str, int] = {}

    def count(name: str, counter: TokenCounter) -> threading.Thread:
        def run() -> None:
            counts[name] = counter.count_text(text)

        thread = threading.Thread(target=run, name=name, daemon=True)
        thread.start()
        return thread

    threads = [count("toolbar", counters[0])]
    assert sampling.wait(HANG)
    threads.append(count("upkeep", counters[1]))
    assert lock.waiting.wait(HANG)  # the second found no count and comes to the lock
    go.set()
    for thread in threads:
        thread.join(HANG)
    assert sampled == ["toolbar"]
    assert counts == {"toolbar": expected, "upkeep": expected}
