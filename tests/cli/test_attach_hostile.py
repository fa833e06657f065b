"""`ask -a URL` against hostile servers: a server trickling its headers or its body a
byte at a time still ends at `url_timeout`; redirects into the LAN or this machine (127.0.0.1,
[::1], an IPv4-mapped address) are refused when the user's URL was public; `user:password@` in a
URL is neither sent nor stored nor shown.

The redirect tests need the user's URL to be public while its server is on loopback: they run
countbot in this process with `netguard.DIALER` replaced by a small fake internet, in which
`site.example` and `other.example` resolve to public addresses that connect to the loopback
server, and every other host resolves for real. Only that resolver is replaced: the ranks, the
check and the connections are the product's own.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import fakeserver as fs
import httpcore
import pytest
from cbenv import make_cb, refused

from countbot_cli.conversation.input import netguard
from countbot_cli.conversation.input.netguard import (
    LINK_LOCAL,
    LOOPBACK,
    PRIVATE,
    PUBLIC,
    Dialer,
    address_rank,
)
from countbot_cli.errors import EXIT_NETWORK, EXIT_USAGE

HANG_BOUND = 15.0  # seconds: a fetch still running then is a hang, not slowness
PUBLIC_IPS = {"site.example": "93.184.215.14", "other.example": "93.184.215.15"}
PRIVATE_IPS = {"lan.example": "10.20.30.40"}


class _Hostile(BaseHTTPRequestHandler):
    """/trickle-headers, /trickle-body: a byte every 0.3 s until the client goes; /to/URL: 302
    to URL; /to-cred: 302 to /page with a user and password; /no-location: 302 without a
    Location; else a small page. Every
    request's path and headers are recorded."""

    protocol_version = "HTTP/1.1"

    def log_message(self, format: str, *args: Any) -> None:
        pass

    def do_GET(self) -> None:
        srv: Any = self.server
        srv.seen.append((self.path, dict(self.headers)))
        if self.path == "/trickle-headers":
            self._trickle(b"HTTP/1.1 200 OK\r\nContent-Type: text/plain\r\nX-Slow: ")
        elif self.path == "/trickle-body":
            head = b"HTTP/1.1 200 OK\r\nContent-Type: text/plain\r\nContent-Length: 100000\r\n\r\n"
            self._trickle(head)
        elif self.path == "/no-location":
            self.send_response(302)
            self.send_header("Content-Length", "0")
            self.end_headers()
        elif self.path.startswith(("/to/", "/to-cred")):
            port = srv.server_address[1]
            cred = f"http://bob:hop-s3cret@127.0.0.1:{port}/page"
            self.send_response(302)
            self.send_header("Location", self.path[len("/to/") :] if "/to/" in self.path else cred)
            self.send_header("Content-Length", "0")
            self.end_headers()
        else:
            body = b"<html><title>Secret</title><main><p>the page PAGEWORD</p></main></html>"
            self.send_response(200)
            self.send_header("Content-Type", "text/html")
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

    def _trickle(self, head: bytes) -> None:
        srv: Any = self.server
        try:
            self.wfile.write(head)
            while not srv.stopping.wait(0.3):
                self.wfile.write(b"a")
        except OSError:
            pass  # the client gave up: as it should
        self.close_connection = True


def _serve(host: str) -> ThreadingHTTPServer:
    cls = ThreadingHTTPServer
    if ":" in host:
        import socket

        class _V6(ThreadingHTTPServer):
            address_family = socket.AF_INET6

        cls = _V6
    srv = cls((host, 0), _Hostile)
    srv.daemon_threads = True
    srv.seen = []  # type: ignore[attr-defined]
    srv.stopping = threading.Event()  # type: ignore[attr-defined]
    threading.Thread(target=srv.serve_forever, daemon=True).start()
    return srv


def _stop(srv: ThreadingHTTPServer) -> None:
    srv.stopping.set()  # type: ignore[attr-defined]
    srv.shutdown()
    srv.server_close()


@pytest.fixture
def pages() -> Iterator[ThreadingHTTPServer]:
    srv = _serve("127.0.0.1")
    yield srv
    _stop(srv)


@pytest.fixture
def server() -> Iterator[fs.FakeServer]:
    with fs.FakeServer() as srv:
        srv.default = fs.text("noted")
        yield srv


def _url(srv: ThreadingHTTPServer, path: str, host: str = "127.0.0.1") -> str:
    return f"http://{host}:{srv.server_address[1]}{path}"


# ---- one deadline for the whole fetch ----


@pytest.mark.parametrize("path", ["/trickle-headers", "/trickle-body"])
def test_a_server_trickling_a_byte_at_a_time_still_ends_at_the_timeout(
    tmp_path: Path, server: fs.FakeServer, pages: ThreadingHTTPServer, path: str
) -> None:
    """httpx's read timeout restarts with every byte; the fetch's deadline does not. The
    installed countbot, as a user runs it: exit 6, long before the hang bound."""
    cb = make_cb(tmp_path, server.base_url, attachments={"url_timeout": 2})
    url = _url(pages, path)
    proc = cb.run("ask", "x", "-a", url, timeout=HANG_BOUND)
    line = refused(cb, server, proc, EXIT_NETWORK)
    assert f"-a {url}: timed out after 2 s; nothing was sent" in line
    assert [p for p, _h in pages.seen] == [path]  # type: ignore[attr-defined]


def test_a_name_resolver_that_never_answers_still_ends_at_the_timeout(
    tmp_path: Path, server: fs.FakeServer, monkeypatch: pytest.MonkeyPatch
) -> None:
    """getaddrinfo has no timeout: countbot stops waiting for it at the deadline, while the
    lookup is still stuck."""
    stuck, answered = threading.Event(), threading.Event()

    def resolve(host: str, port: int) -> list[str]:
        stuck.wait(HANG_BOUND)
        answered.set()
        return [PUBLIC_IPS["site.example"]]

    monkeypatch.setattr(netguard, "DIALER", Dialer(resolve, Dialer().connect))
    cb = make_cb(tmp_path, server.base_url, attachments={"url_timeout": 1})
    url = "http://site.example/page"
    try:
        proc = cb.invoke("ask", "x", "-a", url)
        assert not answered.is_set()  # it gave up on the lookup, not waited it out
    finally:
        stuck.set()
    line = refused(cb, server, proc, EXIT_NETWORK)
    assert f"-a {url}: timed out after 1 s; nothing was sent" in line


# ---- where a redirect may lead ----


def _fake_internet(pages: ThreadingHTTPServer) -> Dialer:
    """Names of PUBLIC_IPS and PRIVATE_IPS resolve to those addresses, which connect to
    `pages`; any other host resolves and connects for real."""
    real = Dialer()
    fake = {**PUBLIC_IPS, **PRIVATE_IPS}
    served = set(fake.values())

    def resolve(host: str, port: int) -> list[str]:
        return [fake[host]] if host in fake else real.resolve(host, port)

    def connect(address: str, port: int, timeout: float) -> httpcore.NetworkStream:
        if address in served:
            return real.connect("127.0.0.1", pages.server_address[1], timeout)
        return real.connect(address, port, timeout)

    return Dialer(resolve, connect)


@pytest.fixture
def internet(
    pages: ThreadingHTTPServer, monkeypatch: pytest.MonkeyPatch
) -> Iterator[ThreadingHTTPServer]:
    monkeypatch.setattr(netguard, "DIALER", _fake_internet(pages))
    yield pages


@pytest.fixture
def secret_v6() -> Iterator[ThreadingHTTPServer | None]:
    try:
        srv = _serve("::1")
    except OSError:  # no IPv6 loopback here: the refusal comes before any connection anyway
        yield None
        return
    yield srv
    _stop(srv)


def test_a_redirect_chain_from_a_public_url_to_loopback_is_refused(
    tmp_path: Path,
    server: fs.FakeServer,
    internet: ThreadingHTTPServer,
    secret_v6: ThreadingHTTPServer | None,
) -> None:
    secret = _serve("127.0.0.1")
    try:
        cb = make_cb(tmp_path, server.base_url)
        port6 = secret_v6.server_address[1] if secret_v6 else 9
        targets = {
            "127.0.0.1": _url(secret, "/secret"),
            "::1": f"http://[::1]:{port6}/secret",
            "::ffff:127.0.0.1": f"http://[::ffff:127.0.0.1]:{secret.server_address[1]}/secret",
            "0.0.0.0": f"http://0.0.0.0:{secret.server_address[1]}/secret",
        }
        for target in targets.values():
            # site.example -> other.example (both public) -> this machine
            second = _url(internet, f"/to/{target}", "other.example")
            url = _url(internet, f"/to/{second}", "site.example")
            line = refused(cb, server, cb.invoke("ask", "x", "-a", url), EXIT_USAGE)
            assert f"-a {url}: not following a redirect to " in line, line
            assert ", a loopback address: more private than the URL you gave (a public" in line
        assert secret.seen == []  # type: ignore[attr-defined]
        assert secret_v6 is None or secret_v6.seen == []  # type: ignore[attr-defined]
    finally:
        _stop(secret)


def test_a_public_url_may_not_redirect_into_the_lan_but_a_lan_url_may_reach_the_internet(
    tmp_path: Path, server: fs.FakeServer, internet: ThreadingHTTPServer
) -> None:
    cb = make_cb(tmp_path, server.base_url)
    lan_page = _url(internet, "/page", "lan.example")
    url = _url(internet, f"/to/{lan_page}", "site.example")
    line = refused(cb, server, cb.invoke("ask", "x", "-a", url), EXIT_USAGE)
    assert "not following a redirect to lan.example (10.20.30.40), a private address" in line
    # the other way round, and a user's own loopback URL anywhere, are followed
    public_page = _url(internet, "/page", "site.example")
    followed = [
        _url(internet, f"/to/{public_page}", "lan.example"),
        _url(internet, f"/to/{lan_page}", "127.0.0.1"),
    ]
    for url in followed:
        server.requests.clear()
        proc = cb.invoke("ask", "--no-save", "x", "-a", url)
        assert proc.returncode == 0, proc.stderr
        assert "PAGEWORD" in server.chat_bodies()[-1]["messages"][-1]["content"]


@pytest.mark.parametrize("loopback_first", [False, True])
def test_a_redirect_to_a_name_with_a_public_and_a_loopback_address_is_refused(
    tmp_path: Path,
    server: fs.FakeServer,
    pages: ThreadingHTTPServer,
    monkeypatch: pytest.MonkeyPatch,
    loopback_first: bool,
) -> None:
    """`both.example` resolves to a public address that does not answer and to 127.0.0.1,
    where a secret is served: a connection would fall through to the second address."""
    secret = _serve("127.0.0.1")
    fake = _fake_internet(pages)
    dark = "93.184.215.99"  # public, and nothing answers there
    both = ["127.0.0.1", dark] if loopback_first else [dark, "127.0.0.1"]

    def resolve(host: str, port: int) -> list[str]:
        return both if host == "both.example" else fake.resolve(host, port)

    def connect(address: str, port: int, timeout: float) -> httpcore.NetworkStream:
        if address == dark:
            raise httpcore.ConnectError(f"{address}: connection refused")
        return fake.connect(address, port, timeout)

    monkeypatch.setattr(netguard, "DIALER", Dialer(resolve, connect))
    try:
        cb = make_cb(tmp_path, server.base_url)
        url = _url(pages, f"/to/{_url(secret, '/secret', 'both.example')}", "site.example")
        line = refused(cb, server, cb.invoke("ask", "x", "-a", url), EXIT_USAGE)
        assert "not following a redirect to both.example (127.0.0.1), a loopback address" in line
        assert secret.seen == []  # type: ignore[attr-defined]
    finally:
        _stop(secret)


@pytest.mark.parametrize(
    ("address", "rank"),
    [
        ("127.0.0.1", LOOPBACK),
        ("127.3.4.5", LOOPBACK),
        ("::1", LOOPBACK),
        ("::ffff:127.0.0.1", LOOPBACK),
        ("::127.0.0.1", LOOPBACK),
        ("0.0.0.0", LOOPBACK),
        ("::", LOOPBACK),
        ("169.254.169.254", LINK_LOCAL),
        ("fe80::1%eth0", LINK_LOCAL),
        ("::ffff:169.254.169.254", LINK_LOCAL),
        ("10.0.0.1", PRIVATE),
        ("172.16.5.4", PRIVATE),
        ("192.168.1.1", PRIVATE),
        ("100.64.0.1", PRIVATE),
        ("fd12:3456::1", PRIVATE),
        ("::ffff:192.168.1.1", PRIVATE),
        ("224.0.0.251", PRIVATE),
        ("8.8.8.8", PUBLIC),
        ("2606:4700:4700::1111", PUBLIC),
        ("::ffff:8.8.8.8", PUBLIC),
    ],
)
def test_addresses_are_ranked_from_public_to_this_machine(address: str, rank: int) -> None:
    assert address_rank(address) == rank


def test_a_redirect_status_without_a_location_is_said_so_not_followed(
    tmp_path: Path, server: fs.FakeServer, pages: ThreadingHTTPServer
) -> None:
    """A 302 with no Location header leads nowhere: one request, and the error says what the
    server did (not "more than 4 redirects" after asking the same URL five times)."""
    cb = make_cb(tmp_path, server.base_url)
    url = _url(pages, "/no-location")
    line = refused(cb, server, cb.invoke("ask", "x", "-a", url), EXIT_USAGE)
    assert f"-a {url}: the server answered 302 without a redirect" in line
    assert [p for p, _h in pages.seen] == ["/no-location"]  # type: ignore[attr-defined]


# ---- user:password@ ----


def test_userinfo_in_a_url_is_not_sent_stored_or_shown(
    tmp_path: Path, server: fs.FakeServer, pages: ThreadingHTTPServer
) -> None:
    """The user's `alice:url-s3cret@` and a redirect's `bob:hop-s3cret@`: no Authorization
    header reaches the page's server, and neither the request to the model, the session
    file, `sessions show` nor the output holds them."""
    cb = make_cb(tmp_path, server.base_url)
    port = pages.server_address[1]
    url = f"http://alice:url-s3cret@127.0.0.1:{port}/to-cred"
    proc = cb.run("ask", "summarise", "-a", url)
    assert proc.returncode == 0, proc.stderr
    sent = server.chat_bodies()[0]["messages"][-1]["content"]
    assert f"Page `http://127.0.0.1:{port}/page` (Secret)" in sent
    assert [p for p, _h in pages.seen] == ["/to-cred", "/page"]  # type: ignore[attr-defined]
    assert all("Authorization" not in h for _p, h in pages.seen)  # type: ignore[attr-defined]
    session = cb.only_session()
    record = session["messages"][0]["attachments"][0]
    assert record["source"] == f"http://127.0.0.1:{port}/to-cred"
    assert record["final_url"] == f"http://127.0.0.1:{port}/page"
    shown = cb.run("sessions", "show", session["id"])
    assert f"http://127.0.0.1:{port}/to-cred" in shown.stdout
    stored = "".join(p.read_text(encoding="utf-8") for p in cb.session_files())
    for text in (stored, str(server.requests), proc.stdout, proc.stderr, shown.stdout):
        assert "s3cret" not in text and "alice" not in text and "bob" not in text


@pytest.mark.parametrize("url", ["http://[::1/x", "http://alice:url-s3cret@[::1/x"])
def test_a_url_that_does_not_parse_is_a_usage_error_without_its_userinfo(
    tmp_path: Path, server: fs.FakeServer, url: str
) -> None:
    """An unclosed [IPv6 address (urlsplit raises ValueError): one line, exit 2, not an
    unexpected error; the password is not echoed."""
    cb = make_cb(tmp_path, server.base_url)
    line = refused(cb, server, cb.invoke("ask", "x", "-a", url), EXIT_USAGE)
    assert "-a http://[::1/x: not a URL countbot can fetch" in line, line
    assert "s3cret" not in line and "alice" not in line


def test_the_deadline_is_kept_by_every_read() -> None:
    """An operation gets at most the time left; one asked for after the deadline fails at
    once as a timeout."""
    deadline = netguard.Deadline(time.monotonic() + 60)
    assert deadline.left(None, httpcore.ReadTimeout) <= 60
    assert deadline.left(5.0, httpcore.ReadTimeout) == 5.0
    past = netguard.Deadline(time.monotonic() - 0.001)
    with pytest.raises(httpcore.ReadTimeout):
        past.left(5.0, httpcore.ReadTimeout)
