"""What a provider is: the `Provider` interface the engine and the views read, and the
`ProviderSettings` it is built from. No implementation and no third-party import here.
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from typing import TYPE_CHECKING, Protocol

if TYPE_CHECKING:
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
    @property
    def prompt_cache_key(self) -> bool: ...  # send ChatRequest.cache_key as prompt_cache_key


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
        """The context window the settings give the current model; None: the model table
        decides."""
        ...

    def stream(self, req: ChatRequest) -> Iterator[StreamEvent]:
        """Text/reasoning/tool-call deltas as they arrive, then exactly one Finished."""
        ...

    def complete(self, req: ChatRequest) -> Finished:
        """One non-streamed answer."""
        ...

    def list_models(self) -> list[str]: ...

    def close(self) -> None: ...
