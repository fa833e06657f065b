"""The connections of `-a URL` (conversation/input/fetch.py): one deadline, and where a hop may go.

An httpcore network backend (`GuardedBackend`, httpcore's public backend interface) gives
every name lookup, connect, TLS handshake, read and write at most the time left until the
fetch's deadline, and ranks each address from public to this machine. The invariant: a
redirect never connects to an address more private than the user's own URL's (`HopRefused`),
checked on the addresses actually connected to. `GuardedTransport` is httpx's transport
interface over an httpcore pool of those connections. `HTTP(S)_PROXY` is not used. `DIALER` is the
seam tests replace. Why and how: docs/design/attachments.md.
"""

from __future__ import annotations

import contextlib
import ipaddress
import socket
import threading
import time
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass, field
from typing import Any

import httpcore
import httpx

PUBLIC, PRIVATE, LINK_LOCAL, LOOPBACK = range(4)
RANK_NAMES = ("public", "private", "link-local", "loopback")


class HopRefused(Exception):
    """A connection to an address more private than the user's own URL's."""

    def __init__(self, host: str, address: str, rank: int, allowed: int) -> None:
        where = host if host.strip("[]") == address else f"{host} ({address})"
        super().__init__(
            f"not following a redirect to {where}, a {RANK_NAMES[rank]} address: more private "
            f"than the URL you gave (a {RANK_NAMES[allowed]} address)"
        )
        self.host, self.address, self.rank, self.allowed = host, address, rank, allowed


def address_rank(address: str) -> int:
    """PUBLIC, PRIVATE, LINK_LOCAL or LOOPBACK for an IP address (text, maybe with %scope)."""
    ip: ipaddress.IPv4Address | ipaddress.IPv6Address = ipaddress.ip_address(
        address.split("%", 1)[0]
    )
    if isinstance(ip, ipaddress.IPv6Address):
        if ip.ipv4_mapped is not None:
            ip = ip.ipv4_mapped
        elif int(ip) >> 32 == 0 and int(ip) > 1:  # ::a.b.c.d, IPv4-compatible (deprecated)
            ip = ipaddress.IPv4Address(int(ip))
    if ip.is_loopback or ip.is_unspecified:
        return LOOPBACK
    if ip.is_link_local:
        return LINK_LOCAL
    if ip.is_multicast or not ip.is_global:
        return PRIVATE
    return PUBLIC


def _resolve(host: str, port: int) -> list[str]:
    """Every address of `host` (an IP address is its own), in the resolver's order."""
    infos = socket.getaddrinfo(host, port, type=socket.SOCK_STREAM)
    return list(dict.fromkeys(str(info[4][0]) for info in infos))


def _connect(address: str, port: int, timeout: float) -> httpcore.NetworkStream:
    return httpcore.SyncBackend().connect_tcp(address, port, timeout=timeout)


@dataclass(frozen=True)
class Dialer:
    """How a host becomes addresses, and an address a connection."""

    resolve: Callable[[str, int], list[str]] = _resolve
    connect: Callable[[str, int, float], httpcore.NetworkStream] = _connect


DIALER = Dialer()


@dataclass
class Deadline:
    at: float  # time.monotonic() when the fetch must be over

    def left(self, timeout: float | None, error: type[Exception]) -> float:
        """The time an operation may take: its own timeout, at most what is left."""
        remaining = self.at - time.monotonic()
        if remaining <= 0:
            raise error("the fetch's deadline has passed")
        return remaining if timeout is None else min(timeout, remaining)


class _Stream(httpcore.NetworkStream):
    """A connection whose every operation ends by the deadline."""

    def __init__(self, inner: httpcore.NetworkStream, deadline: Deadline) -> None:
        self._inner, self._deadline = inner, deadline

    def read(self, max_bytes: int, timeout: float | None = None) -> bytes:
        return self._inner.read(max_bytes, self._deadline.left(timeout, httpcore.ReadTimeout))

    def write(self, buffer: bytes, timeout: float | None = None) -> None:
        self._inner.write(buffer, self._deadline.left(timeout, httpcore.WriteTimeout))

    def close(self) -> None:
        self._inner.close()

    def start_tls(
        self, ssl_context: Any, server_hostname: str | None = None, timeout: float | None = None
    ) -> httpcore.NetworkStream:
        left = self._deadline.left(timeout, httpcore.ConnectTimeout)
        return _Stream(self._inner.start_tls(ssl_context, server_hostname, left), self._deadline)

    def get_extra_info(self, info: str) -> Any:
        return self._inner.get_extra_info(info)


@dataclass
class GuardedBackend(httpcore.NetworkBackend):
    """Connections that keep the deadline and the address rule of the module docstring."""

    deadline: Deadline
    dialer: Dialer = field(default_factory=lambda: DIALER)
    allowed: int | None = None  # the user's URL's rank, set by the first connection

    def connect_tcp(
        self,
        host: str,
        port: int,
        timeout: float | None = None,
        local_address: str | None = None,
        socket_options: Iterable[Any] | None = None,
    ) -> httpcore.NetworkStream:
        addresses = self._resolve(host, port)
        if not addresses:
            raise httpcore.ConnectError(f"{host}: no address")
        ranks = [address_rank(a) for a in addresses]
        if self.allowed is None:
            self.allowed = max(ranks)
        worst = max(ranks)
        if worst > self.allowed:
            raise HopRefused(host, addresses[ranks.index(worst)], worst, self.allowed)
        return self._first_that_answers(addresses, port, timeout)

    def _resolve(self, host: str, port: int) -> list[str]:
        """The addresses of `host`, asked in a thread so that a resolver that does not answer
        (getaddrinfo has no timeout) still ends by the deadline."""
        answer: list[list[str] | OSError] = []

        def ask() -> None:
            try:
                answer.append(self.dialer.resolve(host, port))
            except OSError as exc:  # the name does not resolve
                answer.append(exc)

        thread = threading.Thread(target=ask, name="countbot-resolve", daemon=True)
        thread.start()
        thread.join(self.deadline.left(None, httpcore.ConnectTimeout))
        if not answer:
            raise httpcore.ConnectTimeout(f"{host}: the name resolver did not answer in time")
        if isinstance(answer[0], OSError):
            raise httpcore.ConnectError(f"{host}: {answer[0].strerror or answer[0]}")
        return answer[0]

    def _first_that_answers(
        self, addresses: list[str], port: int, timeout: float | None
    ) -> httpcore.NetworkStream:
        error: Exception | None = None
        for address in addresses:
            left = self.deadline.left(timeout, httpcore.ConnectTimeout)
            try:
                return _Stream(self.dialer.connect(address, port, left), self.deadline)
            except httpcore.ConnectError as exc:  # the next address may answer
                error = exc
        assert error is not None
        raise error

    def connect_unix_socket(
        self, path: str, timeout: float | None = None, socket_options: Iterable[Any] | None = None
    ) -> httpcore.NetworkStream:
        raise httpcore.ConnectError("-a fetches over TCP only")

    def sleep(self, seconds: float) -> None:
        time.sleep(min(seconds, max(self.deadline.at - time.monotonic(), 0.0)))


# httpcore's errors as httpx's of the same name, the most specific first (as httpx's own
# transport maps them)
_ERRORS: tuple[tuple[type[Exception], type[httpx.HTTPError]], ...] = (
    (httpcore.ConnectTimeout, httpx.ConnectTimeout),
    (httpcore.ReadTimeout, httpx.ReadTimeout),
    (httpcore.WriteTimeout, httpx.WriteTimeout),
    (httpcore.PoolTimeout, httpx.PoolTimeout),
    (httpcore.TimeoutException, httpx.TimeoutException),
    (httpcore.ConnectError, httpx.ConnectError),
    (httpcore.ReadError, httpx.ReadError),
    (httpcore.WriteError, httpx.WriteError),
    (httpcore.NetworkError, httpx.NetworkError),
    (httpcore.ProxyError, httpx.ProxyError),
    (httpcore.UnsupportedProtocol, httpx.UnsupportedProtocol),
    (httpcore.LocalProtocolError, httpx.LocalProtocolError),
    (httpcore.RemoteProtocolError, httpx.RemoteProtocolError),
    (httpcore.ProtocolError, httpx.ProtocolError),
)


@contextlib.contextmanager
def _as_httpx_errors() -> Iterator[None]:
    try:
        yield
    except Exception as exc:
        theirs = next((t for ours, t in _ERRORS if isinstance(exc, ours)), None)
        if theirs is None:  # not httpcore's (HopRefused among them): as it is
            raise
        raise theirs(str(exc)) from exc


class _Body(httpx.SyncByteStream):
    """httpcore's response body as httpx's, its errors httpx's."""

    def __init__(self, stream: Iterable[bytes]) -> None:
        self.stream = stream

    def __iter__(self) -> Iterator[bytes]:
        with _as_httpx_errors():
            yield from self.stream

    def close(self) -> None:
        close = getattr(self.stream, "close", None)
        if close is not None:
            close()


class GuardedTransport(httpx.BaseTransport):
    """An httpx transport whose connections come from a `GuardedBackend` (no proxy, TLS
    verified): httpx's transport interface over an httpcore connection pool, the request and
    response mapped field by field as httpx's own transport does."""

    def __init__(self, backend: GuardedBackend) -> None:
        self.pool = httpcore.ConnectionPool(
            ssl_context=httpx.create_ssl_context(), network_backend=backend
        )

    def handle_request(self, request: httpx.Request) -> httpx.Response:
        assert isinstance(request.stream, httpx.SyncByteStream)  # an httpx.Client's request
        url = request.url
        sent = httpcore.Request(
            method=request.method,
            url=httpcore.URL(
                scheme=url.raw_scheme, host=url.raw_host, port=url.port, target=url.raw_path
            ),
            headers=request.headers.raw,
            content=request.stream,
            extensions=request.extensions,
        )
        with _as_httpx_errors():
            got = self.pool.handle_request(sent)
        assert isinstance(got.stream, Iterable)  # the sync pool's
        return httpx.Response(
            status_code=got.status,
            headers=got.headers,
            stream=_Body(got.stream),
            extensions=got.extensions,
        )

    def close(self) -> None:
        with _as_httpx_errors():
            self.pool.close()
