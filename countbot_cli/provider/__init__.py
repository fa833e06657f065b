"""Providers: what the engine talks to. `make_provider` picks one from the settings.

The interface is in `base.py`; `openai_compat.py` and `local.py` implement it. Importing this
package is cheap: neither httpx nor llama_cpp is imported until a provider is used (httpx when
it first sends a request, llama_cpp when the local model first answers).
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from countbot_cli.errors import ConfigError
from countbot_cli.provider.base import Provider, ProviderSettings, ProviderStats

if TYPE_CHECKING:
    import httpx

__all__ = ["Provider", "ProviderSettings", "ProviderStats", "make_provider"]


def make_provider(cfg: ProviderSettings, client: httpx.Client | None = None, **kw: Any) -> Provider:
    """The provider for `cfg.type`; `client` and `kw` go to the OpenAI-compatible provider."""
    if cfg.type == "openai":  # the embedded model's runs never load httpx
        # here, not at the top: local_child.py's process imports this package, not this module
        from countbot_cli.provider.openai_compat import OpenAICompatProvider

        return OpenAICompatProvider(cfg, client, **kw)
    if cfg.type == "local":  # a remote provider's ask never loads the local model's modules
        from countbot_cli.provider.local import LocalProvider  # not for a remote ask (start-up)

        return LocalProvider(cfg)
    raise ConfigError(
        f"unknown provider type {cfg.type!r} (expected 'openai' or 'local')",
        key=f"providers.{cfg.name}.type",
    )
