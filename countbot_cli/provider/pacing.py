"""Socket reads of a streamed answer gathered a few events at a time, once the server is the slower one.

A server streaming 100 tokens a second sends an event every 10 ms, each in a TCP segment of its
own: read as they come, every token wakes countbot and costs a read through httpcore and h11,
which on a real terminal (caches cold after 10 ms of sleep; the sleep itself costs ~45 µs of
kernel time on a VM) is most of a plain answer's CPU beyond start-up. `paced` keeps the socket
reads of a response at least `gap` seconds apart (READ_GAP, 15 ms) once one read had to wait for
the server, so a read finds the events that arrived meanwhile.

It is the socket that is paced, not the body's chunks: `paced_response` wraps the read of the
response's network stream (httpcore's documented `network_stream` extension), so what one read
brought (several HTTP chunks of a chunked body: h11 hands on one at a time) goes on without a
pause. Pausing between chunks instead held the end of a chunked answer (last token, finish,
usage, [DONE]: one write, four chunks) for three gaps. After [DONE], `rest` reads what has
arrived of the body's end and never waits (a read that would is refused): a body read to its end
leaves its connection in the pool, where one stopped at [DONE] closed it, and every request,
each turn of the REPL and each call of a tool round, paid a new TCP and TLS handshake.

Text reaches the screen at most `gap` later than it arrived (the rendered view draws 10 frames
a second anyway), and so does the end of the answer: the time from the last token to exit is
about half the gap plus the final render. A stream that comes faster than it is read (a burst,
a mocked transport) is never paused, nor is a read when bytes are already waiting (the end of an
answer right behind its last token). Nothing is paused before the first chunk; a pause is a
plain `time.sleep`, which Ctrl-C (KeyboardInterrupt) and SIGTERM (Terminated) interrupt as they
do a read; the read timeout still applies to each read.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import Any

READ_GAP = 0.015  # seconds between two reads, at the least, of a stream slower than its reader
WAITED = 0.001  # a read that took this long waited for the server

Read = Callable[..., bytes]  # a network stream's read(max_bytes, timeout=None)


class NotThereYet(Exception):
    """A read that would have waited for the server, refused (`paced_response`'s rest)."""


def paced(
    read: Read,
    gap: float = READ_GAP,
    *,
    ready: Callable[[], bool] = lambda: False,
    refuse: Callable[[], bool] = lambda: False,
    clock: Callable[[], float] = time.monotonic,
    sleep: Callable[[float], None] = time.sleep,
) -> Read:
    """`read` with each call at least `gap` after the end of the one before once a call waited
    for the server (it is the slower one from then on), unless `ready()` says more is waiting
    already: a server writes the end of an answer (finish, usage, [DONE]) right behind its last
    token, which a pause would hold back by up to `gap`. While `refuse()`, a read that would
    wait raises NotThereYet instead."""
    last_end: float | None = None
    waited = False

    def paced_read(*args: Any, **kwargs: Any) -> bytes:
        nonlocal last_end, waited
        if refuse() and not ready():
            raise NotThereYet
        if waited and last_end is not None:
            pause = last_end + gap - clock()
            if pause > 0 and not ready():
                sleep(pause)
        start = clock()
        data = read(*args, **kwargs)
        last_end = clock()
        waited = waited or last_end - start >= WAITED
        return data

    return paced_read


REST_BYTES = 64 * 1024  # what is read of a body after its [DONE], at the most


@contextmanager
def paced_response(resp: Any, gap: float = READ_GAP) -> Iterator[Callable[[Iterator[bytes]], None]]:
    """While in the block, the socket reads of `resp` (an httpx response being streamed) are
    `paced`; its network stream is left as it was after (the connection may serve another
    request). Nothing is paced without a network stream and its socket (a mocked transport,
    HTTP/2).

    The block gets `rest(chunks)`: read what is left of the body (`chunks`, its iterator) as
    far as it has arrived, never waiting. A body read to its end gives its connection back to
    the pool for the next request; one left unread at [DONE] is closed with its connection."""
    stream = resp.extensions.get("network_stream")
    sock = stream.get_extra_info("socket") if stream is not None else None
    if sock is None:
        yield _no_rest
        return
    draining = False

    def rest(chunks: Iterator[bytes]) -> None:
        nonlocal draining
        draining, size = True, 0
        try:
            for chunk in chunks:  # the chunked body's end, normally; EOF for a closed one
                size += len(chunk)
                if size > REST_BYTES:
                    return
        except Exception:  # NotThereYet, a reset: the connection is closed, as it was before
            return
        finally:
            draining = False

    try:
        stream.read = paced(stream.read, gap, ready=readable(sock), refuse=lambda: draining)
    except AttributeError:  # a stream that cannot take the wrapper: read unpaced
        yield _no_rest
        return
    try:
        yield rest
    finally:
        del stream.read  # the class's own read again


def _no_rest(chunks: Iterator[bytes]) -> None:
    """No socket to ask whether the rest has arrived: the body is left as it is."""


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
