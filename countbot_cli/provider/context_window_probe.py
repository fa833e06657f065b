"""The context window a server runs a model with, asked of the server: never a model's trained
maximum, which a server that loads models (Ollama, LM Studio) does not run.

Ollama's `/api/ps` (else a Modelfile's `num_ctx`, else 4,096), LM Studio's loaded instance,
llama.cpp's `/props`, vLLM's and OpenRouter's `/models`, each asked only of a server known to be
of that kind. Each answer is a `ContextWindow`, the figure and where it came from; answers that
do not depend on a load are cached per base URL and model (`cache_path`). Anything missing,
slow, malformed or implausible is no answer. docs/design/providers.md lists the places.
"""

from __future__ import annotations

import contextlib
import json
import re
import time
from collections.abc import Callable, Iterator, Mapping
from pathlib import Path
from typing import Any, NamedTuple

from countbot_cli import fileio
from countbot_cli.config.derived import derived_file
from countbot_cli.config.own_files import CONTEXT_WINDOWS_FILE as CACHE_FILE
from countbot_cli.jsonsafe import loads_bounded
from countbot_cli.speedups.httpx_import import import_httpx

PROBE_TIMEOUT = 1.5  # seconds for each request
UNKNOWN_TTL = 24 * 3600  # a server that could not tell is asked again after a day
MAX_BODY = 4_000_000
PLAUSIBLE = range(256, 100_000_001)
OLLAMA_DEFAULT = 4096  # Ollama's window for a model nothing else sets (docs: < 24 GiB of VRAM)
UNLOADED_ASSUMED = 4096  # LM Studio, model not loaded: what countbot assumes until it is

# (method, url, json body or None) -> (parsed JSON or None, the `Server` header or "")
Fetch = Callable[[str, str, Any], tuple[Any, str]]
LLAMACPP, OLLAMA, LMSTUDIO, VLLM = "llamacpp", "ollama", "lmstudio", "vllm"
LOAD_STATE = (OLLAMA, LMSTUDIO)  # the window is the one the server loaded the model with
LOCAL_SERVERS = (LLAMACPP, OLLAMA, LMSTUDIO, VLLM)  # each runs a window of its own choosing


class ContextWindow(NamedTuple):
    """A context window and where the figure comes from (said by /context, `config check` and
    the notices). `loaded` False: the server has not loaded the model; the figure is the one it
    will load it with unless told otherwise, and is asked again after a request."""

    n: int
    source: str
    loaded: bool = True


def probe_context_window(
    api_base: str,
    model: str,
    headers: Mapping[str, str],
    *,
    kind: str | None = None,
    timeout: float | None = None,
) -> ContextWindow | None:
    """Ask the server at `api_base` for the window it runs `model` with; None when it cannot
    tell. `kind`: what the server is known to be (its preset), else its model list says.
    `timeout`: for each request, PROBE_TIMEOUT unless given."""
    with probe_client(api_base, headers, timeout or PROBE_TIMEOUT) as fetch:
        return context_window_from(api_base, model, fetch, kind)


def server_kind(models: Any, server: str) -> str | None:
    """LLAMACPP or OLLAMA when a `GET /models` answer (its JSON, its `Server` header) says the
    server is one; None for any other server or no answer."""
    if "llama.cpp" in server.lower():
        return LLAMACPP
    rows = _rows(models)
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

    httpx = import_httpx()  # httpx's own CLI (click, rich) stays unloaded, as for the chat request

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
) -> ContextWindow | None:
    """The window the server runs `model` with (see the module). A server that loads models
    (by `kind`) is asked its own places only; any other its model list first, then, when that
    list (or `kind`) says it is llama.cpp's, its `/props`. Another server is asked nothing
    more."""
    base = api_base.rstrip("/")
    root = base[: -len("/v1")] if base.endswith("/v1") else base
    if kind == OLLAMA:
        return _ollama_context_window(root, model, fetch)
    if kind == LMSTUDIO:
        return _lmstudio_context_window(root, model, fetch)
    models, server = fetch("GET", f"{base}/models", None)
    found = _from_models(models, model)
    if found is not None:
        return found
    kind = kind or server_kind(models, server)
    if kind == LLAMACPP:
        n = _from_props(fetch("GET", f"{root}/props", None)[0])
        return ContextWindow(n, "the n_ctx llama.cpp's server runs (/props)") if n else None
    if kind == OLLAMA:
        return _ollama_context_window(root, model, fetch)
    return None


def _plausible(value: Any) -> int | None:
    if isinstance(value, int) and not isinstance(value, bool) and value in PLAUSIBLE:
        return value
    return None


def _rows(data: Any, key: str = "data") -> list[dict[str, Any]]:
    rows = data.get(key) if isinstance(data, dict) else data
    return [r for r in rows if isinstance(r, dict)] if isinstance(rows, list) else []


def _from_models(data: Any, model: str) -> ContextWindow | None:
    for row in _rows(data):
        if row.get("id") != model:
            continue
        top = row.get("top_provider")
        for key, value in (
            ("max_model_len", row.get("max_model_len")),
            ("context_length", row.get("context_length")),
            ("context_length", top.get("context_length") if isinstance(top, dict) else None),
        ):
            if (n := _plausible(value)) is not None:
                return ContextWindow(n, f"{key} in the server's model list")
    return None


def _from_props(data: Any) -> int | None:
    if not isinstance(data, dict):
        return None
    settings = data.get("default_generation_settings")
    inner = settings.get("n_ctx") if isinstance(settings, dict) else None
    return _plausible(inner) or _plausible(data.get("n_ctx"))


def ollama_name(name: str) -> str:
    """Ollama's full name for a model: `llama3.2` is `llama3.2:latest`."""
    name = name.strip().lower()
    return name if ":" in name.rsplit("/", 1)[-1] else f"{name}:latest"


_NUM_CTX = re.compile(r"^\s*num_ctx\s+(\d+)\s*$", re.MULTILINE)


def _ollama_context_window(root: str, model: str, fetch: Fetch) -> ContextWindow:
    """The loaded model's window; else its Modelfile's num_ctx; else Ollama's default. Never
    `model_info`'s context_length: the model's maximum, which Ollama does not run."""
    ps, _ = fetch("GET", f"{root}/api/ps", None)
    want = ollama_name(model)
    for row in _rows(ps, "models"):
        names = {ollama_name(str(row.get(k))) for k in ("name", "model") if row.get(k)}
        if want in names and (n := _plausible(row.get("context_length"))) is not None:
            return ContextWindow(n, f"the window Ollama runs {model} with (/api/ps)")
    show, _ = fetch("POST", f"{root}/api/show", {"model": model})
    params = show.get("parameters") if isinstance(show, dict) else None
    match = _NUM_CTX.search(params) if isinstance(params, str) else None
    if match and (n := _plausible(int(match.group(1)))) is not None:
        why = f"num_ctx in {model}'s Modelfile (/api/show; Ollama has not loaded it yet)"
        return ContextWindow(n, why, loaded=False)
    why = "it has not loaded the model yet" if ps is not None else "/api/ps did not answer"
    return ContextWindow(OLLAMA_DEFAULT, f"Ollama's default window ({why})", loaded=False)


def _lmstudio_context_window(root: str, model: str, fetch: Fetch) -> ContextWindow:
    """The context length of a loaded instance of `model`; an assumed one when none is."""
    listed, _ = fetch("GET", f"{root}/api/v1/models", None)
    lengths: list[Any] = []
    for row in _rows(listed, "models"):
        instances = [i for i in row.get("loaded_instances") or [] if isinstance(i, dict)]
        if row.get("key") == model or any(i.get("id") == model for i in instances):
            lengths += [(i.get("config") or {}).get("context_length") for i in instances]
    if listed is None:  # before LM Studio 0.4: the v0 REST API
        row, _ = fetch("GET", f"{root}/api/v0/models/{model}", None)
        if isinstance(row, dict) and row.get("state") == "loaded":
            lengths.append(row.get("loaded_context_length"))
    for value in lengths:
        if (n := _plausible(value)) is not None:
            return ContextWindow(n, f"the context length LM Studio loaded {model} with")
    why = f"LM Studio has not loaded {model}: assumed until it has"
    return ContextWindow(UNLOADED_ASSUMED, why, loaded=False)


class ProbeCache:
    """`{"KEY": {…, "at": unix time}}` in one JSON file: what servers said about themselves.
    Best effort: an unreadable file is empty, a failed write is skipped."""

    def __init__(self, path: Path, now: Callable[[], float] = time.time) -> None:
        self.path = path
        self.now = now

    def _read(self) -> dict[str, Any]:
        return fileio.read_json_cache(self.path, fileio.SMALL_CACHE)

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


CACHED = "what the server said earlier"  # a cached answer's source, when none was kept


class ContextWindowCache(ProbeCache):
    """`{"BASE MODEL": {"n": 32768 or null, "source": "…", "at": unix time}}`: only a cache."""

    def get(self, api_base: str, model: str) -> tuple[bool, ContextWindow | None]:
        """(found, window): found False when never asked, or an unknown answer has aged."""
        row = self.read_row(f"{api_base} {model}")
        if row is None:
            return False, None
        n = _plausible(row.get("n"))
        if n is None:
            return self.now() - row["at"] <= UNKNOWN_TTL, None
        source = row.get("source")
        return True, ContextWindow(n, source if isinstance(source, str) and source else CACHED)

    def put(self, api_base: str, model: str, found: ContextWindow | None) -> None:
        row = {"n": None} if found is None else {"n": found.n, "source": found.source}
        self.write_row(f"{api_base} {model}", row)


def cache_path(data_dir: Path) -> Path:
    """Where the context windows learned for `data_dir` are kept (the cache folder)."""
    return derived_file(data_dir, CACHE_FILE)


def discover_context_window(
    api_base: str,
    model: str,
    headers: Mapping[str, str],
    data_dir: Path,
    probe: Callable[..., ContextWindow | None] = probe_context_window,
    *,
    kind: str | None = None,
) -> ContextWindow | None:
    """The server's window for `model`, from the cache or asked once."""
    cache = ContextWindowCache(cache_path(data_dir))
    found, answer = cache.get(api_base, model)
    if found:
        return answer
    answer = probe(api_base, model, headers, kind=kind)
    cache.put(api_base, model, answer)
    return answer


def cached_context_window(
    api_base: str, model: str, data_dir: Path
) -> tuple[bool, ContextWindow | None]:
    """(found, window) from the cache alone: no request."""
    return ContextWindowCache(cache_path(data_dir)).get(api_base, model)
