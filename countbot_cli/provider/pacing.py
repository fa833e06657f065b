"""Reads of a streamed answer gathered a few events at a time, once the server is the slower one.

A server streaming 100 tokens a second sends an event every 10 ms, each in a TCP segment of its
own: read as they come, every token wakes countbot and costs a trip through httpx, httpcore and
h11, which on a real terminal (caches cold after 10 ms of sleep) is most of a plain answer's CPU
beyond start-up. `paced` keeps the reads of a stream at least `gap` seconds apart (READ_GAP,
15 ms) once one read had to wait for the server, so a read finds the events that arrived
meanwhile and the trip is paid for one and a half to several. Text reaches the screen at most
`gap` later than it arrived (the rendered view draws 10 frames a second anyway), and so does
the end of the answer: 20 ms would gather two tokens of a 100 tok/s stream but put the time
from the last token to exit (6 ms) at about 20 ms, issue 25's bound; a stream
that comes faster than it is read (a burst, a mocked transport) is never paused. Nothing is
paused before the first chunk; a pause is a plain `time.sleep`, which Ctrl-C
(KeyboardInterrupt) and SIGTERM (Terminated) interrupt as they do a read; the read timeout
still applies to each read.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Iterator
from typing import Any

READ_GAP = 0.015  # seconds between two reads, at the least, of a stream slower than its reader
WAITED = 0.001  # a read that took this long waited for the server


def paced(
    chunks: Iterator[bytes],
    gap: float = READ_GAP,
    *,
    ready: Callable[[], bool] = lambda: False,
    clock: Callable[[], float] = time.monotonic,
    sleep: Callable[[float], None] = time.sleep,
) -> Iterator[bytes]:
    """`chunks` as they are read, each read at least `gap` after the one before once a read
    waited for the server (it is the slower one from then on), unless `ready()` says more is
    waiting already: a server writes the end of an answer (finish, usage, [DONE]) right behind
    its last token, which a pause would hold back by up to `gap`."""
    waited = False
    while True:
        start = clock()
        chunk = next(chunks, None)
        if chunk is None:
            return
        end = clock()
        waited = waited or end - start >= WAITED
        yield chunk
        if waited and (pause := end + gap - clock()) > 0 and not ready():
            sleep(pause)


def readable(sock: Any) -> Callable[[], bool]:
    """Whether bytes are waiting on `sock` (or in its TLS buffer), asked without waiting; never
    raises (a closed socket is not ready)."""
    import select

    pending = getattr(sock, "pending", None)  # an SSLSocket's decrypted bytes not yet read
    poller = select.poll() if hasattr(select, "poll") else None
    if poller is not None:
        poller.register(sock, select.POLLIN)

    def ready() -> bool:
        try:
            if pending is not None and pending() > 0:
                return True
            if poller is not None:  # bytes, or the end (HUP); not a closed socket (NVAL)
                return any(ev & (select.POLLIN | select.POLLHUP) for _, ev in poller.poll(0))
            return bool(select.select([sock], [], [], 0)[0])
        except (OSError, ValueError):
            return False

    return ready
