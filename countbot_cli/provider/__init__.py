"""Providers: what the engine talks to. `make_provider` picks one from the settings.

Importing this package is cheap: neither httpx nor llama_cpp is imported until a provider is made
(and httpx only when it first sends a request).
"""

from __future__ import annotations

import importlib
from collections.abc import Iterator, Mapping
from typing import TYPE_CHECKING, Any, Protocol

from countbot_cli.errors import ConfigError

if TYPE_CHECKING:
    import httpx

    from countbot_cli.messages import ChatRequest, Finished, StreamEvent


class ProviderSettings(Protocol):
    """The provider part of the configuration (only the attributes providers read; read-only)."""

    @property
    def name(self) -> str: ...
    @property
    def type(self) -> str: ...  # "openai" | "local"
    @property
    def api_base(self) -> str: ...
    @property
    def api_key(self) -> str | None: ...
    @property
    def model(self) -> str: ...
    @property
    def headers(self) -> Mapping[str, str]: ...
    @property
    def stream_tools(self) -> bool: ...  # False: requests that carry tools go non-streamed
    @property
    def include_usage(self) -> bool: ...  # send stream_options.include_usage
    @property
    def connect_timeout(self) -> float: ...
    @property
    def read_timeout(self) -> float: ...
    @property
    def max_retries(self) -> int: ...
    @property
    def model_path(self) -> str | None: ...  # GGUF file for type "local"
    @property
    def context_window(self) -> int | None: ...  # None: the model table decides
    @property
    def api_key_env(self) -> str | None: ...  # the variable that should hold the key (hints)
    @property
    def extra_body(self) -> Mapping[str, object]: ...  # per-call options (-o) for the body


class ProviderStats(Protocol):
    """Timing of a provider's latest answer (the local model's load time and speed)."""

    def describe(self) -> str:
        """One line for the UI, shown dimmed after the answer."""
        ...


class Provider(Protocol):
    """A chat-completions backend, and what the engine and the views read of it."""

    @property
    def name(self) -> str: ...
    @property
    def model(self) -> str: ...
    @property
    def supports_tools(self) -> bool:
        """Whether the model takes tool definitions (tools are offered only then)."""
        ...

    @property
    def last_stats(self) -> ProviderStats | None:
        """Timing of the latest answer when the provider measures it (the local model)."""
        ...

    @property
    def context_window(self) -> int | None:
        """The window the settings give the current model; None: the model table decides."""
        ...

    def stream(self, req: ChatRequest) -> Iterator[StreamEvent]:
        """Text/reasoning/tool-call deltas as they arrive, then exactly one Finished."""
        ...

    def complete(self, req: ChatRequest) -> Finished:
        """One non-streamed answer."""
        ...

    def list_models(self) -> list[str]: ...

    def close(self) -> None: ...


def make_provider(cfg: ProviderSettings, client: httpx.Client | None = None, **kw: Any) -> Provider:
    """The provider for `cfg.type`; `client` and `kw` go to the OpenAI-compatible provider."""
    if cfg.type == "openai":
        from countbot_cli.provider.openai_compat import OpenAICompatProvider

        return OpenAICompatProvider(cfg, client, **kw)
    if cfg.type == "local":
        local: Any = importlib.import_module("countbot_cli.provider.local")
        provider: Provider = local.LocalProvider(cfg)
        return provider
    raise ConfigError(
        f"unknown provider type {cfg.type!r} (expected 'openai' or 'local')",
        key=f"providers.{cfg.name}.type",
    )
