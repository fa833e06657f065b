"""The context window of a model countbot does not know, asked of its server (issue 11 item 7).

Asked only when the model is in no table and no context window is configured (`context_window`,
`COUNTBOT_CONTEXT_WINDOW`, `--context-window`), with a short timeout, and the answer (or that
there was none) is cached per base URL and model in `<data_dir>/context_windows.json`, so a
normal turn makes no request for it. The caller asks in a thread beside the first request
(conversation/server_window.py), never before it. Where a server can tell:

- the OpenAI-style model list `GET {api_base}/models`: the model's `max_model_len` (vLLM) or
  `context_length` / `top_provider.context_length` (OpenRouter and its imitators);
- llama.cpp's server `GET {root}/props`: `default_generation_settings.n_ctx` or `n_ctx`;
- Ollama `POST {root}/api/show {"model": …}`: the `*.context_length` of its `model_info`.

The last two are asked only of a server known to be of that kind (issue 25 point 5): by its
preset, or by what its model list said (`server_kind`: llama.cpp's `Server` header or
`owned_by`, Ollama's `owned_by: "library"`). Another server is never sent Ollama's POST.

`root` is the base URL without a trailing `/v1`. Anything missing, slow, malformed or
implausible is no answer; the caller then assumes its default and says so once when history
is trimmed against it. Every JSON body is parsed with jsonsafe's limits.
"""

from __future__ import annotations

import contextlib
import json
import time
from collections.abc import Callable, Iterator, Mapping
from pathlib import Path
from typing import Any

from countbot_cli import fileio
from countbot_cli.config.derived import derived_file
from countbot_cli.config.own_files import CONTEXT_WINDOWS_FILE as CACHE_FILE
from countbot_cli.jsonsafe import loads_bounded
from countbot_cli.provider.openai_compat import load_httpx

PROBE_TIMEOUT = 1.5  # seconds for each request
UNKNOWN_TTL = 24 * 3600  # a server that could not tell is asked again after a day
MAX_BODY = 4_000_000
PLAUSIBLE = range(256, 100_000_001)

# (method, url, json body or None) -> (parsed JSON or None, the `Server` header or "")
Fetch = Callable[[str, str, Any], tuple[Any, str]]
LLAMACPP, OLLAMA = "llamacpp", "ollama"  # the server kinds with their own question for it


def probe_context_window(
    api_base: str,
    model: str,
    headers: Mapping[str, str],
    *,
    kind: str | None = None,
    timeout: float | None = None,
) -> int | None:
    """Ask the server at `api_base` for `model`'s context window; None when it cannot tell.
    `kind`: what the server is known to be (its preset), else its model list says.
    `timeout`: for each request, PROBE_TIMEOUT unless given."""
    with probe_client(api_base, headers, timeout or PROBE_TIMEOUT) as fetch:
        return context_window_from(api_base, model, fetch, kind)


def server_kind(models: Any, server: str) -> str | None:
    """LLAMACPP or OLLAMA when a `GET /models` answer (its JSON, its `Server` header) says the
    server is one; None for any other server or no answer."""
    if "llama.cpp" in server.lower():
        return LLAMACPP
    rows = models.get("data") if isinstance(models, dict) else models
    rows = [r for r in rows if isinstance(r, dict)] if isinstance(rows, list) else []
    if any(_llamacpp_row(r) for r in rows):
        return LLAMACPP
    if any(r.get("owned_by") == "library" for r in rows):  # Ollama: a model's namespace
        return OLLAMA
    return None


def _llamacpp_row(row: Mapping[str, Any]) -> bool:
    owner = row.get("owned_by")
    return owner == "llamacpp" or (owner == "me" and isinstance(row.get("permissions"), list))


@contextlib.contextmanager
def probe_client(
    api_base: str, headers: Mapping[str, str], timeout: float = PROBE_TIMEOUT
) -> Iterator[Callable[[str, str, Any], tuple[Any, str]]]:
    """A short-timeout client for asking a server about itself: `fetch(method, url, body)`
    gives (the parsed JSON or None, the `Server` header or ""); errors and non-200 are None."""
    import ssl

    httpx = load_httpx()  # httpx's own CLI (click, rich) stays unloaded, as for the chat request

    verify: ssl.SSLContext | bool = True
    if api_base.lower().startswith("http://"):
        verify = ssl.SSLContext(ssl.PROTOCOL_TLS_CLIENT)  # plain HTTP: no CA bundle to load
    with httpx.Client(timeout=timeout, headers=dict(headers), verify=verify) as client:

        def fetch(method: str, url: str, body: Any) -> tuple[Any, str]:
            try:
                resp = client.request(method, url, json=body)
            except httpx.HTTPError:
                return None, ""
            server = resp.headers.get("server", "")
            if resp.status_code != 200 or len(resp.content) > MAX_BODY:
                return None, server
            try:
                return loads_bounded(resp.content), server
            except ValueError:
                return None, server

        yield fetch


def context_window_from(
    api_base: str, model: str, fetch: Fetch, kind: str | None = None
) -> int | None:
    """The model list's context window; else, for a server known (by `kind`, else by that
    list) to be llama.cpp's or Ollama, what its own place says. Another server is asked nothing
    more."""
    base = api_base.rstrip("/")
    root = base[: -len("/v1")] if base.endswith("/v1") else base
    models, server = fetch("GET", f"{base}/models", None)
    n = _from_models(models, model)
    if n is not None:
        return n
    kind = kind or server_kind(models, server)
    if kind == LLAMACPP:
        return _from_props(fetch("GET", f"{root}/props", None)[0], model)
    if kind == OLLAMA:
        return _from_ollama(fetch("POST", f"{root}/api/show", {"model": model})[0], model)
    return None


def _plausible(value: Any) -> int | None:
    if isinstance(value, int) and not isinstance(value, bool) and value in PLAUSIBLE:
        return value
    return None


def _from_models(data: Any, model: str) -> int | None:
    rows = data.get("data") if isinstance(data, dict) else data
    for row in rows if isinstance(rows, list) else []:
        if not isinstance(row, dict) or row.get("id") != model:
            continue
        top = row.get("top_provider")
        for value in (
            row.get("max_model_len"),
            row.get("context_length"),
            top.get("context_length") if isinstance(top, dict) else None,
        ):
            if (n := _plausible(value)) is not None:
                return n
    return None


def _from_props(data: Any, model: str) -> int | None:
    if not isinstance(data, dict):
        return None
    settings = data.get("default_generation_settings")
    inner = settings.get("n_ctx") if isinstance(settings, dict) else None
    return _plausible(inner) or _plausible(data.get("n_ctx"))


def _from_ollama(data: Any, model: str) -> int | None:
    info = data.get("model_info") if isinstance(data, dict) else None
    if not isinstance(info, dict):
        return None
    for key, value in info.items():
        if isinstance(key, str) and key.endswith(".context_length"):
            return _plausible(value)
    return None


class ProbeCache:
    """`{"KEY": {…, "at": unix time}}` in one JSON file: what servers said about themselves.
    Best effort: an unreadable file is empty, a failed write is skipped."""

    def __init__(self, path: Path, now: Callable[[], float] = time.time) -> None:
        self.path = path
        self.now = now

    def _read(self) -> dict[str, Any]:
        try:
            data = loads_bounded(self.path.read_bytes())
        except (OSError, ValueError):
            return {}
        return data if isinstance(data, dict) else {}

    def read_row(self, key: str) -> dict[str, Any] | None:
        row = self._read().get(key)
        if not isinstance(row, dict) or not isinstance(row.get("at"), (int, float)):
            return None
        return row

    def write_row(self, key: str, row: dict[str, Any]) -> None:
        data = self._read()
        data[key] = {**row, "at": int(self.now())}
        with contextlib.suppress(OSError):
            self.path.parent.mkdir(parents=True, exist_ok=True)
            blob = json.dumps(data, sort_keys=True, indent=1) + "\n"
            fileio.atomic_write(self.path, blob.encode("utf-8"), durable=False)


class ContextWindowCache(ProbeCache):
    """`{"BASE MODEL": {"n": 32768 or null, "at": unix time}}`: best effort, only a cache."""

    def get(self, api_base: str, model: str) -> tuple[bool, int | None]:
        """(found, context window): found False when never asked, or an unknown answer has aged."""
        row = self.read_row(f"{api_base} {model}")
        if row is None:
            return False, None
        n = _plausible(row.get("n"))
        if n is None and self.now() - row["at"] > UNKNOWN_TTL:
            return False, None
        return True, n

    def put(self, api_base: str, model: str, n: int | None) -> None:
        self.write_row(f"{api_base} {model}", {"n": n})


def cache_path(data_dir: Path) -> Path:
    """Where the context windows learned for `data_dir` are kept (the cache folder)."""
    return derived_file(data_dir, CACHE_FILE)


def discover_context_window(
    api_base: str,
    model: str,
    headers: Mapping[str, str],
    data_dir: Path,
    probe: Callable[..., int | None] = probe_context_window,
    *,
    kind: str | None = None,
) -> int | None:
    """The server's context window for `model`, from the cache or asked once."""
    cache = ContextWindowCache(cache_path(data_dir))
    found, n = cache.get(api_base, model)
    if found:
        return n
    n = probe(api_base, model, headers, kind=kind)
    cache.put(api_base, model, n)
    return n


def cached_context_window(api_base: str, model: str, data_dir: Path) -> tuple[bool, int | None]:
    """(found, context window) from the cache alone: no request."""
    return ContextWindowCache(cache_path(data_dir)).get(api_base, model)
