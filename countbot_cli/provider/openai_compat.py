"""The OpenAI-compatible chat-completions provider over an injected (or lazily made) httpx client.

- `build_request` is pure: url, headers and JSON body with the request hygiene servers need
  (no empty `tools`, content "" on tool-call messages, tool-call ids of at most 40 characters).
- `OpenAICompatProvider.stream` retries only before the first body byte arrives, then decodes
  SSE (`sse.py`) and assembles the answer (`assemble.py`); a JSON body is read as a whole answer.
- `error_from_response` (from `http_errors.py`) is the one place HTTP statuses become errors.

httpx is imported inside functions, so importing this module stays cheap.
"""

from __future__ import annotations

import dataclasses
import itertools
import json
import random
import threading
import time
from collections.abc import Callable, Generator, Iterable, Iterator, Mapping
from typing import TYPE_CHECKING, Any

from countbot_cli.errors import AuthError, ModelNotFoundError, ProviderError, StreamError
from countbot_cli.jsonsafe import loads_bounded
from countbot_cli.messages import ChatRequest, Finished, StreamEvent
from countbot_cli.provider.assemble import (
    EMPTY,
    Assembler,
    completion_events,
    merged,
    sse_reads,
)
from countbot_cli.provider.http_errors import (
    error_from_exception,
    error_from_response,
    parse_retry_after,
    safe_base,
    short_reason,
    stream_error,
)
from countbot_cli.provider.sse import MAX_LINE, LineTooLong
from countbot_cli.speedups.httpx_import import import_httpx

if TYPE_CHECKING:
    import httpx

    from countbot_cli.provider.base import ProviderSettings, ProviderStats

__all__ = [
    "OpenAICompatProvider",
    "build_request",
    "error_from_exception",
    "error_from_response",
    "parse_retry_after",
    "prepare_messages",
    "short_tool_call_id",
]

MAX_TOOL_CALL_ID = 40  # OpenAI rejects longer ids ("string too long ... maximum length 40")
MAX_RETRY_AFTER = 120.0  # seconds; a longer Retry-After is not waited for
MAX_BODY = MAX_LINE  # bytes of a whole (non-streamed) JSON answer, like one SSE line
MAX_ERROR_BODY = 1024 * 1024  # bytes of an HTTP error body read (only ~300 characters are shown)
REST_BYTES = 64 * 1024  # what is read of a body after its [DONE], at the most
REST_WAIT = 0.25  # seconds the next request waits for the last body's end to be read


# ---- requests ----


def short_tool_call_id(call_id: str) -> str:
    """Ids over 40 characters become `call_` + a hash: the same long id always maps alike."""
    if len(call_id) <= MAX_TOOL_CALL_ID:
        return call_id
    import hashlib

    return "call_" + hashlib.sha256(call_id.encode("utf-8")).hexdigest()[:32]


def prepare_messages(messages: Iterable[Mapping[str, Any]]) -> list[dict[str, Any]]:
    """Copies of the message dicts: no empty tool_calls, content "" not null, ids <= 40 chars."""
    out: list[dict[str, Any]] = []
    for message in messages:
        d = dict(message)
        calls = d.get("tool_calls")
        if calls:
            d["tool_calls"] = [_short_call(c) for c in calls]
        else:
            d.pop("tool_calls", None)
        if d.get("role") == "assistant" and d.get("content") is None:
            d["content"] = ""
        if d.get("role") == "tool" and isinstance(d.get("tool_call_id"), str):
            d["tool_call_id"] = short_tool_call_id(d["tool_call_id"])
        out.append(d)
    return out


def _short_call(call: Any) -> Any:
    if isinstance(call, Mapping) and isinstance(call.get("id"), str):
        return {**call, "id": short_tool_call_id(call["id"])}
    return call


def _endpoint(api_base: str, path: str) -> str:
    return f"{api_base.rstrip('/')}/{path}"


def _headers(cfg: ProviderSettings, accept: str, *, json_body: bool = True) -> dict[str, str]:
    headers = {"Accept": accept}
    if json_body:
        headers["Content-Type"] = "application/json"
    if cfg.api_key:
        headers["Authorization"] = f"Bearer {cfg.api_key}"
    for key, value in (cfg.headers or {}).items():
        for old in [k for k in headers if k.lower() == key.lower()]:
            del headers[old]
        headers[key] = value
    return headers


def build_request(
    cfg: ProviderSettings, req: ChatRequest
) -> tuple[str, dict[str, str], dict[str, Any]]:
    """The url, headers and JSON body for one chat-completions call. Pure."""
    accept = "text/event-stream" if req.stream else "application/json"
    body: dict[str, Any] = {
        "model": req.model or cfg.model,
        "messages": prepare_messages(req.messages),
    }
    if req.tools:
        body["tools"] = req.tools
        choice = req.tool_choice
        if choice is None and not cfg.stream_tools:
            # llama-cpp-python's server (chatml-function-calling) ignores `tools` unless a
            # tool_choice is sent; providers that need stream_tools: false are such servers.
            choice = "auto"
        if choice is not None:
            body["tool_choice"] = choice
    if req.temperature is not None:
        body["temperature"] = req.temperature
    if req.max_tokens is not None:
        body["max_tokens"] = req.max_tokens
    if req.cache_key and cfg.prompt_cache_key:  # one conversation, one cache (OpenAI's routing)
        body["prompt_cache_key"] = req.cache_key
    # per-call options (-o KEY VALUE): config/options.py keeps countbot's own fields out
    body.update({k: v for k, v in cfg.extra_body.items() if k not in body})
    body["stream"] = req.stream
    if req.stream and cfg.include_usage:
        body["stream_options"] = {"include_usage": True}
    return _endpoint(cfg.api_base, "chat/completions"), _headers(cfg, accept), body


def _is_json(content_type: str, first: bytes) -> bool:
    content_type = content_type.lower()
    if "json" in content_type:
        return True
    return "event-stream" not in content_type and first.lstrip().startswith(b"{")


# ---- the provider ----


class OpenAICompatProvider:
    """Chat completions against any OpenAI-compatible server."""

    supports_tools = True  # the server decides; countbot offers tools and reads what comes back
    last_stats: ProviderStats | None = None  # the server's timing is not measured

    def __init__(
        self,
        cfg: ProviderSettings,
        client: httpx.Client | None = None,
        *,
        sleep: Callable[[float], None] = time.sleep,
        on_notice: Callable[[str], None] | None = None,
        rand: Callable[[], float] = random.random,
    ) -> None:
        self.cfg = cfg
        self.name = cfg.name
        self.model = cfg.model
        self._client = client
        self._owns_client = client is None
        self._sleep = sleep
        self._on_notice = on_notice
        self._rand = rand
        self._rest: threading.Thread | None = None  # reading the last body's end

    # -- public API --

    @property
    def context_window(self) -> int | None:
        """The configured context window, while the configured model is the one in use."""
        return self.cfg.context_window if self.model == self.cfg.model else None

    def stream(self, req: ChatRequest) -> Iterator[StreamEvent]:
        streamed = not (req.tools and not self.cfg.stream_tools)
        return self._run(dataclasses.replace(req, stream=streamed))

    def complete(self, req: ChatRequest) -> Finished:
        events = self._run(dataclasses.replace(req, stream=False))
        try:
            for event in events:
                if isinstance(event, Finished):
                    return event
        finally:
            events.close()
        raise stream_error(EMPTY, "")  # not reached: _run always ends with Finished or raises

    def list_models(self) -> list[str]:
        url = _endpoint(self.cfg.api_base, "models")
        headers = _headers(self.cfg, "application/json", json_body=False)
        try:
            resp, chunks, first = self._open("GET", url, headers, None)
        except ModelNotFoundError as exc:
            raise ProviderError(
                f"{safe_base(self.cfg.api_base)} does not list models (404)",
                status=404,
                hint="check api_base (it usually ends in /v1)",
            ) from exc
        try:
            body = self._read_rest(first, chunks)
        finally:
            resp.close()
        return _model_ids(body)

    def close(self) -> None:
        if self._owns_client and self._client is not None:
            self._client.close()
            self._client = None

    # -- sending --

    def _http(self) -> httpx.Client:
        if self._client is None:
            import ssl

            httpx = import_httpx()
            verify: ssl.SSLContext | bool = True
            if self.cfg.api_base.lower().startswith("http://"):
                verify = ssl.SSLContext(ssl.PROTOCOL_TLS_CLIENT)  # no CA bundle to load
            self._client = httpx.Client(timeout=self._timeout(), verify=verify)
        return self._client

    def _timeout(self) -> httpx.Timeout:
        import httpx

        cfg = self.cfg
        return httpx.Timeout(
            connect=cfg.connect_timeout,
            read=cfg.read_timeout,
            write=cfg.read_timeout,
            pool=cfg.connect_timeout,
        )

    def _run(self, req: ChatRequest) -> Generator[StreamEvent, None, None]:
        url, headers, body = build_request(self.cfg, req)
        resp, chunks, first = self._open("POST", url, headers, body)
        rest_read = False
        try:
            if _is_json(resp.headers.get("content-type", ""), first):
                yield from completion_events(self._read_rest(first, chunks), self.cfg.api_key)
                return
            acc = Assembler(api_key=self.cfg.api_key)
            done = yield from self._decode_stream(first, chunks, acc)
            if done:
                self._rest = _read_to_end(resp, chunks)
                rest_read = True
            yield acc.finish(done)
        finally:
            if not rest_read:
                resp.close()

    def _decode_stream(
        self, first: bytes, chunks: Iterator[bytes], acc: Assembler
    ) -> Generator[StreamEvent, None, bool]:
        """The events of a streamed body, those one read brought as one delta per run of text;
        True once [DONE] came (what follows it is not decoded)."""
        events: list[StreamEvent] = []  # decoded from the read at hand
        try:
            for payloads in sse_reads(itertools.chain((first,), chunks)):
                done = _read_events(acc, payloads, events)
                yield from merged(events)
                events = []
                if done:
                    return True
        except GeneratorExit:
            raise
        except BaseException as exc:  # what was decoded before it is shown and kept
            yield from merged(events)
            failure = self._stream_failure(exc, acc)
            if failure is exc:
                raise
            raise failure from (None if isinstance(exc, LineTooLong) else exc)
        return False

    def _stream_failure(self, exc: BaseException, acc: Assembler) -> BaseException:
        """What a streamed body's read or decoding raised, as the caller sees it: a transport
        failure or an overlong line as a ProviderError keeping the text that came; an error
        payload, Ctrl-C or SIGTERM as it is."""
        import httpx

        if isinstance(exc, httpx.TransportError):
            err = self._exc_error(exc, started=True)
            if isinstance(err, StreamError):
                err.partial_text = acc.partial
            return err
        if isinstance(exc, LineTooLong):
            return stream_error(f"the provider sent {exc}; stopped reading", acc.partial)
        return exc

    def _read_rest(self, first: bytes, chunks: Iterator[bytes]) -> bytes:
        import httpx

        parts = [first]
        size = len(first)
        try:
            for chunk in chunks:
                size += len(chunk)
                if size > MAX_BODY:
                    raise ProviderError(
                        f"the provider's answer is longer than {MAX_BODY:,} bytes; stopped reading"
                    )
                parts.append(chunk)
        except httpx.TransportError as exc:
            raise self._exc_error(exc, started=True) from exc
        return b"".join(parts)

    def _exc_error(self, exc: Exception, *, started: bool) -> ProviderError:
        return error_from_exception(
            exc, self.cfg.api_base, started=started, read_timeout=self.cfg.read_timeout
        )

    def _open(
        self, method: str, url: str, headers: dict[str, str], body: dict[str, Any] | None
    ) -> tuple[httpx.Response, Iterator[bytes], bytes]:
        """Send, retrying failures that happen before the first body byte arrives."""
        content = None if body is None else json.dumps(body, ensure_ascii=False).encode("utf-8")
        attempt = 0
        while True:
            try:
                return self._attempt(method, url, headers, content)
            except ProviderError as err:
                delay = self._retry_delay(err, attempt)
                if delay is None:
                    raise
                attempt += 1
                if self._on_notice is not None:
                    reason = short_reason(err)
                    self._on_notice(
                        f"{reason}; retrying in {delay:.1f} s ({attempt}/{self.cfg.max_retries})"
                    )
                self._sleep(delay)

    def _attempt(
        self, method: str, url: str, headers: dict[str, str], content: bytes | None
    ) -> tuple[httpx.Response, Iterator[bytes], bytes]:
        if self._rest is not None:  # the last body's end, normally read already
            self._rest.join(REST_WAIT)
            self._rest = None
        client = self._http()
        import httpx

        request = client.build_request(
            method, url, headers=headers, content=content, timeout=self._timeout()
        )
        resp: httpx.Response | None = None
        try:
            resp = client.send(request, stream=True)
            if resp.status_code >= 400:
                text = _head_of(resp, MAX_ERROR_BODY).decode("utf-8", errors="replace")
                raise self._key_hint(
                    error_from_response(
                        resp.status_code,
                        text,
                        resp.headers,
                        model=self.model,
                        api_key=self.cfg.api_key,
                    )
                )
            chunks = _body(resp)
            first = next((c for c in chunks if c), b"")
            return resp, chunks, first
        except httpx.TransportError as exc:
            if resp is not None:
                resp.close()
            raise self._exc_error(exc, started=False) from exc
        except BaseException:
            if resp is not None:
                resp.close()
            raise

    def _key_hint(self, err: ProviderError) -> ProviderError:
        """Name the env var that should hold the key, when the settings know it."""
        env = self.cfg.api_key_env
        if isinstance(err, AuthError) and env:
            err.hint = f"check the provider's API key (env var {env})"
        return err

    def _retry_delay(self, err: ProviderError, attempt: int) -> float | None:
        if not err.retryable or attempt >= self.cfg.max_retries:
            return None
        if err.retry_after is not None:
            if err.retry_after > MAX_RETRY_AFTER:
                return None
            if err.retry_after > 0:
                return err.retry_after
        return min(0.5 * 2**attempt, 8.0) * (1.0 - 0.25 * self._rand())


def _body(resp: httpx.Response) -> Iterator[bytes]:
    """The body's bytes as they arrive, decoded (gzip, br, ...) only when the server encoded it:
    an unencoded body is read with one layer less for every read (a streamed answer makes one
    a token). A body already read (a mocked transport's) is iter_bytes' to give."""
    encoding = resp.headers.get("content-encoding", "").strip().lower()
    if encoding in ("", "identity") and not resp.is_stream_consumed:
        return resp.iter_raw()
    return resp.iter_bytes()


def _read_to_end(resp: httpx.Response, chunks: Iterator[bytes]) -> threading.Thread:
    """The rest of a streamed body after its [DONE] (the body's end, which servers send right
    behind it), read in a daemon thread and the response closed: a body read to its end leaves
    its connection in the pool for the next request (no new TCP and TLS handshake), and a
    server that holds the end back delays neither this answer nor, beyond REST_WAIT, the next
    request (which then opens a connection of its own)."""

    def read() -> None:
        size = 0
        try:
            for chunk in chunks:
                size += len(chunk)
                if size > REST_BYTES:
                    break
        except Exception:  # a reset, a timeout: the connection is closed, the answer is whole
            pass
        finally:
            resp.close()

    thread = threading.Thread(target=read, name="countbot-body-end", daemon=True)
    thread.start()
    return thread


def _read_events(acc: Assembler, payloads: list[str], events: list[StreamEvent]) -> bool:
    """Add to `events` those of one read's payloads; True if [DONE] was among them (what
    follows it is not read). A payload that is an error raises, `events` holding those before."""
    for data in payloads:
        if data[0] != "{" and data.lstrip().startswith("[DONE]"):
            return True
        events += acc.add(data)
    return False


def _head_of(resp: httpx.Response, limit: int) -> bytes:
    """The first `limit` bytes of a body (an error body: the rest is not read)."""
    parts: list[bytes] = []
    size = 0
    for chunk in resp.iter_bytes():
        parts.append(chunk)
        size += len(chunk)
        if size >= limit:
            break
    return b"".join(parts)[:limit]


def _model_ids(body: bytes) -> list[str]:
    try:
        obj = loads_bounded(body)
    except ValueError:
        obj = None
    items = obj.get("data", obj.get("models")) if isinstance(obj, dict) else obj
    if not isinstance(items, list):
        raise ProviderError("the provider's model list is not in the expected format")
    ids = {
        str(i.get("id") or i.get("name") or "") if isinstance(i, dict) else str(i) for i in items
    }
    return sorted(i for i in ids if i)
