"""The vectors of lines, cached by content: MEMORY.md's (`vectors_path`) and what was said in
past sessions (`search_vectors_path`), embedded in the background and read by recall and search.

`LineVectors` gives a question what is ready (`meaning`: the question's vector, one row a line,
which lines have one) after waiting a given time at most, and hands the lines without a vector
to the encoder process in the background (memory/embed.py), appending each batch to the file
(memory/vector_file.py) as it comes back: a run cut short keeps what it embedded and the next
one goes on. Invariant: the file is read up to what the lines asked for can use (twice their
number plus SLACK records), and one that cannot be used is rebuilt, said in one line.
"""

from __future__ import annotations

import contextlib
import os
import threading
import time
from array import array
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, NamedTuple

from countbot_cli.config.derived import derived_file
from countbot_cli.config.own_files import (
    OLD_MODEL_CACHE_SUFFIX,
    SEARCH_VECTORS_FILE,
    VECTORS_SUFFIX,
    memory_sidecar,
)
from countbot_cli.memory.embed import BATCH_CHARS, QUESTION_WAIT, START_TIMEOUT, Embedder, shared
from countbot_cli.memory.encoder_spec import BATCH, DIM, LINE_CHARS, RANK_LINES
from countbot_cli.memory.meaning import gather
from countbot_cli.memory.vector_file import (
    SLACK,
    Damaged,
    VectorFile,
    add_rows,
    content_key,
    empty,
)

if TYPE_CHECKING:
    import numpy as np
    from numpy.typing import NDArray

QUIET_BUILD = 32  # waiting for this many lines or fewer says nothing
PROGRESS_STEPS = 4  # a wait for every line reports its progress this many times


def vectors_path(memory_file: Path) -> Path:
    """MEMORY.md -> MEMORY.vectors.bin, in the cache folder of the memory's folder."""
    return derived_file(memory_file.parent, memory_file.stem + VECTORS_SUFFIX)


def search_vectors_path(sessions_dir: Path) -> Path:
    """The vectors of what was said in the sessions of `sessions_dir`, in its cache folder."""
    return derived_file(sessions_dir, SEARCH_VECTORS_FILE)


def remove_old_model_cache(memory_file: Path) -> None:
    """Remove the recall model's load an older countbot kept beside MEMORY.md (80 MB, never
    read again). Quiet: a file that cannot be removed (a read-only folder) stays."""
    with contextlib.suppress(OSError):
        os.unlink(memory_sidecar(memory_file, OLD_MODEL_CACHE_SUFFIX))


class Meaning(NamedTuple):
    """What recall by meaning has for one question (see docs in SEAM: rows of [USE | e5])."""

    question: NDArray[np.float32]  # (DIM,)
    lines: NDArray[np.float32]  # (n, DIM), one row a line asked for; zeros where not `has`
    has: NDArray[np.bool_]  # (n,) which lines have their vector
    partial: bool  # some have none yet


class LineVectors:
    """The vectors of one file's lines (or one folder's sessions), and their embedding."""

    def __init__(
        self,
        path: Path,
        notice: Callable[[str], None],
        *,
        what: str = "memory lines",
        purpose: str = "recall",
        fixed: Sequence[str] = (),
        embedder: Embedder | None = None,
    ) -> None:
        """`fixed`: texts that `queries` will be asked for (small talk), embedded as soon as
        the encoders are up, before any line."""
        self.file = VectorFile(Path(path))
        self.notice = notice
        self.what = what  # what the lines are, for the notices
        self.purpose = purpose  # "recall" or "search", for the notices
        self.embedder = embedder or shared()
        self._lock = threading.Lock()
        self._rows: dict[bytes, int] = {}
        self._store: NDArray[np.float16] | None = None
        self._keys: dict[str, bytes] = {}  # content -> key: a warm turn hashes nothing twice
        self._live: set[bytes] = set()
        self._pending: list[tuple[bytes, str]] = []
        self._inflight: set[bytes] = set()  # handed to the embedder, not back yet
        self._limit = SLACK
        self._in_memory = False  # the file cannot be written: vectors live in this process
        self._said: set[str] = set()
        self.embedded = 0  # lines this process embedded (and added to the file)
        self._fixed = {content_key(t, b"query"): t for t in fixed}
        self._fixed_asked = False

    # -- what recall and search call --

    def start(self, contents: Sequence[str]) -> list[bytes]:
        """Embed the lines without a vector in the background (newest, i.e. last, first);
        the keys of `contents`."""
        self.embedder.start()  # first: the encoders load while the file is read
        with self._lock:
            keys = self._want(contents)
            pending = bool(self._pending)
            fixed_missing = [(k, t) for k, t in self._fixed.items() if k not in self._rows]
            ask_fixed = bool(fixed_missing) and not self._fixed_asked
            self._fixed_asked = True
        if self.embedder.error is None:
            if ask_fixed:
                done_keys = [k for k, _t in fixed_missing]
                self.embedder.prefetch(
                    [t for _k, t in fixed_missing], lambda v: self.done(done_keys, v)
                )
            if pending:
                self.embedder.fill(self)
        return keys

    def added(self, contents: Sequence[str]) -> None:
        """Lines were written (memory.on_added): embedded in the background."""
        self.start(contents)

    def meaning(
        self, contents: Sequence[str], question: str, wait: float | None = QUESTION_WAIT
    ) -> Meaning | None:
        """The question's vector and the lines' (what is ready after `wait` seconds at most;
        None: every line, saying how far it got); None when there is no question vector."""
        import numpy as np

        deadline = time.monotonic() + (START_TIMEOUT if wait is None else wait)
        keys = self.start(contents)
        vectors = self.embedder.query([question], deadline)
        self._pass_on_notices()
        if vectors is None:
            self._say_unavailable()
            return None
        self._wait_for(keys, deadline if wait is not None else None)
        with self._lock:
            has = np.fromiter((k in self._rows for k in keys), dtype=bool, count=len(keys))
            at = np.flatnonzero(has)
            rows = [self._rows[keys[i]] for i in at]
            store = self._store if self._store is not None else empty()
            lines = gather(store, rows, at, len(keys))
        partial = not bool(has.all())
        if partial:
            self._say_once(
                f"{self.purpose} by meaning: {int(has.sum()):,} of {len(keys):,} {self.what} "
                "embedded so far, the others by words (embedding goes on as countbot runs)"
            )
        return Meaning(vectors[0], lines, has, partial)

    def ranked(self, contents: Sequence[str], question: str, wait: float) -> array[float] | None:
        """Recall's scores of `contents` for `question`, computed by an encoder process an
        earlier countbot left serving (memory/encoder_rank.py): nothing read or imported here.
        None when there is no such process, or it lacks a vector: then `meaning`."""
        if not self.embedder.attached or len(contents) > RANK_LINES:
            return None
        keys = [self._key(c) for c in contents]
        deadline = time.monotonic() + wait
        return self.embedder.rank(self.file.path, keys, list(self._fixed), question, deadline)

    def queries(
        self, texts: Sequence[str], wait: float = QUESTION_WAIT
    ) -> NDArray[np.float32] | None:
        """`texts` embedded as questions (the `fixed` ones: cached with the lines); None when
        they are not there within `wait` seconds."""
        import numpy as np

        deadline = time.monotonic() + wait
        keys = [content_key(t, b"query") for t in texts]
        with self._lock:
            self._sync()
            prefetched = self._fixed_asked and all(k in self._fixed for k in keys)
        if prefetched:
            self._wait_for(keys, deadline)
        with self._lock:
            missing = [(k, t) for k, t in zip(keys, texts, strict=True) if k not in self._rows]
        if missing:
            got = self.embedder.query([t for _k, t in missing], deadline)
            if got is None:
                return None
            self.done([k for k, _t in missing], got)
        with self._lock:
            if self._store is None:
                return np.zeros((0, DIM), dtype=np.float32)
            return self._store[[self._rows[k] for k in keys]].astype(np.float32)

    def cached(self, contents: Sequence[str]) -> list[bool]:
        """Which of `contents` have a vector in the file (nothing is embedded)."""
        with self._lock:
            self._limit = max(self._limit, 2 * len(contents) + SLACK)
            self._sync()
            return [content_key(c) in self._rows for c in contents]

    # -- the embedder's side (memory/embed.py's Fill) --

    def batch(self) -> tuple[list[bytes], list[str]] | None:
        with self._lock:
            keys: list[bytes] = []
            texts: list[str] = []
            chars = 0
            while self._pending and len(keys) < BATCH:
                key, text = self._pending[-1]
                size = min(len(text), LINE_CHARS)
                if keys and chars + size > BATCH_CHARS:
                    break
                self._pending.pop()
                if key in self._rows or key in keys or key in self._inflight:
                    continue
                self._inflight.add(key)
                keys.append(key)
                texts.append(text[:LINE_CHARS])
                chars += size
            return (keys, texts) if keys else None

    def done(self, keys: list[bytes], vectors: NDArray[np.float32]) -> None:
        self._pass_on_notices()  # the first batch comes once loading said what it had to
        half = vectors.astype("<f2")
        with self._lock:
            self._inflight.difference_update(keys)
            self._sync()
            new = [i for i, k in enumerate(keys) if k not in self._rows]
            if not new:
                return
            self.embedded += len(new)
            self._add([keys[i] for i in new], half[new])
            if self._in_memory:
                return
            if not self.file.append([keys[i] for i in new], half[new]):
                self._rewrite()

    # -- internals (with the lock held) --

    def _want(self, contents: Sequence[str]) -> list[bytes]:
        """The keys of `contents`; the ones without a vector made pending."""
        keys = [self._key(c) for c in contents]
        self._live = set(keys).union(self._fixed)
        self._limit = max(self._limit, 2 * len(keys) + SLACK)
        self._sync()
        rows, inflight = self._rows, self._inflight
        missing = [(k, c) for k, c in zip(keys, contents, strict=True) if k not in rows]
        self._pending = [
            (k, c) for k, c in missing if k not in inflight
        ]  # the last is embedded first: the newest lines
        return keys

    def _key(self, content: str) -> bytes:
        key = self._keys.get(content)
        if key is None:
            key = self._keys[content] = content_key(content)
        return key

    def _sync(self) -> None:
        """Take in what the file gained (another process's batches); rebuild a damaged one."""
        if self._in_memory:
            return
        try:
            chunk = self.file.read_new(self._limit - len(self._rows))
        except (Damaged, OSError) as e:
            self._rows, self._store = {}, None
            self._rebuild(str(e))
            return
        if chunk is None:
            return
        if chunk.fresh:
            self._rows, self._store = {}, None
        new = [i for i, k in enumerate(chunk.keys) if k not in self._rows]
        if len(new) == len(chunk.keys):  # all of them (a first read): not copied to be picked
            self._add(chunk.keys, chunk.vectors)
        elif new:
            self._add([chunk.keys[i] for i in new], chunk.vectors[new])
        stale = len(self._rows) - len(self._live & self._rows.keys())
        if not chunk.clean or (self._live and stale > max(len(self._live), SLACK)):
            self._rewrite()  # a torn or overlong file, or mostly stale: written anew

    def _add(self, keys: list[bytes], vectors: NDArray[np.float16]) -> None:
        self._store = add_rows(self._store, self._rows, keys, vectors)

    def _rewrite(self) -> None:
        """Write the file anew with the live lines' vectors (OSError: kept in memory)."""
        keep = [k for k in self._rows if k in self._live] if self._live else list(self._rows)
        kept = self._store[[self._rows[k] for k in keep]] if self._store is not None else empty()
        try:
            self.file.rewrite(keep, kept)
        except OSError:
            self._in_memory = True
            return
        self._rows = {k: i for i, k in enumerate(keep)}
        self._store = kept

    def _rebuild(self, why: str) -> None:
        try:
            self.file.rewrite([], empty())
        except OSError:
            self._in_memory = True
            self._say_once(
                f"the vector cache {self.file.path} cannot be used ({why}); "
                f"{self.what} are embedded again at each run until it is removed"
            )
            return
        self._say_once(f"the vector cache {self.file.path} was damaged ({why}); rebuilding it")

    def _wait_for(self, keys: list[bytes], deadline: float | None) -> None:
        """Until each of `keys` has a vector, `deadline` passes or the encoders fail; with no
        deadline, saying how far it got (PROGRESS_STEPS times)."""
        with self._lock:
            total = sum(1 for k in keys if k not in self._rows)
        step, said = max(1, total // PROGRESS_STEPS), 0
        loud = deadline is None and total > QUIET_BUILD
        if loud:
            self.notice(f"embedding {total:,} {self.what} for {self.purpose} by meaning (once)")
        cond = self.embedder.cond
        with cond:
            while self.embedder.error is None:
                with self._lock:
                    left = sum(1 for k in keys if k not in self._rows)
                if not left or (deadline is not None and time.monotonic() >= deadline):
                    break
                if loud and total - left - said >= step:
                    said = total - left
                    self.notice(f"embedded {said:,} of {total:,} {self.what}")
                timeout = 0.1 if deadline is None else min(0.1, deadline - time.monotonic())
                cond.wait(max(timeout, 0.0))

    def _pass_on_notices(self) -> None:
        """What loading the encoders had to say (a damaged model cache), said here: in the
        thread that asked, not the embedder's."""
        with self.embedder.cond:
            notices, self.embedder.notices = self.embedder.notices, []
        for text in notices:
            self.notice(text)

    def _say_unavailable(self) -> None:
        error = self.embedder.error
        if error is not None:
            self._say_once(f"{self.purpose} by meaning is off ({error}); by words")
        else:
            self._say_once(
                f"{self.purpose} by meaning is not ready yet (its models load); by words"
            )

    def _say_once(self, text: str) -> None:
        if text not in self._said:
            self._said.add(text)
            self.notice(text)
