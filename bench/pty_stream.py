"""The real pty path of a streamed answer (issue 25 point 4), for bench_render.py --pty.

A loopback server streams gen_doc's markdown one SSE event per token on an absolute schedule
(RATE tokens a second); each client, `countbot ask --no-save hi` (or any command given), runs on
a 100x40 pseudo-terminal whose cursor position requests are answered, and everything it writes
is read. Per run: CPU % of the stream (user+sys of the reaped client over the stream's length),
the time from the last token written by the server to the client's exit, and the bytes written
to the terminal. Clients are run interleaved; medians. The body is close-delimited, or with
`chunked` a chunked body on a kept-alive connection (the end, finish and [DONE] and the last
chunk, in one write). A request that asks for usage (`stream_options.include_usage`, which
countbot sends) gets a usage event before [DONE], as OpenAI's, vLLM's, llama.cpp's and
Ollama's servers send it. With `tls`, the server speaks TLS (a self-signed certificate the
clients trust through SSL_CERT_FILE), as every remote provider does.
"""

from __future__ import annotations

import json
import os
import pty
import select
import socket
import statistics
import subprocess
import tempfile
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

from bench_startup import bench_env, write_config

CPR = b"\x1b[6n"
BASE_URL = "{base}"  # in a client's command: the loopback server's base URL


class _Server(ThreadingHTTPServer):
    chunks: list[str]
    rate: float
    last_token_at: float
    chunked: bool  # a chunked body on a kept-alive connection (else close-delimited)


class _Handler(BaseHTTPRequestHandler):
    server: _Server
    protocol_version = "HTTP/1.1"

    def log_message(self, format: str, *args: Any) -> None:
        pass

    def do_GET(self) -> None:
        body = json.dumps({"object": "list", "data": [{"id": "test-model"}]}).encode()
        self._head(200, "application/json", len(body))
        self.wfile.write(body)

    def do_POST(self) -> None:
        request = self.rfile.read(int(self.headers.get("content-length") or 0))
        if self.path != "/v1/chat/completions":
            self._head(404, "application/json", 2)
            self.wfile.write(b"{}")
            return
        chunked = self.server.chunked
        self._head(200, "text/event-stream", None, chunked=chunked)
        self.connection.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        frame = _http_chunk if chunked else bytes
        start, step = time.monotonic(), 1.0 / self.server.rate
        for i, piece in enumerate(self.server.chunks):
            delay = start + i * step - time.monotonic()
            if delay > 0:
                time.sleep(delay)
            event = {"choices": [{"index": 0, "delta": {"content": piece}}]}
            self.wfile.write(frame(f"data: {json.dumps(event)}\n\n".encode()))
            self.wfile.flush()
        self.server.last_token_at = time.monotonic()
        done = {"choices": [{"index": 0, "delta": {}, "finish_reason": "stop"}]}
        end = [f"data: {json.dumps(done)}\n\n".encode()]
        if (json.loads(request or b"{}").get("stream_options") or {}).get("include_usage"):
            n = len(self.server.chunks)  # as OpenAI, vLLM, llama.cpp and Ollama send it
            usage = {"prompt_tokens": 9, "completion_tokens": n, "total_tokens": n + 9}
            end.append(f"data: {json.dumps({'choices': [], 'usage': usage})}\n\n".encode())
        end.append(b"data: [DONE]\n\n")
        last = b"0\r\n\r\n" if chunked else b""  # the chunked body's end, in the same write
        self.wfile.write(b"".join(frame(part) for part in end) + last)
        self.wfile.flush()
        self.close_connection = not chunked

    def _head(self, code: int, ctype: str, length: int | None, *, chunked: bool = False) -> None:
        self.send_response(code)
        self.send_header("Content-Type", ctype)
        if length is not None:
            self.send_header("Content-Length", str(length))
        elif chunked:
            self.send_header("Transfer-Encoding", "chunked")
        else:
            self.send_header("Connection", "close")
        self.end_headers()


def _serve_tls(srv: _Server, tmp: Path) -> str:
    """Serve TLS with a self-signed certificate for 127.0.0.1 (made with openssl); the path
    of the certificate, for the clients' SSL_CERT_FILE."""
    import ssl

    cert, key = tmp / "cert.pem", tmp / "key.pem"
    subprocess.run(
        ["openssl", "req", "-x509", "-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:prime256v1",
         "-nodes", "-days", "1", "-subj", "/CN=127.0.0.1", "-addext", "subjectAltName=IP:127.0.0.1",
         "-keyout", str(key), "-out", str(cert)],
        check=True,
        capture_output=True,
    )  # fmt: skip
    ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    ctx.load_cert_chain(cert, key)
    srv.socket = ctx.wrap_socket(srv.socket, server_side=True)
    return str(cert)


def _http_chunk(data: bytes) -> bytes:
    return f"{len(data):x}\r\n".encode() + data + b"\r\n"


def _on_pty(cmd: list[str], env: dict[str, str], cwd: Path) -> tuple[float, float, int]:
    """(CPU seconds, exit time, bytes written) of `cmd` on a 100x40 pty."""
    master, slave = pty.openpty()
    import fcntl
    import struct
    import termios

    fcntl.ioctl(slave, termios.TIOCSWINSZ, struct.pack("HHHH", 40, 100, 0, 0))
    proc = subprocess.Popen(
        cmd, stdin=slave, stdout=slave, stderr=slave, env=env, cwd=cwd, start_new_session=True
    )
    os.close(slave)
    written = 0
    while True:
        ready, _, _ = select.select([master], [], [], 1.0)
        if not ready:
            if proc.poll() is not None:
                break
            continue
        try:
            data = os.read(master, 65536)
        except OSError:  # the client closed the terminal: it is exiting
            break
        if not data:
            break
        written += len(data)
        for _ in range(data.count(CPR)):
            os.write(master, b"\x1b[1;1R")
    _, status, usage = os.wait4(proc.pid, 0)
    ended = time.monotonic()
    os.close(master)
    if status:
        raise SystemExit(f"{cmd[:2]} exited with status {status}")
    return usage.ru_utime + usage.ru_stime, ended, written


def run(
    clients: list[tuple[str, list[str]]],
    chunks: list[str],
    rate: float,
    reps: int,
    *,
    chunked: bool = False,
    tls: bool = False,
) -> None:
    srv = _Server(("127.0.0.1", 0), _Handler)
    srv.chunks, srv.rate, srv.last_token_at, srv.chunked = chunks, rate, 0.0, chunked
    tmp = Path(tempfile.mkdtemp(prefix="cb-pty-"))
    trust = {"SSL_CERT_FILE": _serve_tls(srv, tmp)} if tls else {}
    threading.Thread(target=srv.serve_forever, args=(0.05,), daemon=True).start()
    scheme = "https" if tls else "http"
    base = f"{scheme}://127.0.0.1:{srv.server_address[1]}/v1"
    write_config(tmp, base, context_window=128000)
    env = bench_env(tmp, TERM="xterm-256color", COLUMNS="100", LINES="40", **trust)
    stream = len(chunks) / rate
    got: dict[str, list[tuple[float, float, int]]] = {label: [] for label, _ in clients}
    try:
        for _ in range(reps):
            for label, cmd in clients:
                argv = [arg.replace(BASE_URL, base) for arg in cmd]
                cpu, ended, written = _on_pty(argv, env, tmp)
                got[label].append((100 * cpu / stream, 1000 * (ended - srv.last_token_at), written))
    finally:
        srv.shutdown()
        srv.server_close()
    body = ("chunked, kept alive" if chunked else "close-delimited") + (", TLS" if tls else "")
    print(
        f"# pty: {len(chunks)} tokens at {rate:g} tok/s ({stream:.1f} s), {body} body,"
        f" {reps} interleaved runs"
    )
    print(f"{'client':18} {'CPU % of stream':>22} {'last token -> exit ms':>26} {'tty kB':>8}")
    for label, runs in got.items():
        cpu = [r[0] for r in runs]
        lag = [r[1] for r in runs]
        kb = statistics.median(r[2] for r in runs) / 1000
        print(
            f"{label:18} {statistics.median(cpu):10.2f} ({min(cpu):.2f}-{max(cpu):.2f})"
            f" {statistics.median(lag):14.0f} ({min(lag):.0f}-{max(lag):.0f}) {kb:8.0f}"
        )
