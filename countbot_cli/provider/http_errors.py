"""HTTP statuses, error bodies and httpx transport errors mapped to the error tree (errors.py).

`error_from_response` is the one place a status becomes an error; `openai_compat` re-exports it.
Messages are one line, carry the provider's own words (trimmed, key-like strings masked) and end
in an actionable hint. httpx is imported only inside `error_from_exception`.
"""

from __future__ import annotations

import json
import re
import time
from collections.abc import Mapping
from typing import Any
from urllib.parse import urlsplit, urlunsplit

from countbot_cli.errors import (
    AuthError,
    ConnectError,
    ContextLengthError,
    ModelNotFoundError,
    ProviderError,
    QuotaExceededError,
    RateLimitError,
    ReadTimeoutError,
    ServerError,
    StreamError,
    TransientError,
)
from countbot_cli.jsonsafe import loads_bounded
from countbot_cli.textsafe import LazyPattern

MAX_MESSAGE = 300  # characters of the provider's own error message we show
# both only for an error (compiled then: textsafe.LazyPattern)
_CONTEXT_RE = LazyPattern(
    r"context_length_exceeded|maximum context length|context length|context window"
    r"|too many tokens|prompt is too long",
    re.IGNORECASE,
)
_KEYLIKE_RE = LazyPattern(r"\b(sk|pk|rk|key)-[A-Za-z0-9_\-*.]{6,}")


def clean(text: str, api_key: str | None = None, limit: int = MAX_MESSAGE) -> str:
    """One line of at most `limit` characters, with the key and anything key-like masked."""
    if api_key and len(api_key) >= 4:
        text = text.replace(api_key, "***")
    text = _KEYLIKE_RE.re.sub(r"\1-***", " ".join(text.split()))
    return text if len(text) <= limit else text[: limit - 1] + "…"


def _error_fields(body_text: str) -> tuple[str, str]:
    """(the provider's message, its error code and type in lower case) from an error body."""
    try:
        obj = loads_bounded(body_text)
    except ValueError:  # not JSON, or JSON over the limits (jsonsafe): shown as text
        return ("" if body_text.lstrip().startswith("<") else body_text), ""
    if not isinstance(obj, dict):
        return str(obj), ""
    err = obj.get("error")
    if isinstance(err, str):
        return err, ""
    if not isinstance(err, dict):
        err = obj  # vLLM {"object": "error", "message": ...} and FastAPI {"detail": ...}
    message = err.get("message")
    if message is None and "detail" in err:
        message = _detail_text(err["detail"])
    codes = " ".join(str(err.get(k) or "") for k in ("code", "type")).strip().lower()
    return str(message or ""), codes


def _detail_text(detail: Any) -> str:
    """FastAPI's validation detail (llama-cpp-python's server answers 422 with it)."""
    if not isinstance(detail, list):
        return str(detail)
    parts = []
    for item in detail:
        if isinstance(item, dict):
            loc = ".".join(str(x) for x in item.get("loc") or [])
            msg = str(item.get("msg", ""))
            parts.append(f"{loc}: {msg}" if loc else msg)
    return "; ".join(parts)


def parse_retry_after(headers: Mapping[str, str], now: float | None = None) -> float | None:
    """Seconds from `retry-after-ms`, or `retry-after` (seconds or an HTTP date)."""
    lower = {k.lower(): v for k, v in headers.items()}
    try:
        if "retry-after-ms" in lower:
            return max(float(lower["retry-after-ms"]) / 1000.0, 0.0)
    except ValueError:
        pass
    value = lower.get("retry-after")
    if not value:
        return None
    try:
        return max(float(value), 0.0)
    except ValueError:
        pass
    from email.utils import parsedate_to_datetime

    try:
        when = parsedate_to_datetime(value).timestamp()
    except (TypeError, ValueError, IndexError):
        return None
    return max(when - (time.time() if now is None else now), 0.0)


def error_from_response(
    status: int,
    body_text: str,
    headers: Mapping[str, str],
    *,
    model: str | None = None,
    api_key: str | None = None,
) -> ProviderError:
    """Map an HTTP error answer to the error tree, with a one-line actionable message."""
    raw, codes = _error_fields(body_text)
    detail = f" ({status}): {clean(raw, api_key) or f'HTTP {status}'}"
    if status in (401, 403):
        what = "authentication failed" if status == 401 else "permission denied"
        return AuthError(what + detail, status=status, hint="check the provider's API key")
    if "context_length" in codes or _CONTEXT_RE.re.search(raw):
        return ContextLengthError(
            "the conversation is too long for the model" + detail,
            status=status,
            hint="start a new session or shorten the input",
        )
    if status == 404:
        return _not_found(raw, codes, detail, model)
    if status == 402 or "insufficient_quota" in codes or "exceeded your current quota" in raw:
        return QuotaExceededError(
            "the account is out of quota or credit" + detail,
            status=status,
            hint="check the plan and billing with the provider",
        )
    wait = parse_retry_after(headers)
    if status == 429:
        return RateLimitError("rate limited" + detail, status=status, retry_after=wait)
    if status in (408, 409):
        what = "the provider could not take the request now"
        return TransientError(what + detail, status=status, retry_after=wait)
    if status >= 500:
        return ServerError("server error" + detail, status=status, retry_after=wait)
    return ProviderError("the provider rejected the request" + detail, status=status)


def _not_found(raw: str, codes: str, detail: str, model: str | None) -> ModelNotFoundError:
    if "model" in raw.lower() or "model" in codes:
        name = f"model '{model}'" if model else "the model"
        hint = "run `countbot models` to list available models"
        return ModelNotFoundError(f"{name} was not found{detail}", status=404, hint=hint)
    hint = "check api_base (it usually ends in /v1) and the model name; run `countbot models`"
    return ModelNotFoundError(f"not found{detail}", status=404, hint=hint)


def safe_base(api_base: str) -> str:
    """api_base without user info, query or trailing slash, for messages."""
    try:
        parts = urlsplit(api_base)
    except ValueError:
        return api_base
    netloc = parts.netloc.rpartition("@")[2]
    return urlunsplit((parts.scheme, netloc, parts.path, "", "")).rstrip("/")


def error_from_exception(
    exc: Exception, api_base: str, *, started: bool = False, read_timeout: float | None = None
) -> ProviderError:
    """Map an httpx transport error. `started`: body bytes had arrived (the stream broke)."""
    import httpx

    base = safe_base(api_base)
    detail = clean(str(exc), limit=160) or type(exc).__name__
    reachable = "is the server running and reachable?"
    if isinstance(exc, httpx.UnsupportedProtocol):
        hint = "it must start with http:// or https://"
        return ProviderError(f"cannot use api_base {base}: {detail}", hint=hint)
    if isinstance(exc, httpx.ConnectTimeout):
        return ConnectError(f"could not connect to {base}: connection timed out", hint=reachable)
    if isinstance(exc, httpx.ConnectError):
        reason = "connection refused" if "refused" in detail.lower() else detail
        return ConnectError(f"could not connect to {base}: {reason}", hint=reachable)
    if isinstance(exc, httpx.TimeoutException):
        within = f" within {read_timeout:g} s" if read_timeout else ""
        if started:
            return StreamError(f"timed out: the stream from {base} stalled with no data{within}")
        hint = "raise read_timeout for slow models"
        return ReadTimeoutError(f"timed out: {base} did not answer{within}", hint=hint)
    if started:
        return StreamError(f"the connection to {base} broke during the answer: {detail}")
    return ConnectError(f"the connection to {base} failed before an answer arrived: {detail}")


def stream_error(message: str, partial_text: str, hint: str | None = None) -> StreamError:
    """A StreamError that keeps the text that had arrived."""
    err = StreamError(message, hint=hint)
    err.partial_text = partial_text
    return err


def payload_error(err: Any, partial_text: str, api_key: str | None) -> ProviderError:
    """An `error` object inside a 200 answer (mid-stream, or as the whole JSON body)."""
    body = json.dumps(err if isinstance(err, dict) else {"error": err})
    raw, codes = _error_fields(body)
    code = err.get("code") if isinstance(err, dict) else None
    if isinstance(code, int) and 400 <= code < 600 and not partial_text:
        return error_from_response(code, body, {}, api_key=api_key)  # OpenRouter: code = status
    if "context_length" in codes or _CONTEXT_RE.re.search(raw):
        msg = clean(raw, api_key)
        return ContextLengthError(f"the conversation is too long for the model: {msg}")
    msg = clean(raw, api_key) or "no details given"
    return stream_error(f"the provider reported an error: {msg}", partial_text)


def short_reason(err: ProviderError) -> str:
    """A few words for a retry notice: "rate limited (429)", "could not connect"."""
    status = err.status
    if status == 429:
        return "rate limited (429)"
    if status is not None and status >= 500:
        return f"server error ({status})"
    if status is not None:
        return f"request not taken ({status})"
    if isinstance(err, ReadTimeoutError):
        return "no answer in time"
    return "could not connect"
