"""What an OpenAI-compatible server says about itself, fitted into the provider's settings: the
model when none was chosen, and what kind of server it is (llama.cpp's, Ollama).

With no model chosen the server's `GET /models` is asked: one model is taken, several or none
is a ConfigError naming them. A provider with no preset is asked once (cached a day per base
URL in `servers.json`) what it is; llama.cpp's and llama-cpp-python's servers get the
`llamacpp` preset's request shape. Requests use context_window_probe.py's short-timeout client;
a server that does not answer changes nothing. docs/design/providers.md says how each is known.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import replace
from pathlib import Path
from typing import Any, NamedTuple

from countbot_cli.config.derived import derived_file
from countbot_cli.config.own_files import SERVERS_FILE as CACHE_FILE
from countbot_cli.config.presets import PRESETS
from countbot_cli.config.providers import ProviderConfig
from countbot_cli.errors import ConfigError
from countbot_cli.provider.context_window_probe import (
    LLAMACPP,
    LOCAL_SERVERS,
    OLLAMA,
    UNKNOWN_TTL,
    ProbeCache,
    probe_client,
    server_kind,
)

Fetch = Callable[[str, str, Any], tuple[Any, str]]  # (method, url, body) -> (JSON, Server header)


class ServerFacts(NamedTuple):
    models: tuple[str, ...]  # ids in the server's model list, sorted
    kind: str | None  # LLAMACPP (llama.cpp's server or llama-cpp-python's), OLLAMA, or None

    @property
    def llamacpp(self) -> bool:
        return self.kind == LLAMACPP


def facts_from(api_base: str, fetch: Fetch) -> ServerFacts | None:
    """The facts `fetch` finds at `api_base`; None when the model list did not answer."""
    base = api_base.rstrip("/")
    data, server = fetch("GET", f"{base}/models", None)
    if data is None:
        return None
    rows = data.get("data") if isinstance(data, dict) else data
    rows = [r for r in rows if isinstance(r, dict)] if isinstance(rows, list) else []
    models = tuple(sorted({str(r["id"]) for r in rows if isinstance(r.get("id"), str)}))
    kind = server_kind(data, server)
    if kind is None:
        root = base[: -len("/v1")] if base.endswith("/v1") else base
        props, server = fetch("GET", f"{root}/props", None)
        if "llama.cpp" in server.lower() or (
            isinstance(props, dict) and isinstance(props.get("default_generation_settings"), dict)
        ):
            kind = LLAMACPP
    return ServerFacts(models, kind)


def probe_facts(api_base: str, headers: Mapping[str, str]) -> ServerFacts | None:
    with probe_client(api_base, headers) as fetch:
        return facts_from(api_base, fetch)


def cache_path(data_dir: Path) -> Path:
    """Where what servers said they are is kept for `data_dir` (the cache folder)."""
    return derived_file(data_dir, CACHE_FILE)


def fit_to_server(
    p: ProviderConfig,
    data_dir: Path,
    probe: Callable[[str, Mapping[str, str]], ServerFacts | None] = probe_facts,
) -> ProviderConfig:
    """`p` with the server's only model when it has none, and llama.cpp's request shape when
    the server is llama.cpp's and no preset says what it is."""
    if p.type != "openai" or not p.api_base:
        return p
    need_model = not p.model
    need_kind = p.preset is None and p.stream_tools
    if not (need_model or need_kind):
        return p
    cache = ProbeCache(cache_path(data_dir))
    row = cache.read_row(p.api_base)
    fresh = row is not None and cache.now() - row["at"] <= UNKNOWN_TTL
    facts: ServerFacts | None = None
    if need_model or not fresh:
        headers = {"Authorization": f"Bearer {p.api_key}"} if p.api_key else {}
        facts = probe(p.api_base, {**headers, **p.headers})
        if facts is not None:
            cache.write_row(p.api_base, {"llamacpp": facts.llamacpp, "kind": facts.kind})
    llamacpp = facts.llamacpp if facts is not None else bool(row and row.get("llamacpp"))
    if need_model:
        p = replace(p, model=_only_model(p, facts))
    if need_kind and llamacpp:
        p = replace(p, stream_tools=PRESETS["llamacpp"].stream_tools)
    return p


def _only_model(p: ProviderConfig, facts: ServerFacts | None) -> str:
    if facts is not None and len(facts.models) == 1:
        return facts.models[0]
    if facts is None:
        why = f"and {p.api_base}/models did not answer"
    elif not facts.models:
        why = f"and the server at {p.api_base} lists no models"
    else:
        shown = ", ".join(facts.models[:8]) + (", …" if len(facts.models) > 8 else "")
        why = f"and the server at {p.api_base} has {len(facts.models)} ({shown})"
    raise ConfigError(
        f"no model chosen for provider '{p.name}' {why}",
        hint="export COUNTBOT_MODEL=NAME or pass -m NAME (`countbot models` lists them)",
    )


def known_kind(p: ProviderConfig, data_dir: Path) -> str | None:
    """What `p`'s server is known to be without asking: its preset (one of LOCAL_SERVERS),
    else what it said about itself earlier (`servers.json`); None for any other server."""
    if p.preset in LOCAL_SERVERS:
        return p.preset
    row = ProbeCache(cache_path(data_dir)).read_row(p.api_base) or {}
    kind = row.get("kind")
    if kind in (LLAMACPP, OLLAMA):
        return str(kind)
    return LLAMACPP if row.get("llamacpp") else None
