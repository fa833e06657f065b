"""Which context window a turn is budgeted against, and where that figure comes from.

In order: `--context-window`, `COUNTBOT_CONTEXT_WINDOW` or the provider's `context_window`;
for a server that loads models (Ollama, LM Studio) the window it runs the model with, asked
before the first request (a local GET) and again after a request while the model was not
loaded; a preset's own figure; for a hosted model countbot's table; otherwise the server is
asked (cached) in a thread beside the first request, which is budgeted against the assumed
`DEFAULT_CONTEXT_WINDOW`. A local server's window is never taken from the table: the table
holds models' maximums, and such a server runs what it was started or loaded with. The
invariant: every figure carries its source (`ContextWindow`), which /context, `config check` and the
one notice when history is first trimmed say, with how to raise it."""

from __future__ import annotations

import threading
from collections.abc import Callable
from dataclasses import replace
from typing import TYPE_CHECKING

from countbot_cli.config.presets import CONFIG_CONTEXT_WINDOW_SOURCE
from countbot_cli.config.settings import CONTEXT_WINDOW_VAR
from countbot_cli.provider.context_window_probe import (
    LMSTUDIO,
    LOAD_STATE,
    LOCAL_SERVERS,
    OLLAMA,
    PROBE_TIMEOUT,
    ContextWindow,
    cached_context_window,
    discover_context_window,
    probe_context_window,
)
from countbot_cli.provider.model_limits import DEFAULT_CONTEXT_WINDOW, known_context_window
from countbot_cli.provider.server_facts import fit_to_server, known_kind

if TYPE_CHECKING:
    from countbot_cli.config.providers import ProviderConfig
    from countbot_cli.config.settings import Settings
    from countbot_cli.conversation.sessions.session import Session
    from countbot_cli.provider.base import Provider

FLAG_SOURCE = "--context-window"
USER_SOURCES = (CONFIG_CONTEXT_WINDOW_SOURCE, CONTEXT_WINDOW_VAR, FLAG_SOURCE)
TABLE_SOURCE = "countbot's table of known models"
ASSUMED_SOURCE = "assumed: the server did not say"
RAISE = {
    OLLAMA: "start Ollama with OLLAMA_CONTEXT_LENGTH=N, or set PARAMETER num_ctx N in a "
    "Modelfile (countbot's context_window only says what the server runs)",
    LMSTUDIO: "load the model with a larger context length in LM Studio "
    "(`lms load MODEL --context-length N`)",
}
SET_IT = "set context_window in the config, COUNTBOT_CONTEXT_WINDOW or --context-window"


def with_context_window(settings: Settings, n: int, source: str = FLAG_SOURCE) -> Settings:
    """The same settings with the provider's context window set to `n` tokens from `source`."""
    p = replace(settings.provider, context_window=n, context_window_source=source)
    return replace(settings, provider=p)


def fitted_to_server(settings: Settings, new: Session | None = None) -> Settings:
    """The settings fitted to what the server says (provider/server_facts.py: its only model
    when none was chosen, llama.cpp's request shape), then the model's context window. Asked
    after the input and the session were checked, so a refused question costs no request;
    `new`, a session not saved yet, takes the model found."""
    p = fit_to_server(settings.provider, settings.data_dir)
    if new is not None and not new.model:
        new.model = p.model
    return with_server_context_window(replace(settings, provider=p))


SETTLE_TIMEOUT = 2 * PROBE_TIMEOUT + 1.0  # the model list, then the kind's own place


class LateContextWindow:
    """A server's answer about a context window, asked in a daemon thread; `value()` never
    waits."""

    def __init__(self, ask: Callable[[], ContextWindow | None]) -> None:
        self._w: ContextWindow | None = None
        self._done = threading.Event()
        self._thread = threading.Thread(
            target=self._run, args=(ask,), name="countbot-window", daemon=True
        )
        self._thread.start()

    def _run(self, ask: Callable[[], ContextWindow | None]) -> None:
        try:
            self._w = ask()
        except Exception:  # best effort, like every probe: the assumed one stays
            self._w = None
        finally:
            self._done.set()

    def value(self) -> ContextWindow | None:
        """The reported window once the answer is in; None while asking or when the server
        had none."""
        return self._w if self._done.is_set() else None

    def wait(self, timeout: float) -> bool:
        return self._done.wait(timeout)

    def after_request(self) -> None:
        """Nothing: this answer does not depend on whether the model is loaded."""


class LoadedContextWindow:
    """The window of a server that loads models, asked again in a daemon thread after each
    request (the model is loaded by then) until the server reports it loaded."""

    def __init__(self, ask: Callable[[], ContextWindow | None]) -> None:
        self._ask = ask
        self._late: LateContextWindow | None = None
        self._found: ContextWindow | None = None

    def after_request(self) -> None:
        if self._found is None and (self._late is None or self._late.value() is not None):
            self._late = LateContextWindow(self._ask)

    def value(self) -> ContextWindow | None:
        """The window the server loaded the model with, once it has said so; None before."""
        w = self._late.value() if self._late is not None else None
        if self._found is None and w is not None and w.loaded:
            self._found = w
        return self._found

    def wait(self, timeout: float) -> bool:
        return self._late.wait(timeout) if self._late is not None else True


Late = LateContextWindow | LoadedContextWindow
_LATE: dict[tuple[str, str], Late] = {}  # (base URL, model) -> asked in this process


def late_context_window(p: ProviderConfig) -> Late | None:
    """The context window being asked for `p`'s model in this process, if any."""
    return _LATE.get((p.api_base, p.model))


def settle_late_context_windows(timeout: float = SETTLE_TIMEOUT) -> None:
    """Wait at most `timeout` seconds in all for the context windows still being asked (their
    answers are cached by then), then forget them."""
    for late in list(_LATE.values()):
        if isinstance(late, LateContextWindow):
            late.wait(timeout)
    _LATE.clear()


def user_set(p: ProviderConfig) -> bool:
    """The window was given by the user (config, variable or flag), not by a preset or a
    server."""
    return p.context_window is not None and p.context_window_source in USER_SOURCES


def _headers(p: ProviderConfig) -> dict[str, str]:
    headers = {"Authorization": f"Bearer {p.api_key}"} if p.api_key else {}
    headers.update(p.headers)
    return headers


def server_context_window_now(settings: Settings) -> ContextWindow | None:
    """What the server says now about the window it runs the model with (no cache): for
    `config check`. None for the embedded model, or a server that cannot tell."""
    p = settings.provider
    if p.type != "openai" or not p.api_base or not p.model:
        return None
    kind = known_kind(p, settings.data_dir)
    return probe_context_window(p.api_base, p.model, _headers(p), kind=kind)


def with_server_context_window(settings: Settings) -> Settings:
    """The settings with the window the server runs the model with (see the module);
    unchanged when the user set one, or for a hosted model the preset or table knows."""
    p = settings.provider
    if p.type != "openai" or not p.api_base or user_set(p):
        return settings
    headers = _headers(p)
    kind, data_dir = known_kind(p, settings.data_dir), settings.data_dir
    if kind in LOAD_STATE:
        late = _LATE.get((p.api_base, p.model))
        w = late.value() if late is not None else None
        if w is None:
            w = probe_context_window(p.api_base, p.model, headers, kind=kind)
            assert w is not None  # a load-state server's answer always has a figure
            if not w.loaded:
                _LATE[(p.api_base, p.model)] = LoadedContextWindow(
                    lambda: probe_context_window(p.api_base, p.model, headers, kind=kind)
                )
        return with_context_window(settings, w.n, w.source)
    if p.context_window is not None:  # a preset's own figure for its default model
        return settings
    if kind not in LOCAL_SERVERS and known_context_window(p.model) is not None:
        return settings
    found, w = cached_context_window(p.api_base, p.model, data_dir)
    late = late_context_window(p)
    if not found and late is None:
        _LATE[(p.api_base, p.model)] = LateContextWindow(
            lambda: discover_context_window(p.api_base, p.model, headers, data_dir, kind=kind)
        )
    elif late is not None:
        w = late.value()
    return settings if w is None else with_context_window(settings, w.n, w.source)


def context_window_of(p: ProviderConfig, model: str) -> ContextWindow:
    """The window a request to `model` on `p` is budgeted against, and where it comes from."""
    if p.context_window is not None and p.context_window > 0 and model == p.model:
        return ContextWindow(
            p.context_window, p.context_window_source or CONFIG_CONTEXT_WINDOW_SOURCE
        )
    known = known_context_window(model)
    if known is not None:
        return ContextWindow(known, TABLE_SOURCE)
    return ContextWindow(DEFAULT_CONTEXT_WINDOW, ASSUMED_SOURCE)


def raise_hint(p: ProviderConfig, settings: Settings | None = None) -> str:
    """How to raise the window of `p`'s server (or tell countbot what it is)."""
    kind = p.preset if p.preset in RAISE else None
    if kind is None and settings is not None:
        kind = known_kind(p, settings.data_dir)
    return RAISE.get(kind or "", SET_IT)


def context_window_notice(settings: Settings, provider: Provider) -> str | None:
    """The one-line notice for when history is first trimmed: for a window only assumed, or
    the one a server that loads models runs (a figure the user may want to raise); None for a
    figure the user set, a preset's, or one countbot's table knows."""
    p = settings.provider
    same = provider.model == p.model
    kind = known_kind(p, settings.data_dir) if p.type == "openai" and p.api_base else None
    if same and kind in LOAD_STATE and not user_set(p) and p.context_window is not None:
        return (
            f"history was trimmed to fit the {p.context_window:,}-token window: "
            f"{p.context_window_source}; to raise it, {raise_hint(p, settings)}"
        )
    configured = p.context_window if same else None
    if configured is not None or provider.context_window is not None:
        return None
    if known_context_window(provider.model) is not None:
        return None
    return (
        f"history was trimmed to fit an assumed {DEFAULT_CONTEXT_WINDOW:,}-token context window: "
        f"countbot does not know {provider.model}'s and its server did not say; {SET_IT}"
    )


def over_context_window_text(settings: Settings) -> Callable[[int, int], tuple[str, str]] | None:
    """For a server that cuts a prompt over its window silently (Ollama: the system prompt
    and the oldest text go first, with no error), the error a turn gets whose own message is
    over the window; None for other servers, which refuse such a request themselves."""
    p = settings.provider
    if p.type != "openai" or not p.api_base or known_kind(p, settings.data_dir) != OLLAMA:
        return None

    def text(tokens: int, window: int) -> tuple[str, str]:
        source = p.context_window_source or "context_window"
        return (
            f"the message is about {tokens:,} tokens, over the {window:,}-token window "
            f"({source}); Ollama would cut it silently, so it was not sent",
            f"to raise the window, {raise_hint(p, settings)}",
        )

    return text
