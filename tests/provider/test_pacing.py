"""Socket reads of a streamed answer gathered a few events at a time (provider/pacing.py): on a
fake clock, a stream slower than its reader is read at most every READ_GAP; a fast one never
waits; through the provider and real loopback servers the answer is the same, read in fewer
reads, and what one socket read brought of a chunked body goes on without a pause."""

from __future__ import annotations

import itertools
import json
import socket
import threading
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

import pytest
from cbenv import provider_settings
from fakeserver import FakeServer, text
from waits import returns_within

from countbot_cli.messages import ChatRequest, Finished, StreamEvent, TextDelta
from countbot_cli.provider import pacing
from countbot_cli.provider.openai_compat import OpenAICompatProvider
from countbot_cli.provider.pacing import READ_GAP, paced, readable


class Clock:
    """A fake clock; `sleep` advances it and records the pause."""

    def __init__(self) -> None:
        self.now = 0.0
        self.pauses: list[float] = []

    def __call__(self) -> float:
        return self.now

    def sleep(self, seconds: float) -> None:
        self.pauses.append(seconds)
        self.now += seconds


def arrivals(clock: Clock, times: list[float], reads: list[float]) -> Callable[..., bytes]:
    """The read of a socket whose event i arrives at times[i]: a read waits for the next event
    not there yet and takes every event arrived by then (b"" once all are read). `reads`
    records when each read returned."""
    left = list(times)

    def read(max_bytes: int = 65536, timeout: float | None = None) -> bytes:
        if not left:
            return b""
        clock.now = max(clock.now, left[0])  # waits for the next event
        n = sum(1 for t in left if t <= clock.now)
        del left[:n]
        reads.append(clock.now)
        return b"e" * n

    return read


def drain(read: Callable[..., bytes], work: float, clock: Clock) -> list[int]:
    """Read until the end, `work` seconds of the reader's work after each read: events a read."""
    got = []
    while data := read(65536):
        got.append(len(data))
        clock.now += work
    return got


def test_a_stream_slower_than_its_reader_is_read_at_most_every_gap() -> None:
    clock, reads = Clock(), []
    times = [0.010 * k for k in range(1, 101)]  # 100 events, one every 10 ms
    gap = 0.020
    got = drain(
        paced(arrivals(clock, times, reads), gap, clock=clock, sleep=clock.sleep), 5e-4, clock
    )
    assert sum(got) == 100  # every event, in order of arrival
    assert all(b - a >= gap - 1e-9 for a, b in zip(reads, reads[1:], strict=False))
    assert len(reads) <= 52  # 100 events in about 50 reads, not 100
    assert max(got) <= 3


def test_a_stream_faster_than_its_reader_is_never_paused() -> None:
    clock = Clock()
    blocks = [b"x"] * 50  # all there already: no read waits (a burst, a mocked transport)
    read = paced(lambda *a, **k: blocks.pop(0) if blocks else b"", clock=clock, sleep=clock.sleep)
    assert drain(read, 0.0, clock) == [1] * 50
    assert clock.pauses == []


def test_the_first_read_is_never_delayed_and_the_pause_counts_the_readers_work() -> None:
    clock, reads = Clock(), []
    third = READ_GAP / 3
    times = [0.5, 0.5 + third, 0.5 + 2 * third]
    read = paced(arrivals(clock, times, reads), clock=clock, sleep=clock.sleep)
    assert read(100) == b"e" and clock.pauses == []  # waited for the first event: no pause
    clock.now += third  # the reader's work: the pause is what is left of the gap
    assert read(100) == b"ee"
    assert clock.pauses == [pytest.approx(READ_GAP - third)]
    clock.now += 2 * READ_GAP  # longer than the gap: no pause
    assert read(100) == b"" and len(clock.pauses) == 1


def test_no_pause_when_more_is_waiting_already() -> None:
    # the end of an answer right behind its last token: read at once, not a gap later
    clock, reads = Clock(), []
    waiting = [True, False]
    read = paced(
        arrivals(clock, [0.1, 0.1001, 0.2], reads),
        clock=clock,
        sleep=clock.sleep,
        ready=lambda: waiting.pop(0) if waiting else False,
    )
    assert read(100) == b"e"  # the read waited for the server: paced from now on
    clock.now += 0.0002  # the reader's work; the tail arrived meanwhile
    assert read(100) == b"e" and clock.pauses == []  # waiting: read at once
    assert read(100) == b"e" and clock.pauses == [pytest.approx(READ_GAP)]
    assert read(100) == b"" and reads == pytest.approx([0.1, 0.1002, 0.2])


def test_readable_tells_whether_bytes_wait_on_a_socket() -> None:
    a, b = socket.socketpair()
    with a, b:
        ready = readable(a)
        assert not ready()
        b.sendall(b"data: x\n\n")
        assert ready()
        a.recv(100)
        assert not ready()
    assert not ready()  # closed: not ready, no error


def test_ctrl_c_during_a_pause_stops_the_stream() -> None:
    clock, reads = Clock(), []

    def interrupted(seconds: float) -> None:
        raise KeyboardInterrupt

    read = paced(arrivals(clock, [0.1, 0.11, 0.12], reads), clock=clock, sleep=interrupted)
    assert read(100) == b"e"
    with pytest.raises(KeyboardInterrupt):
        read(100)
    assert reads == [0.1]  # nothing read after the Ctrl-C


class Wire:
    """A socket on the fake clock whose writes (bytes) arrive at given times: `read` waits for
    the next write not there yet and takes all that has arrived; `wait(n, seconds)` sleeps until
    n bytes are waiting or the seconds have passed, as poll() with SO_RCVLOWAT does."""

    def __init__(self, clock: Clock, writes: list[tuple[float, bytes]]) -> None:
        self.clock, self.left = clock, list(writes)
        self.reads: list[tuple[float, bytes]] = []  # (when, what) of each read
        self.waits: list[tuple[int, float]] = []

    def _waiting(self) -> int:
        return sum(len(data) for at, data in self.left if at <= self.clock.now)

    def read(self, max_bytes: int = 65536, timeout: float | None = None) -> bytes:
        if not self.left:
            return b""
        self.clock.now = max(self.clock.now, self.left[0][0])
        got = b"".join(data for at, data in self.left if at <= self.clock.now)
        self.left = [(at, data) for at, data in self.left if at > self.clock.now]
        self.reads.append((self.clock.now, got))
        return got

    def wait(self, n: int, seconds: float) -> None:
        self.waits.append((n, seconds))
        until = self.clock.now + seconds
        for at, _ in self.left:  # the first arrival that brings the bytes waited for
            if at > until:
                break
            self.clock.now = max(self.clock.now, at)
            if self._waiting() >= n:
                return
        self.clock.now = max(self.clock.now, until)


EVENT = b'data: {"choices": [{"delta": {"content": "word"}}]}\n\n'
END = b'data: {"choices": [{"delta": {}, "finish_reason": "stop"}]}\n\n' + b"data: [DONE]\n\n"


def _tokens(n: int, every: float, start: float = 0.1) -> list[tuple[float, bytes]]:
    return [(start + every * k, EVENT) for k in range(n)]


def _paced_on(wire: Wire, clock: Clock) -> Callable[..., bytes]:
    return paced(wire.read, clock=clock, sleep=clock.sleep, wait=wire.wait)


def test_at_100_events_a_second_a_read_waits_for_several_events_bytes() -> None:
    clock = Clock()
    wire = Wire(clock, _tokens(200, 0.010))
    got = drain(_paced_on(wire, clock), 2e-4, clock)
    assert sum(got) == 200 * len(EVENT)  # every byte, in order
    assert len(wire.reads) <= 85  # about one read in 2.5 events; a gap's pause made 134
    assert wire.waits and clock.pauses[:3] == clock.pauses  # after a few reads, waits only
    ends = [at for at, _ in wire.reads]
    assert all(b - a >= READ_GAP for a, b in zip(ends[5:], ends[6:], strict=False))
    assert max(data.count(b"data:") for _, data in wire.reads) == 3  # never a fourth event


def test_without_a_wait_for_bytes_the_reads_are_a_gap_apart_as_before() -> None:
    clock = Clock()
    wire = Wire(clock, _tokens(200, 0.010))
    drain(paced(wire.read, clock=clock, sleep=clock.sleep), 2e-4, clock)
    assert len(wire.reads) >= 120  # a read every 15 ms


def test_the_end_of_an_answer_ends_the_wait_when_it_brings_the_bytes_waited_for() -> None:
    for last in range(60, 63):  # wherever the last token falls among the events a read gathers
        clock = Clock()
        tokens = _tokens(last, 0.010)
        end_at = tokens[-1][0] + 0.0005  # the finish, the usage and [DONE], right behind
        usage = b'data: {"choices": [], "usage": {"prompt_tokens": 9, "completion_tokens": 60}}\n\n'
        wire = Wire(clock, [*tokens, (end_at, END + usage)])
        drain(_paced_on(wire, clock), 2e-4, clock)
        assert wire.reads[-1][0] == pytest.approx(end_at)  # read as it arrived, not later


def test_an_end_smaller_than_the_bytes_waited_for_is_read_when_the_wait_times_out() -> None:
    lags = []
    for last in range(60, 63):
        clock = Clock()
        tokens = _tokens(last, 0.010)
        end_at = tokens[-1][0] + 0.0005
        wire = Wire(clock, [*tokens, (end_at, b"data: [DONE]\n\n")])
        drain(_paced_on(wire, clock), 2e-4, clock)
        assert wire.reads[-1][1].endswith(b"[DONE]\n\n")
        lags.append(wire.reads[-1][0] - end_at)
    # [DONE] alone never brings the bytes waited for: the wait's timeout reads it, within the
    # time the events waited for take to come and the slack
    assert min(lags) > 0 and max(lags) <= pacing.GATHER * 0.010 + pacing.SLACK + 1e-6


def test_a_stream_slower_than_the_wait_allows_is_read_as_each_event_comes() -> None:
    clock = Clock()
    wire = Wire(clock, _tokens(50, 0.030))  # 33 events a second
    drain(_paced_on(wire, clock), 2e-4, clock)
    assert len(wire.reads) == 50 and wire.waits == []


def test_where_the_wait_for_bytes_is_not_known_to_work_there_is_none(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setattr(pacing.sys, "platform", "darwin")  # poll() may ignore the mark there
    a, b = socket.socketpair()
    with a, b:
        assert pacing.bytes_or_time(a) is None  # paced() then sleeps a gap (the test above)


def test_a_wait_for_bytes_on_a_socket_leaves_its_low_water_mark_as_it_was() -> None:
    srv = socket.create_server(("127.0.0.1", 0))
    with srv:
        client = socket.create_connection(srv.getsockname())
        conn, _ = srv.accept()
        with client, conn:
            wait = pacing.bytes_or_time(client)
            if wait is None:
                pytest.skip("no SO_RCVLOWAT wait on this platform")
            mark = client.getsockopt(socket.SOL_SOCKET, socket.SO_RCVLOWAT)
            conn.sendall(b"x" * 50)
            returns_within(lambda: wait(1000, 0.05), "a wait for bytes that never come")
            assert client.getsockopt(socket.SOL_SOCKET, socket.SO_RCVLOWAT) == mark
            client.settimeout(10)  # a hang bound: a mark left at 1000 bytes would wait it out
            assert client.recv(100) == b"x" * 50  # read at once: the mark is back at 1 byte
            threading.Timer(0.05, conn.sendall, (b"y" * 2000,)).start()
            returns_within(lambda: wait(1000, 60.0), "a wait whose bytes come")
            assert len(client.recv(4096)) >= 1000


# ---- through the provider, against a real loopback server ----


def _chunk(piece: str, finish: str | None = None) -> bytes:
    delta = {"content": piece} if piece else {}
    body = {"choices": [{"index": 0, "delta": delta, "finish_reason": finish}]}
    return f"data: {json.dumps(body)}\n\n".encode()


class _Paced(BaseHTTPRequestHandler):
    """One event every 10 ms, each in a segment of its own; the last token, the finish, the
    usage and [DONE] in one write. A close-delimited body."""

    protocol_version = "HTTP/1.1"
    pieces = [f"w{i} " for i in range(20)]
    chunked = False
    per_write = 1  # events a write
    held = False  # the chunked body's end is held back after [DONE] until `release` is set
    release = threading.Event()
    peers: set[tuple[str, int]] = set()  # the client's connections

    def log_message(self, format: str, *args: Any) -> None:
        pass

    def _frame(self, data: bytes) -> bytes:
        return f"{len(data):x}\r\n".encode() + data + b"\r\n" if self.chunked else data

    def do_POST(self) -> None:
        self.peers.add(self.client_address)
        self.rfile.read(int(self.headers.get("content-length") or 0))
        self.send_response(200)
        self.send_header("Content-Type", "text/event-stream")
        if self.chunked:
            self.send_header("Transfer-Encoding", "chunked")
        else:
            self.send_header("Connection", "close")
        self.end_headers()
        self.connection.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        *first, last = self.pieces
        for at in range(0, len(first), self.per_write):
            group = first[at : at + self.per_write]
            self.wfile.write(b"".join(self._frame(_chunk(piece)) for piece in group))
            self.wfile.flush()
            time.sleep(0.010 * self.per_write)
        usage = {"choices": [], "usage": {"prompt_tokens": 1, "completion_tokens": 12}}
        end = [_chunk(last), _chunk("", "stop"), f"data: {json.dumps(usage)}\n\n".encode()]
        end.append(b"data: [DONE]\n\n")
        body_end = b"0\r\n\r\n" if self.chunked else b""
        held_back = b"" if self.held else body_end
        self.wfile.write(b"".join(self._frame(part) for part in end) + held_back)
        self.wfile.flush()
        if self.held:
            self.release.wait(60)  # a hang bound
            self.wfile.write(body_end)
            self.wfile.flush()


class _ChunkedPaced(_Paced):
    """A chunked body (as OpenAI's, llama.cpp's and Ollama's servers send): one event an HTTP
    chunk; the end is four chunks that one socket read brings. Served twice."""

    pieces = [f"w{i} " for i in range(12)]
    chunked = True


@contextmanager
def _provider_on(handler: type[BaseHTTPRequestHandler]) -> Iterator[OpenAICompatProvider]:
    """A provider streaming from a loopback server with `handler`."""
    server = ThreadingHTTPServer(("127.0.0.1", 0), handler)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    base = f"http://127.0.0.1:{server.server_address[1]}/v1"
    provider = OpenAICompatProvider(provider_settings(api_base=base, api_key="k", model="m"))
    try:
        yield provider
    finally:
        provider.close()
        server.shutdown()
        server.server_close()


def _recording_pauses(monkeypatch: pytest.MonkeyPatch) -> list[float]:
    """The pauses paced reads make (really slept), in order."""
    pauses: list[float] = []
    real_paced = pacing.paced

    def recording(read: Callable[..., bytes], gap: float = READ_GAP, **kw: Any) -> Any:
        def sleep(seconds: float) -> None:
            pauses.append(seconds)
            time.sleep(seconds)

        return real_paced(read, gap, sleep=sleep, **kw)

    monkeypatch.setattr(pacing, "paced", recording)
    return pauses


def test_a_paced_server_gives_the_same_answer_in_fewer_reads(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    pauses = _recording_pauses(monkeypatch)
    with _provider_on(_Paced) as provider:
        events = list(provider.stream(ChatRequest(model="m", messages=[])))
    texts = [e.text for e in events if isinstance(e, TextDelta)]
    assert "".join(texts) == "".join(_Paced.pieces)
    ends = set(itertools.accumulate(len(piece) for piece in _Paced.pieces))
    assert set(itertools.accumulate(len(text) for text in texts)) <= ends  # whole events
    assert isinstance(events[-1], Finished) and events[-1].content == "".join(_Paced.pieces)
    assert pauses  # the reads were gathered (how many events each found depends on the load)


def test_the_chunks_one_read_brought_go_on_without_a_pause(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    pauses = _recording_pauses(monkeypatch)
    answers, paused_at = [], []
    with _provider_on(_ChunkedPaced) as provider:
        for _ in range(2):  # a second request: its own stream is paced, from its first read
            seen: list[tuple[StreamEvent, int]] = []
            for event in provider.stream(ChatRequest(model="m", messages=[])):
                seen.append((event, len(pauses)))
            assert isinstance(seen[-1][0], Finished)
            answers.append(seen[-1][0].content)
            last_text = max(i for i, (e, _) in enumerate(seen) if isinstance(e, TextDelta))
            paused_at.append((seen[last_text][1], seen[-1][1]))
    assert answers == ["".join(_ChunkedPaced.pieces)] * 2
    assert pauses  # the tokens 10 ms apart were gathered
    # the last token and the end came in one read: no pause between them (there were three:
    # one after each HTTP chunk when the chunks were paced rather than the socket reads)
    assert [before == after for before, after in paused_at] == [True, True]


class _ThreeAWrite(_ChunkedPaced):
    """Three events (three HTTP chunks) a write, 30 ms apart."""

    pieces = [f"w{i} " for i in range(31)]
    per_write = 3


@pytest.mark.parametrize(
    "read_bytes",
    [None, 64],
    ids=["a read takes a write", "a read takes an event, as a TLS read takes a record"],
)
def test_the_events_one_wake_brought_go_on_as_one_delta(
    monkeypatch: pytest.MonkeyPatch, read_bytes: int | None
) -> None:
    if read_bytes is not None:
        import httpcore._sync.http11 as http11

        monkeypatch.setattr(http11.HTTP11Connection, "READ_NUM_BYTES", read_bytes)
    with _provider_on(_ThreeAWrite) as provider:
        events = list(provider.stream(ChatRequest(model="m", messages=[])))
    texts = [e.text for e in events if isinstance(e, TextDelta)]
    assert "".join(texts) == "".join(_ThreeAWrite.pieces)
    writes = [_ThreeAWrite.pieces[i : i + 3] for i in range(0, 30, 3)]
    ends = set(itertools.accumulate(len("".join(group)) for group in writes))
    ends.add(len("".join(_ThreeAWrite.pieces)))  # the last token, with the end
    ends |= {3, 6}  # the first read is the request's, before the pacing: an event a delta
    # whole writes a delta (a wake may take two), not a delta an HTTP chunk or a read
    assert set(itertools.accumulate(len(text) for text in texts)) <= ends
    assert len(texts) <= len(writes) + 3


def test_reads_tell_the_decoder_which_events_are_still_in_the_parser() -> None:
    reads = pacing.Reads()
    reads.add(b"data: a\n\ndata: b\n\ndata: c\n\n")
    assert [reads.held(1), reads.held(1), reads.held(1)] == [True, True, False]
    reads.add(b"data: d\n\ndata: e")  # the second cut by the read's end: not waited for
    assert not reads.held(1)
    reads.add(b"data: f\n\n: keep-alive\n\ndata: g\n\n")  # a comment is not an event
    assert reads.held(1) and not reads.held(1)


def test_reads_hold_events_while_the_next_read_is_there_up_to_join_reads() -> None:
    waiting = [True]
    reads = pacing.Reads(ready=lambda: waiting[0])
    held = []
    for _ in range(pacing.Reads.JOIN + 2):  # a burst: a read an event, the next always there
        reads.add(b"data: x\n\n")
        held.append(reads.held(1))
    assert held == [True] * (pacing.Reads.JOIN - 1) + [False, True, True]
    waiting[0] = False
    reads.add(b"data: y\n\n")
    assert not reads.held(1)  # nothing there: the events go on


class _Interrupted:
    """Chunks, then Ctrl-C in the read for the next one."""

    def __init__(self, chunks: list[bytes]) -> None:
        self.chunks = chunks

    def __iter__(self) -> Iterator[bytes]:
        yield from self.chunks
        raise KeyboardInterrupt


def test_events_held_when_a_body_ends_without_done_still_go_on() -> None:
    provider = OpenAICompatProvider(provider_settings(api_base="http://x/v1", api_key="k"))
    held = pacing.Body(rest=lambda chunks: None, held=lambda decoded: True)  # as if owed more
    body = iter([_chunk("too"), _chunk("", "stop")])  # a finish, then the end: no [DONE]
    events = list(provider._decode_stream(_chunk("kept "), body, held))
    assert [e.text for e in events if isinstance(e, TextDelta)] == ["kept too"]
    assert isinstance(events[-1], Finished) and events[-1].content == "kept too"


def test_ctrl_c_in_a_read_still_shows_the_events_held_for_it() -> None:
    provider = OpenAICompatProvider(provider_settings(api_base="http://x/v1", api_key="k"))
    held = pacing.Body(rest=lambda chunks: None, held=lambda decoded: True)  # as if owed more
    stream = provider._decode_stream(_chunk("kept "), iter(_Interrupted([_chunk("too")])), held)
    got = []
    with pytest.raises(KeyboardInterrupt):
        for event in stream:
            got.append(event)
    assert [e.text for e in got if isinstance(e, TextDelta)] == ["kept too"]


class _HeldOpen(_ChunkedPaced):
    """The chunked body's end held back after [DONE]."""

    pieces = ["a ", "b ", "c "]
    held = True
    release = threading.Event()
    peers: set[tuple[str, int]] = set()


def test_a_streamed_answer_read_to_its_end_leaves_its_connection_for_the_next_request() -> None:
    with FakeServer() as server:
        provider = OpenAICompatProvider(
            provider_settings(api_base=server.base_url, api_key="k", model="m")
        )
        try:
            for n in range(
                3
            ):  # a REPL's turns, a tool round's calls: one connection, one handshake
                server.add(text(f"answer {n}", chunk_size=3))
                events = list(provider.stream(ChatRequest(model="m", messages=[])))
                assert isinstance(events[-1], Finished) and events[-1].content == f"answer {n}"
        finally:
            provider.close()
        peers = {req.peer for req in server.requests}
    assert len(peers) == 1  # 3 before: the body was left at [DONE], unread, and closed


def test_the_end_of_a_body_is_not_waited_for_after_done() -> None:
    # a server that holds its body's end back: the answer is complete at [DONE], not later
    try:
        with _provider_on(_HeldOpen) as provider:
            for _ in range(2):
                events = returns_within(
                    lambda: list(provider.stream(ChatRequest(model="m", messages=[]))),
                    "an answer whose body's end is held back",
                )
                assert isinstance(events[-1], Finished) and events[-1].content == "a b c "
    finally:
        _HeldOpen.release.set()
    assert len(_HeldOpen.peers) == 2  # that connection could not be kept


def test_a_read_that_would_wait_is_refused_while_asked_to() -> None:
    clock, reads = Clock(), []
    refusing = [False]
    waiting = [False]
    read = paced(
        arrivals(clock, [0.1, 0.2, 0.3], reads),
        clock=clock,
        sleep=clock.sleep,
        ready=lambda: waiting[0],
        refuse=lambda: refusing[0],
    )
    assert read(100) == b"e"
    refusing[0] = True
    with pytest.raises(pacing.NotThereYet):
        read(100)  # nothing waiting: refused, not waited for
    assert reads == [pytest.approx(0.1)] and clock.pauses == []
    waiting[0] = True
    assert read(100) == b"e"  # bytes waiting: read
