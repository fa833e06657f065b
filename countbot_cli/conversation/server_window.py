"""Which context window a turn is budgeted against, when countbot's table does not know the
model (issue 11 item 7): `--context-window N` and `COUNTBOT_CONTEXT_WINDOW` (config/settings.py)
and the provider's `context_window` win; otherwise an OpenAI-compatible server is asked
(provider/context_window_probe.py, cached); otherwise countbot assumes
`DEFAULT_CONTEXT_WINDOW` and the engine says so once, when history is first trimmed against it
(`assumed_context_window_notice`).

The question never delays an answer (issue 25 point 5): an answer in the cache is used at once;
otherwise the server is asked in a thread (`LateContextWindow`) beside the first request, which
is budgeted against the assumed one. The budget takes the reported context window at the start
of a later turn (`TokenBudget` and `late_context_window`), and `ask` waits for the thread,
bounded, after the answer (`settle_late_context_windows`) so the next process finds it cached."""

from __future__ import annotations

import threading
from collections.abc import Callable
from dataclasses import replace
from typing import TYPE_CHECKING

from countbot_cli.provider.context_window_probe import (
    PROBE_TIMEOUT,
    cached_context_window,
    discover_context_window,
)
from countbot_cli.provider.model_limits import DEFAULT_CONTEXT_WINDOW, known_context_window
from countbot_cli.provider.server_facts import fit_to_server, known_kind

if TYPE_CHECKING:
    from countbot_cli.config.providers import ProviderConfig
    from countbot_cli.config.settings import Settings
    from countbot_cli.conversation.sessions.session import Session
    from countbot_cli.provider.base import Provider


def with_context_window(settings: Settings, n: int) -> Settings:
    """The same settings with the provider's context window set to `n` tokens."""
    return replace(settings, provider=replace(settings.provider, context_window=n))


def fitted_to_server(settings: Settings, new: Session | None = None) -> Settings:
    """The settings fitted to what the server says (provider/server_facts.py: its only model
    when none was chosen, llama.cpp's request shape), then an unknown model's context window. Asked
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

    def __init__(self, ask: Callable[[], int | None]) -> None:
        self._n: int | None = None
        self._done = threading.Event()
        self._thread = threading.Thread(
            target=self._run, args=(ask,), name="countbot-window", daemon=True
        )
        self._thread.start()

    def _run(self, ask: Callable[[], int | None]) -> None:
        try:
            self._n = ask()
        except Exception:  # best effort, like every probe: the assumed one stays
            self._n = None
        finally:
            self._done.set()

    def value(self) -> int | None:
        """The reported context window once the answer is in; None while asking or when the
        server had none."""
        return self._n if self._done.is_set() else None

    def wait(self, timeout: float) -> bool:
        return self._done.wait(timeout)


_LATE: dict[tuple[str, str], LateContextWindow] = {}  # (base URL, model) -> asked in this process


def late_context_window(p: ProviderConfig) -> LateContextWindow | None:
    """The context window being asked for `p`'s model in this process, if any."""
    return _LATE.get((p.api_base, p.model))


def settle_late_context_windows(timeout: float = SETTLE_TIMEOUT) -> None:
    """Wait at most `timeout` seconds in all for the context windows still being asked (their
    answers are cached by then), then forget them."""
    for late in list(_LATE.values()):
        late.wait(timeout)
    _LATE.clear()


def with_server_context_window(settings: Settings) -> Settings:
    """The settings with an unknown model's context window as its server reported it (the
    cache, or an answer already in); otherwise unchanged, with the server asked beside the
    request (at most once per base URL and model, then cached). Unchanged too when a context
    window is set or the model is known."""
    p = settings.provider
    if p.type != "openai" or not p.api_base or p.context_window is not None:
        return settings
    if known_context_window(p.model) is not None:
        return settings
    found, n = cached_context_window(p.api_base, p.model, settings.data_dir)
    late = late_context_window(p)
    if not found and late is None:
        headers = {"Authorization": f"Bearer {p.api_key}"} if p.api_key else {}
        headers.update(p.headers)
        kind, data_dir = known_kind(p, settings.data_dir), settings.data_dir
        _LATE[(p.api_base, p.model)] = LateContextWindow(
            lambda: discover_context_window(p.api_base, p.model, headers, data_dir, kind=kind)
        )
    elif late is not None:
        n = late.value()
    return settings if n is None else with_context_window(settings, n)


def assumed_context_window_notice(settings: Settings, provider: Provider) -> str | None:
    """The one-line notice for a context window only assumed; None when it is known."""
    configured = (
        settings.provider.context_window if provider.model == settings.provider.model else None
    )
    if configured is not None or provider.context_window is not None:
        return None
    if known_context_window(provider.model) is not None:
        return None
    return (
        f"history was trimmed to fit an assumed {DEFAULT_CONTEXT_WINDOW:,}-token context window: "
        f"countbot does not know {provider.model}'s and its server did not say; set "
        "context_window in the config, COUNTBOT_CONTEXT_WINDOW or --context-window"
    )
