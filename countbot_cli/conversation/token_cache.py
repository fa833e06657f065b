"""Token counts kept once per process, for every TokenCounter of one EncodingLoader.

The budget's counter, the REPL's context meter and the memory keeper each have a TokenCounter
of the same model; without a shared cache each tokenized a long answer again after it was
shown (a 10 MB line three times: 43-68 s). Here each message is counted once per encoding,
keyed by its identity and content (tokens._fields), and so is each long text (keyed by its
length and hash, so the cache keeps no text alive). Raw counts only: a counter's learned
ratio is applied afterwards. Bounded: a full table is emptied and filled again.
"""

from __future__ import annotations

import threading
from typing import Any

MAX_MESSAGES = 200_000
MAX_TEXTS = 4096
TEXT_FROM = 4096  # characters: shorter texts are counted again (cheaper than keeping them)


class CountCache:
    """(encoding, message key) -> raw count, and (encoding, len, hash) of long texts -> count.
    Dict reads and writes are atomic in CPython: threads may share it without a lock (a race
    counts a short message twice, never wrongly). Texts long enough to be estimated from
    samples are counted under `long_text_lock`, so two threads that need the same long answer
    at once (the toolbar and the memory upkeep after it was shown) count it once."""

    def __init__(self) -> None:
        self._messages: dict[tuple[str, Any], int] = {}
        self._texts: dict[tuple[str, int, int], int] = {}
        self.long_text_lock = threading.Lock()

    def message(self, encoding: str, key: Any) -> int | None:
        return self._messages.get((encoding, key))

    def put_message(self, encoding: str, key: Any, n: int) -> None:
        if len(self._messages) >= MAX_MESSAGES:
            self._messages.clear()
        self._messages[(encoding, key)] = n

    def text(self, encoding: str, text: str) -> int | None:
        if len(text) < TEXT_FROM:
            return None
        return self._texts.get((encoding, len(text), hash(text)))

    def put_text(self, encoding: str, text: str, n: int) -> None:
        if len(text) < TEXT_FROM:
            return
        if len(self._texts) >= MAX_TEXTS:
            self._texts.clear()
        self._texts[(encoding, len(text), hash(text))] = n
