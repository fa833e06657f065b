"""A loopback stand-in for the Hugging Face Hub's file downloads (stdlib only), for
`countbot models pull` with `HF_ENDPOINT` pointed at it.

It answers as the Hub does for a file kept in LFS: `HEAD`/`GET /{repo}/resolve/{rev}/{file}`
is a 302 to where the bytes are (a "CDN": another server, so another origin, as the Hub's is), with `X-Linked-Etag` (the file's sha256, quoted),
`X-Linked-Size`, `X-Repo-Commit` and `ETag`; an unknown repository or file is a 404 with the
Hub's `X-Error-Code` (`RepoNotFound`, `EntryNotFound`). The bytes (`GET /cdn/{repo}/{file}`) honour
`Range: bytes=N-` with a 206 and `Content-Range`.

Each file is a `HubFile`: what is served (`content`) and what is advertised (`sha256`, `size`,
by default those of the content), so a corrupted copy is `content` changed under the original's
sha256, a truncated copy one whose body is shorter than its size. `cut_after=N` ends the first
GET of the bytes after N bytes (the socket shut, as a dropped connection); `hold_at=N` pauses a
GET at byte N until `release` is set (`held` says it got there), so a test can kill the client
at a known point. Every request is recorded in `hub.requests` (method, path, headers).
"""

from __future__ import annotations

import hashlib
import re
import socket
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any
from urllib.parse import quote, unquote

COMMIT = "0123456789abcdef0123456789abcdef01234567"


@dataclass
class HubFile:
    content: bytes
    sha256: str = ""  # advertised; "" = the content's own
    size: int | None = None  # advertised; None = the content's length
    cut_after: int | None = None  # end the first GET of the bytes after this many bytes
    hold_at: int | None = None  # pause a GET at this byte until `release`
    held: threading.Event = field(default_factory=threading.Event)
    release: threading.Event = field(default_factory=threading.Event)
    gets: int = 0

    def __post_init__(self) -> None:
        self.sha256 = self.sha256 or hashlib.sha256(self.content).hexdigest()
        self.size = len(self.content) if self.size is None else self.size


class FakeHub(ThreadingHTTPServer):
    daemon_threads = True
    files: dict[tuple[str, str], HubFile]
    requests: list[tuple[str, str, dict[str, str]]]
    cdn_url: str  # where the Hub's redirects point (the bytes); the CDN's own `cdn_url` is ""

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.server_address[1]}"

    def add(self, repo: str, filename: str, file: HubFile) -> HubFile:
        self.files[(repo, filename)] = file
        return file


RESOLVE = re.compile(r"^/(?P<repo>[^/]+/[^/]+)/resolve/(?P<rev>[^/]+)/(?P<file>[^?]+)$")
CDN = re.compile(r"^/cdn/(?P<repo>[^/]+/[^/]+)/(?P<file>[^?]+)$")


class _Handler(BaseHTTPRequestHandler):
    server: FakeHub
    protocol_version = "HTTP/1.1"

    def log_message(self, format: str, *args: Any) -> None:
        pass

    def do_HEAD(self) -> None:
        self._answer(body=False)

    def do_GET(self) -> None:
        self._answer(body=True)

    def _answer(self, *, body: bool) -> None:
        hub = self.server
        hub.requests.append(
            (self.command, self.path, {k.lower(): v for k, v in self.headers.items()})
        )
        if m := RESOLVE.match(self.path):
            self._resolve(m["repo"], unquote(m["file"]))
        elif (m := CDN.match(self.path)) and body:
            self._bytes(hub.files[(m["repo"], unquote(m["file"]))])
        else:
            self._status(404, {"X-Error-Code": "EntryNotFound"}, b'{"error": "not found"}')

    def _resolve(self, repo: str, filename: str) -> None:
        hub = self.server
        if not any(r == repo for r, _ in hub.files):
            self._status(
                404, {"X-Error-Code": "RepoNotFound"}, b'{"error": "Repository not found"}'
            )
            return
        f = hub.files.get((repo, filename))
        if f is None:
            self._status(404, {"X-Error-Code": "EntryNotFound"}, b'{"error": "Entry not found"}')
            return
        self._status(
            302,
            {
                "Location": f"{hub.cdn_url}/cdn/{repo}/{quote(filename)}",
                "X-Linked-Etag": f'"{f.sha256}"',
                "X-Linked-Size": str(f.size),
                "X-Repo-Commit": COMMIT,
                "ETag": '"a1b2c3"',
            },
            b"",
        )

    def _status(self, code: int, headers: dict[str, str], data: bytes) -> None:
        self.send_response(code)
        for k, v in headers.items():
            self.send_header(k, v)
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        if self.command != "HEAD":
            self.wfile.write(data)

    def _bytes(self, f: HubFile) -> None:
        f.gets += 1
        start = 0
        asked = re.match(r"bytes=(\d+)-$", self.headers.get("Range", ""))
        if asked:
            start = int(asked[1])
        data = f.content[start:]
        if asked and start >= len(f.content):
            self._status(416, {"Content-Range": f"bytes */{len(f.content)}"}, b"")
            return
        self.send_response(206 if asked else 200)
        self.send_header("Content-Type", "application/octet-stream")
        self.send_header("Accept-Ranges", "bytes")
        self.send_header("Content-Length", str(len(data)))
        if asked:
            self.send_header(
                "Content-Range", f"bytes {start}-{len(f.content) - 1}/{len(f.content)}"
            )
        self.end_headers()
        cut = f.cut_after if f.gets == 1 else None
        sent = start
        for i in range(0, len(data), 65536):
            piece = data[i : i + 65536]
            if f.hold_at is not None and sent <= f.hold_at < sent + len(piece):
                head = f.hold_at - sent
                self.wfile.write(piece[:head])
                self.wfile.flush()
                sent += head
                piece = piece[head:]
                f.held.set()
                f.release.wait(60)
            if cut is not None and sent + len(piece) > cut:
                self.wfile.write(piece[: max(0, cut - sent)])
                self.wfile.flush()
                self.close_connection = True
                self.connection.shutdown(socket.SHUT_RDWR)
                return
            try:
                self.wfile.write(piece)
            except OSError:
                return
            sent += len(piece)
        self.wfile.flush()


@contextmanager
def fake_hub() -> Iterator[FakeHub]:
    """The Hub and its CDN, sharing their files and their record of requests."""
    hub, cdn = FakeHub(("127.0.0.1", 0), _Handler), FakeHub(("127.0.0.1", 0), _Handler)
    hub.files, hub.requests = {}, []
    cdn.files, cdn.requests, cdn.cdn_url = hub.files, hub.requests, ""
    hub.cdn_url = cdn.url
    for server in (hub, cdn):
        threading.Thread(target=server.serve_forever, args=(0.05,), daemon=True).start()
    try:
        yield hub
    finally:
        for f in hub.files.values():
            f.release.set()
        for server in (hub, cdn):
            server.shutdown()
            server.server_close()
