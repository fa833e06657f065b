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
pause, and together (`Reads`: the decoder hands a read's events on as one delta). Pausing
between chunks instead held the end of a chunked answer (last token, finish, usage, [DONE]: one
write, four chunks) for three gaps. After [DONE], `rest` reads the body's end if it arrives
within REST_WAIT (10 ms: servers write it right behind), else a read is refused: a body read to
its end leaves its connection in the pool, where one stopped at [DONE] closed it, and every
request, each turn of the REPL and each call of a tool round, paid a new TCP and TLS handshake.

Text reaches the screen at most `gap` later than it arrived (the rendered view draws 10 frames
a second anyway), and so does the end of the answer: the time from the last token to exit is
about half the gap plus the final render. A stream that comes faster than it is read (a burst,
a mocked transport) is never paused, nor is a read when bytes are already waiting (the end of an
answer right behind its last token). Nothing is paused before the first chunk; a pause is a
plain `time.sleep`, which Ctrl-C (KeyboardInterrupt) and SIGTERM (Terminated) interrupt as they
do a read; the read timeout still applies to each read.

At 60-170 events a second (a gap's pause finds one or two), the stream is waited for by its
bytes instead where the kernel can (Linux's SO_RCVLOWAT, which poll() honours): the reader
sleeps until about GATHER events' bytes are waiting, or as long as they take to come (`Cadence`,
from the stream so far) plus SLACK. At 100 tok/s a wake finds 3 events, then 2 (the wait for a
third times out just before it comes), not 1 or 2: 40 wakes a second, not 67,
and the end of the answer (finish, usage and [DONE] behind the last token; a close-delimited
body's FIN) ends the wait at once whenever it brings the bytes waited for; when it does not, the
timeout does, within about GATHER events' time. Slower streams are read as each event comes.
"""

from __future__ import annotations

import math
import sys
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import Any, NamedTuple

READ_GAP = 0.015  # seconds between two reads, at the least, of a stream slower than its reader
WAITED = 0.001  # a read that took this long waited for the server
GATHER = 2.5  # events a wait for bytes lets gather (when they take longer than READ_GAP)
SLACK = 0.005  # seconds a wait for bytes allows beyond the time they take to come
WAIT_MAX = 0.040  # a stream slower than this for GATHER events is read as each one comes

Read = Callable[..., bytes]  # a network stream's read(max_bytes, timeout=None)
Wait = Callable[[int, float], None]  # wait(n, seconds): until n bytes are waiting, at the most


class NotThereYet(Exception):
    """A read that would have waited for the server, refused (`paced_response`'s rest)."""


def events_in(data: bytes) -> int:
    """The whole SSE events `data` holds: its `data:` lines or its blank lines, whichever are
    fewer (a JSON payload cannot hold a line break, so text about `data:` is not one; an
    event cut by the read's end is not counted, nor a comment's blank line)."""
    return min(data.count(b"\n\n"), data.count(b"\ndata:") + data.startswith(b"data:"))


class Cadence:
    """How fast a stream's events come, and how big they are, from its recent reads (a moving
    average, so a pause in the stream is soon forgotten). Events are counted by `events_in`; a
    read that found none still counts its time and bytes."""

    DECAY = 0.8  # weight left to the reads before, at each read
    KNOWN = 3  # reads before the figures are trusted

    def __init__(self) -> None:
        self._at: float | None = None  # when the last read ended
        self._reads = 0
        self._seconds = self._events = self._bytes = 0.0

    def add(self, data: bytes, at: float) -> None:
        """A read that ended at `at` with `data`."""
        if self._at is not None:
            d = self.DECAY
            self._seconds = d * self._seconds + (at - self._at)
            self._events = d * self._events + events_in(data)
            self._bytes = d * self._bytes + len(data)
            self._reads += 1
        self._at = at

    def span(self, events: float) -> float | None:
        """Seconds `events` events take to come (None: not known yet)."""
        if self._reads < self.KNOWN or self._events <= 0:
            return None
        return events * self._seconds / self._events

    def size(self, events: float) -> int:
        """Bytes of `events` events, about."""
        return int(events * self._bytes / self._events) if self._events > 0 else 1


def paced(
    read: Read,
    gap: float = READ_GAP,
    *,
    ready: Callable[[], bool] = lambda: False,
    refuse: Callable[[], bool] = lambda: False,
    wait: Wait | None = None,
    clock: Callable[[], float] = time.monotonic,
    sleep: Callable[[float], None] = time.sleep,
) -> Read:
    """`read` with each call at least `gap` after the end of the one before once a call waited
    for the server (it is the slower one from then on), unless `ready()` says more is waiting
    already: a server writes the end of an answer (finish, usage, [DONE]) right behind its last
    token, which a pause would hold back by up to `gap`. With `wait` (bytes_or_time), a stream
    whose GATHER events take longer than `gap` (and at most WAIT_MAX) is waited for by their
    bytes instead, or as long as they take to come and SLACK. While `refuse()`, a read that would
    wait raises NotThereYet instead."""
    last_end: float | None = None
    waited = False
    cadence = Cadence()

    def pause(since: float) -> None:
        span = cadence.span(GATHER) if wait is not None else None
        if wait is not None and span is not None and gap < span <= WAIT_MAX:
            left = since + span + SLACK - clock()
            if left > 0:
                wait(cadence.size(GATHER), left)
            return
        left = since + gap - clock()
        if left > 0:
            sleep(left)

    def paced_read(*args: Any, **kwargs: Any) -> bytes:
        nonlocal last_end, waited
        if refuse() and not ready():
            raise NotThereYet
        if waited and last_end is not None and not ready():
            pause(last_end)
        start = clock()
        data = read(*args, **kwargs)
        last_end = clock()
        waited = waited or last_end - start >= WAITED
        if waited:
            cadence.add(data, last_end)
        return data

    return paced_read


class Reads:
    """The socket reads of a streamed body, for its decoder. The HTTP parser hands on what one
    read brought a chunk at a time (h11: each HTTP chunk of a chunked body, and OpenAI's,
    llama.cpp's and Ollama's servers send an event a chunk), and a TLS socket gives a read one
    record (an event); `held` tells the decoder whether more events are to come without a wait:
    the rest of the last read's, still in the parser, or a next read's that is `ready()`
    (up to JOIN reads). The events of a wake then go on together: one delta to the engine and
    the view, not one a token."""

    JOIN = 8  # reads whose events go on together, at the most (a burst is shown as it comes)

    def __init__(self, ready: Callable[[], bool] = lambda: False) -> None:
        self.count = 0  # socket reads so far
        self.events = 0  # whole events the last one brought
        self._ready = ready
        self._seen = 0  # the read whose events are being decoded
        self._owed = 0  # its events not decoded yet
        self._since = 0  # the read before those whose events are held

    def add(self, data: bytes) -> None:
        """A socket read that brought `data`."""
        self.count += 1
        self.events = events_in(data)

    def held(self, decoded: int) -> bool:
        """After `decoded` more events were decoded: whether more come without a wait (the
        last read brought more, still in the parser, or the next read's bytes are there). A
        read whose events are overcounted (a comment among them) has its events go on with the
        next read's, a read later."""
        if self._seen != self.count:
            self._seen, self._owed = self.count, self.events
        self._owed -= decoded
        if self._owed > 0 or (self.count - self._since < self.JOIN and self._ready()):
            return True
        self._since = self.count
        return False


class Body(NamedTuple):
    """What `paced_response` gives its block: `rest(chunks)` and `held(decoded)` (Reads)."""

    rest: Callable[[Iterator[bytes]], None]
    held: Callable[[int], bool]


REST_BYTES = 64 * 1024  # what is read of a body after its [DONE], at the most
REST_WAIT = 0.010  # seconds the body's end may take to come after [DONE] (a write of its own)


@contextmanager
def paced_response(resp: Any, gap: float = READ_GAP) -> Iterator[Body]:
    """While in the block, the socket reads of `resp` (an httpx response being streamed) are
    `paced`; its network stream is left as it was after (the connection may serve another
    request). Nothing is paced without a network stream and its socket (a mocked transport,
    HTTP/2).

    The block gets a Body: `rest(chunks)` reads what is left of the body (`chunks`, its
    iterator) as far as it arrives within REST_WAIT. A body read to its end gives its
    connection back to the pool for the next request; one left unread at [DONE] is closed with
    its connection. `held(decoded)` is Reads.held."""
    stream = resp.extensions.get("network_stream")
    sock = stream.get_extra_info("socket") if stream is not None else None
    if sock is None:
        yield UNPACED
        return
    draining = False
    ready = readable(sock)
    reads = Reads(ready)

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

    paced_read = paced(
        stream.read,
        gap,
        ready=ready,
        refuse=lambda: draining and not ready(REST_WAIT),
        wait=bytes_or_time(sock),
    )

    def read(*args: Any, **kwargs: Any) -> bytes:
        data = paced_read(*args, **kwargs)
        reads.add(data)
        return data

    try:
        stream.read = read
    except AttributeError:  # a stream that cannot take the wrapper: read unpaced
        yield UNPACED
        return
    try:
        yield Body(rest, reads.held)
    finally:
        del stream.read  # the class's own read again


def _no_rest(chunks: Iterator[bytes]) -> None:
    """No socket to ask whether the rest has arrived: the body is left as it is."""


def _never_held(decoded: int) -> bool:
    """No socket reads seen: each chunk's events go on as they are decoded."""
    return False


UNPACED = Body(_no_rest, _never_held)


def readable(sock: Any) -> Callable[..., bool]:
    """`ready(timeout=0)`: whether bytes are waiting on `sock` (or in its TLS buffer), waiting
    up to `timeout` seconds for them (with poll()); never raises (a closed socket is not
    ready)."""
    import select

    pending = getattr(sock, "pending", None)  # an SSLSocket's decrypted bytes not yet read
    poller = select.poll() if hasattr(select, "poll") else None
    if poller is not None:
        poller.register(sock, select.POLLIN)

    def ready(timeout: float = 0.0) -> bool:
        try:
            if pending is not None and pending() > 0:
                return True
            if poller is not None:  # bytes, or the end (HUP); not a closed socket (NVAL)
                got = poller.poll(math.ceil(timeout * 1000))
                return any(ev & (select.POLLIN | select.POLLHUP) for _, ev in got)
            return bool(select.select([sock], [], [], timeout)[0])
        except (OSError, ValueError):
            return False

    return ready


def bytes_or_time(sock: Any) -> Wait | None:
    """A `Wait` on `sock`: poll() with the socket's receive low-water mark (SO_RCVLOWAT) at the
    bytes wanted, put back after, so every other read of the socket (the rest of this body, the
    next response on the connection) is as it was. Ctrl-C and SIGTERM interrupt it as they do a
    read. None where that is not known to work (Linux only: elsewhere poll() may wake at the
    first byte whatever the mark, which would read every event as it comes)."""
    import select
    import socket

    if not sys.platform.startswith("linux") or not hasattr(select, "poll"):
        return None
    try:
        mark = sock.getsockopt(socket.SOL_SOCKET, socket.SO_RCVLOWAT)
        poller = select.poll()
        poller.register(sock, select.POLLIN)
    except (OSError, ValueError, AttributeError):
        return None

    def wait(n: int, seconds: float) -> None:
        try:
            sock.setsockopt(socket.SOL_SOCKET, socket.SO_RCVLOWAT, max(n, mark))
        except OSError:  # the socket is closed or refuses: the read says what happened
            return
        try:
            poller.poll(math.ceil(seconds * 1000))
        finally:
            try:
                sock.setsockopt(socket.SOL_SOCKET, socket.SO_RCVLOWAT, mark)
            except OSError:
                pass

    return wait
