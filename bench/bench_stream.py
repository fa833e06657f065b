"""CPU per event of a streamed answer, layer by layer, in process (issue 25 point 4).

A forked loopback server streams N chat-completion chunks (OpenAI's shape, gen_doc's markdown one
token an event) over HTTP/1.1, chunked or close-delimited. By default it streams in lock step:
the next event is sent only once the client has handled the last one (a byte on a pipe), so each
event arrives in a read of its own, as at 100 tok/s on a real link, however loaded the machine
is. The client's CPU (user+sys of this process; the server is another) is measured for each
stage, each adding a layer to the one before:

  socket    recv of each event on a plain socket (the syscalls' floor; no HTTP parsing)
  httpx     httpx's Response.iter_bytes (httpx -> httpcore -> h11)
  sse       + the SSE decoder (provider/assemble.sse_reads)
  json      + jsonsafe.loads_bounded of each payload
  assemble  + provider/assemble.Assembler.add (deltas -> events)
  provider  OpenAICompatProvider.stream: the same and its own loop ([DONE], errors, Finished)
  engine    Engine.run_turn on that provider (its stream loop) with a NullView
  plain     the same with `ask --plain`'s PlainView writing to /dev/null

A layer's cost is its stage's figure minus the one before. Lock step keeps the caches warm
between events (a lower bound); `--pace 100` sends on the schedule of a real 100 tok/s stream
instead (no lock step), so each event finds the caches cold as on a pty (`bench_render.py
--pty`), at the cost of 10 ms an event of wall time and more noise. `--burst` sends everything at once instead
(parsing alone: the HTTP layers then see a few large reads). `--against DIR` runs the same
stages on another checkout's package (e.g. /work/wt/base), interleaved with this one, in the
same run; this interpreter's packages (httpx) serve both. Figures: the median of `--reps` runs
(and their minimum), in microseconds of CPU per event.

usage: python bench/bench_stream.py [EVENTS] [--reps N] [--pace RATE | --burst] [--close]
           [--stages socket,httpx,...] [--against DIR ...]
"""

from __future__ import annotations

import argparse
import json
import os
import signal
import socket
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent
STAGES = ["socket", "httpx", "sse", "json", "assemble", "provider", "engine", "plain"]
WARM = 200  # events streamed once per stage before measuring (imports, first-call set-up)


# ---- the server (a forked process) ----


def _events(n: int) -> list[bytes]:
    sys.path.insert(0, str(HERE.parent / "tests" / "helpers"))
    from gen_doc import make_doc, token_chunks

    tokens = token_chunks(make_doc(max(n, 50), 1))
    tokens = (tokens * (n // len(tokens) + 1))[:n]
    out = []
    for i, piece in enumerate(tokens):
        chunk = {
            "id": "chatcmpl-B9MHDbslfkBeAs8l4bebGdFOJ6PeG",
            "object": "chat.completion.chunk",
            "created": 1741570283 + i // 100,
            "model": "gpt-4o-2024-08-06",
            "system_fingerprint": "fp_eb9dce56a8",
            "choices": [
                {"index": 0, "delta": {"content": piece}, "logprobs": None, "finish_reason": None}
            ],
        }
        out.append(f"data: {json.dumps(chunk, separators=(',', ':'))}\n\n".encode())
    return out


_TAIL = (
    b'data: {"id":"chatcmpl-B9MHDbslfkBeAs8l4bebGdFOJ6PeG","object":"chat.completion.chunk",'
    b'"choices":[{"index":0,"delta":{},"finish_reason":"stop"}]}\n\n'
    b'data: {"id":"chatcmpl-B9MHDbslfkBeAs8l4bebGdFOJ6PeG","object":"chat.completion.chunk",'
    b'"choices":[],"usage":{"prompt_tokens":9,"completion_tokens":2000,"total_tokens":2009}}\n\n'
    b"data: [DONE]\n\n"
)


def _frame(data: bytes, chunked: bool) -> bytes:
    return b"%x\r\n%s\r\n" % (len(data), data) if chunked else data


def _read_request(conn: socket.socket) -> int:
    """Read one request; return how many events it asks for (the path's last part)."""
    buf = b""
    while b"\r\n\r\n" not in buf:
        part = conn.recv(65536)
        if not part:
            return -1
        buf += part
    head, _, body = buf.partition(b"\r\n\r\n")
    lines = head.decode("latin-1").split("\r\n")
    length = 0
    for line in lines[1:]:
        name, _, value = line.partition(":")
        if name.strip().lower() == "content-length":
            length = int(value)
    while len(body) < length:
        body += conn.recv(65536)
    return int(lines[0].split()[1].split("events=")[1].split("/")[0])


def _drain(ack: int) -> None:
    """Drop the acks of reads beyond the events (the tail) left by the last connection."""
    os.set_blocking(ack, False)
    try:
        while os.read(ack, 4096):
            pass
    except BlockingIOError:
        pass
    finally:
        os.set_blocking(ack, True)


def _serve(lsock: socket.socket, ack: int, events: list[bytes], opts: argparse.Namespace) -> None:
    """Answer each connection's request with that many events: in lock step, or all at once
    (`burst`), or on the schedule of `pace` events a second."""
    chunked, burst, pace = not opts.close, opts.burst, opts.pace
    while True:
        conn, _ = lsock.accept()
        conn.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        n = _read_request(conn)
        if n < 0:
            conn.close()
            continue
        _drain(ack)
        te = b"Transfer-Encoding: chunked\r\n" if chunked else b"Connection: close\r\n"
        head = b"HTTP/1.1 200 OK\r\nContent-Type: text/event-stream\r\n" + te + b"\r\n"
        if burst:
            conn.sendall(head + b"".join(_frame(e, chunked) for e in events[:n]))
        else:
            start = time.monotonic()
            for i in range(n):  # the head goes with the first event: one read for both
                if pace:  # on schedule only: a client that reads less often finds several
                    if (delay := start + i / pace - time.monotonic()) > 0:
                        time.sleep(delay)
                elif i:
                    os.read(ack, 1)  # the client handled event i - 1
                conn.sendall((head if i == 0 else b"") + _frame(events[i], chunked))
            if not pace:
                os.read(ack, 1)
        conn.sendall(_frame(_TAIL, chunked) + (b"0\r\n\r\n" if chunked else b""))
        conn.close()


# ---- the stages (the client, this process) ----


class Rig:
    """What every stage needs: the server's URL, the ack pipe, the tree's package."""

    def __init__(self, port: int, ack: int, tmp: Path) -> None:
        self.base = f"http://127.0.0.1:{port}/v1"
        self.port = port
        self.ack = ack
        self.tmp = tmp

    def done(self) -> None:
        os.write(self.ack, b".")

    def provider(self, n: int) -> Any:
        from countbot_cli.provider.openai_compat import OpenAICompatProvider

        cfg = self.settings(n).provider
        return OpenAICompatProvider(cfg)

    def settings(self, n: int) -> Any:
        from countbot_cli.config.settings import load_settings

        cfg = self.tmp / f"config-{n}.yaml"
        if not cfg.exists():
            cfg.write_text(
                "default_provider: bench\nproviders:\n  bench:\n    type: openai\n"
                f"    api_base: {self.base}/events={n}\n    api_key: sk-bench\n    model: m\n"
                "    context_window: 128000\n"
                "tools:\n  enabled: false\nmemory:\n  overflow_summary: false\n  auto_memory: false\n",
                encoding="utf-8",
            )
        env = {"HOME": str(self.tmp), "XDG_CONFIG_HOME": str(self.tmp / "xdg")}
        return load_settings(config_path=cfg, env=env, cwd=self.tmp)


class _Body:
    """One client for every run of a stage; each call streams a response's body."""

    def __init__(self, rig: Rig, n: int) -> None:
        import ssl

        import httpx

        self.url = f"{rig.base}/events={n}/chat/completions"
        # as the provider does for http:// (no CA bundle to load)
        self.client = httpx.Client(verify=ssl.SSLContext(ssl.PROTOCOL_TLS_CLIENT))

    def __call__(self) -> Iterator[bytes]:
        req = self.client.build_request("POST", self.url, json={})
        resp = self.client.send(req, stream=True)
        try:
            yield from resp.iter_bytes()
        finally:
            resp.close()


Run = Callable[[], None]


def stage_socket(rig: Rig, n: int) -> Run:
    request = (
        b"POST /v1/events=%d/chat/completions HTTP/1.1\r\nHost: x\r\n"
        b"Content-Length: 2\r\n\r\n{}" % n
    )

    def run() -> None:
        with socket.create_connection(("127.0.0.1", rig.port)) as sock:
            sock.sendall(request)
            while sock.recv(65536):
                rig.done()

    return run


def stage_httpx(rig: Rig, n: int) -> Run:
    body = _Body(rig, n)

    def run() -> None:
        for _ in body():
            rig.done()

    return run


def sse_data(chunks: Iterator[bytes]) -> Iterator[str]:
    """Each SSE payload of a body, by the checkout's decoder (`assemble.sse_reads`, one list a
    read; `sse_data` in checkouts before it)."""
    from countbot_cli.provider import assemble

    reads = getattr(assemble, "sse_reads", None)
    if reads is None:  # a checkout from before sse_reads
        return iter(assemble.sse_data(chunks))  # type: ignore[attr-defined]
    return (data for payloads in reads(chunks) for data in payloads)


def stage_sse(rig: Rig, n: int) -> Run:
    body = _Body(rig, n)

    def run() -> None:
        for _ in sse_data(body()):
            rig.done()

    return run


def stage_json(rig: Rig, n: int) -> Run:
    from countbot_cli.jsonsafe import loads_bounded

    body = _Body(rig, n)

    def run() -> None:
        for data in sse_data(body()):
            if not data.startswith("[DONE]"):
                loads_bounded(data)
            rig.done()

    return run


def stage_assemble(rig: Rig, n: int) -> Run:
    from countbot_cli.provider.assemble import Assembler

    body = _Body(rig, n)

    def run() -> None:
        acc = Assembler()
        for data in sse_data(body()):
            if not data.startswith("[DONE]"):
                acc.add(data)
            rig.done()

    return run


def stage_provider(rig: Rig, n: int) -> Run:
    from countbot_cli.messages import ChatRequest, TextDelta

    provider = rig.provider(n)
    req = ChatRequest(model=provider.model, messages=[{"role": "user", "content": "hi"}])

    def run() -> None:
        for event in provider.stream(req):
            if isinstance(event, TextDelta):
                rig.done()

    return run


def _turn(rig: Rig, n: int, view: Callable[[], Any]) -> Run:
    from countbot_cli.conversation.engine import Engine
    from countbot_cli.conversation.sessions.session import new_session

    provider = rig.provider(n)
    engine = Engine(settings=rig.settings(n), provider=provider)

    def run() -> None:
        session = new_session(provider="bench", model=provider.model)
        record = engine.run_turn(session, "hi", view())
        if record.status != "ok":
            raise SystemExit(f"the turn failed: {record.error}")

    return run


def stage_engine(rig: Rig, n: int) -> Run:
    from countbot_cli.conversation.view import NullView

    class AckView(NullView):
        def text(self, delta: str) -> None:
            rig.done()

    return _turn(rig, n, AckView)


def stage_plain(rig: Rig, n: int) -> Run:
    from countbot_cli.ui.turnview import PlainView

    class AckView(PlainView):
        def text(self, delta: str) -> None:
            super().text(delta)
            rig.done()

    out = open(os.devnull, "w")  # noqa: SIM115 (open for the worker's life)
    return _turn(rig, n, lambda: AckView(out, out))


def worker(tree: Path, n: int, opts: argparse.Namespace) -> None:
    """Run every stage once (after a warm-up); print {stage: CPU µs per event} as JSON."""
    sys.path.insert(0, str(tree))
    read_ack, write_ack = os.pipe()
    lsock = socket.create_server(("127.0.0.1", 0))
    events = _events(max(n, WARM))
    pid = os.fork()
    if pid == 0:  # the server
        os.close(write_ack)
        try:
            _serve(lsock, read_ack, events, opts)
        except BaseException:
            import traceback

            traceback.print_exc()
        os._exit(0)
    os.close(read_ack)
    port = lsock.getsockname()[1]
    lsock.close()
    with tempfile.TemporaryDirectory(prefix="cb-bench-stream-") as tmp:
        rig = Rig(port, write_ack, Path(tmp))
        got = {}
        try:
            for name in opts.stages.split(","):
                make: Callable[[Rig, int], Run] = globals()[f"stage_{name}"]
                make(rig, WARM // 4 if opts.pace else WARM)()
                run = make(rig, n)
                start = time.process_time()
                run()
                got[name] = 1e6 * (time.process_time() - start) / n
        finally:
            os.kill(pid, signal.SIGTERM)
            os.waitpid(pid, 0)
    print(json.dumps(got))


# ---- the parent ----


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("events", nargs="?", type=int, default=2000)
    ap.add_argument("--reps", type=int, default=5)
    ap.add_argument("--burst", action="store_true", help="send all events at once")
    ap.add_argument("--close", action="store_true", help="close-delimited body, not chunked")
    ap.add_argument(
        "--stages", default=",".join(STAGES), help="comma-separated, of " + " ".join(STAGES)
    )
    ap.add_argument("--pace", type=float, default=0.0, help="at most this many events a second")
    ap.add_argument("--against", type=Path, action="append", default=[], metavar="DIR")
    ap.add_argument("--worker", type=Path, help=argparse.SUPPRESS)
    args = ap.parse_args()
    if args.worker is not None:
        worker(args.worker, args.events, args)
        return
    trees = {"this": HERE.parent, **{str(d): d.resolve() for d in args.against}}
    runs: dict[str, list[dict[str, float]]] = {label: [] for label in trees}
    for _ in range(args.reps):
        for label, tree in trees.items():
            cmd = [sys.executable, str(Path(__file__).resolve()), str(args.events), "--worker"]
            cmd += [str(tree)] + (["--burst"] if args.burst else [])
            cmd += ["--close"] if args.close else []
            cmd += ["--stages", args.stages]
            cmd += ["--pace", str(args.pace)] if args.pace else []
            out = subprocess.run(cmd, check=True, capture_output=True, text=True).stdout
            runs[label].append(json.loads(out.splitlines()[-1]))
    mode = "burst" if args.burst else f"{args.pace:g} a second" if args.pace else "lock step"
    body = "close-delimited" if args.close else "chunked"
    print(f"# {args.events} events, {mode}, {body} body, {args.reps} runs: CPU µs per event")
    print(f"{'stage':10}" + "".join(f"{label[-24:]:>30}" for label in trees))
    chosen = args.stages.split(",")
    for i, name in enumerate(chosen):
        row = f"{name:10}"
        for label in trees:
            med = statistics.median(r[name] for r in runs[label])
            low = min(r[name] for r in runs[label])
            below = statistics.median(r[chosen[i - 1]] for r in runs[label]) if i else med
            layer = f"+{med - below:.1f}" if i else ""
            row += f"{med:12.1f} (min {low:6.1f}) {layer:>8}"
        print(row)


if __name__ == "__main__":
    main()
