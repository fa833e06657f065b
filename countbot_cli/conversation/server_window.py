"""Which context window a turn is budgeted against, when countbot's table does not know the model
(issue 11 item 7): `--context-window N` and `COUNTBOT_CONTEXT_WINDOW` (config/settings.py) and
the provider's `context_window` win; otherwise an OpenAI-compatible server is asked
(provider/window.py, cached); otherwise countbot assumes `DEFAULT_CONTEXT_WINDOW` and the engine
says so once, when history is first trimmed against it (`assumed_window_notice`)."""

from __future__ import annotations

from dataclasses import replace
from typing import TYPE_CHECKING

from countbot_cli.conversation.model_limits import DEFAULT_CONTEXT_WINDOW, known_window
from countbot_cli.provider.server_facts import fit_to_server
from countbot_cli.provider.window import discover_window

if TYPE_CHECKING:
    from countbot_cli.config.settings import Settings
    from countbot_cli.conversation.session import Session
    from countbot_cli.provider.base import Provider


def with_window(settings: Settings, n: int) -> Settings:
    """The same settings with the provider's context window set to `n` tokens."""
    return replace(settings, provider=replace(settings.provider, context_window=n))


def fitted_to_server(settings: Settings, new: Session | None = None) -> Settings:
    """The settings fitted to what the server says (provider/server_facts.py: its only model
    when none was chosen, llama.cpp's request shape), then an unknown model's window. Asked
    after the input and the session were checked, so a refused question costs no request;
    `new`, a session not saved yet, takes the model found."""
    p = fit_to_server(settings.provider, settings.data_dir)
    if new is not None and not new.model:
        new.model = p.model
    return with_server_window(replace(settings, provider=p))


def with_server_window(settings: Settings) -> Settings:
    """The settings with an unknown model's window as its server reports it (asked at most once
    per base URL and model, then cached); unchanged when a window is set, the model is known,
    or the server cannot tell."""
    p = settings.provider
    if p.type != "openai" or not p.api_base or p.context_window is not None:
        return settings
    if known_window(p.model) is not None:
        return settings
    headers = {"Authorization": f"Bearer {p.api_key}"} if p.api_key else {}
    headers.update(p.headers)
    n = discover_window(p.api_base, p.model, headers, settings.data_dir)
    return settings if n is None else with_window(settings, n)


def assumed_window_notice(settings: Settings, provider: Provider) -> str | None:
    """The one-line notice for a window only assumed; None when the window is known."""
    configured = (
        settings.provider.context_window if provider.model == settings.provider.model else None
    )
    if configured is not None or provider.context_window is not None:
        return None
    if known_window(provider.model) is not None:
        return None
    return (
        f"history was trimmed to fit an assumed {DEFAULT_CONTEXT_WINDOW:,}-token context window: "
        f"countbot does not know {provider.model}'s and its server did not say; set "
        "context_window in the config, COUNTBOT_CONTEXT_WINDOW or --context-window"
    )
