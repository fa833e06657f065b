"""The bodies of `countbot config check` and `countbot models`: the provider really called.

`config check` validates the settings, lists the models and asks for a one-token completion,
each step a line (`ok`, `warn`, `FAIL`) with what to do about a failure (`diagnose`); `models`
lists the server's model ids. The provider comes from an injected factory, so tests use a fake
one; a check answers quickly (`quick`: no retries, a silent server reported after 20 s).
"""

from __future__ import annotations

import stat
import time
from collections.abc import Callable
from dataclasses import replace
from pathlib import Path
from typing import Any, Protocol, TextIO

from countbot_cli.app import make_provider
from countbot_cli.config.file import did_you_mean
from countbot_cli.config.local_models import models_dir
from countbot_cli.config.providers import NO_PROVIDER_HINT, ProviderConfig
from countbot_cli.config.settings import Settings
from countbot_cli.conversation.server_window import (
    ASSUMED_SOURCE,
    context_window_of,
    raise_hint,
    server_context_window_now,
    user_set,
    with_server_context_window,
)
from countbot_cli.errors import (
    EXIT_ERROR,
    EXIT_OK,
    EXIT_USAGE,
    AuthError,
    ConnectError,
    ContextLengthError,
    CountbotError,
    ModelNotFoundError,
    QuotaExceededError,
    RateLimitError,
    ReadTimeoutError,
    ServerError,
    UsageError,
)
from countbot_cli.messages import ChatRequest
from countbot_cli.textsafe import json_text, sanitize_line
from countbot_cli.ui.terminal import isatty


class CheckedProvider(Protocol):
    def list_models(self) -> list[str]: ...
    def complete(self, req: ChatRequest) -> Any: ...


ProviderFactory = Callable[[ProviderConfig], CheckedProvider]


def check_command(settings: Settings, out: TextIO) -> int:
    """`countbot config check`: `config_check` on the configured provider, `quick`."""
    fast = quick(settings)
    return config_check(fast, lambda _cfg: make_provider(fast), out)


def models_command(settings: Settings, out: TextIO, *, json_out: bool) -> int:
    """`countbot models`: `models` on the configured provider, with the pulled models."""

    def factory(_cfg: ProviderConfig) -> CheckedProvider:
        return make_provider(settings)

    return models(settings, factory, out, json_out=json_out, folder=models_dir())


def quick(settings: Settings) -> Settings:
    """The settings `config check` calls the provider with: no retries, and a server that
    says nothing is reported after 20 s."""
    p = settings.provider
    return replace(
        settings, provider=replace(p, max_retries=0, read_timeout=min(p.read_timeout, 20.0))
    )


# ---- diagnoses ----


def diagnose(err: BaseException, cfg: ProviderConfig, available: list[str] | None = None) -> str:
    """What to do about a provider failure, in one line."""
    where = f"providers.{cfg.name}"
    if isinstance(err, ConnectError):
        start = f"{cfg.start_hint}, " if cfg.start_hint else ""
        return f"is the server running at {cfg.api_base}? {start}or fix {where}.api_base"
    if isinstance(err, ReadTimeoutError):
        return (
            f"no answer within {cfg.read_timeout:g} s: the server may be busy or still "
            f"loading the model (raise {where}.read_timeout)"
        )
    if isinstance(err, AuthError):
        return _auth_hint(err, cfg)
    if isinstance(err, ModelNotFoundError):
        return _model_hint(cfg, available)
    if isinstance(err, QuotaExceededError):
        return "the account has no quota or balance left: top it up with the provider"
    if isinstance(err, RateLimitError):
        return "rate limited: wait a little and try again"
    if isinstance(err, ContextLengthError):
        return f"the request is too long for {cfg.model}: set {where}.context_window lower"
    if isinstance(err, ServerError):
        return "the server failed: try again later, or look at the server's log"
    if isinstance(err, CountbotError):
        return err.hint or "see the message above"
    return "unexpected error: set COUNTBOT_DEBUG=1 and please report it"


def _auth_hint(err: AuthError, cfg: ProviderConfig) -> str:
    var = cfg.api_key_env or "COUNTBOT_API_KEY"
    if getattr(err, "status", None) == 403:
        return f"the key ({cfg.api_key_source}) lacks permission for {cfg.model} or this region"
    if cfg.api_key is None:
        return (
            f"no API key was sent: export {var}=… (or set api_key_env under providers.{cfg.name})"
        )
    if cfg.api_key_source == "config file":
        return f"the API key was rejected: fix providers.{cfg.name}.api_key"
    if cfg.api_key_source == "command":
        return f"the key printed by providers.{cfg.name}.api_key_cmd was rejected"
    source_var = cfg.api_key_source.removeprefix("env ")
    return f"the API key from {cfg.api_key_source} was rejected: set {source_var} to a valid key"


def _model_hint(cfg: ProviderConfig, available: list[str] | None) -> str:
    fix = f"set providers.{cfg.name}.model or pass -m NAME"
    if not available:
        return f"model '{cfg.model}' is unknown to the server; {fix}"
    close = did_you_mean(cfg.model, available)
    listed = ", ".join(available[:20]) + (", …" if len(available) > 20 else "")
    return f"{close + ' ' if close else ''}available: {listed}; {fix}"


def _ids(result: Any) -> list[str]:
    """Model ids from list_models(): strings, or objects/dicts carrying `id`."""
    ids: list[str] = []
    for item in result or []:
        value = item if isinstance(item, str) else getattr(item, "id", None)
        if value is None and isinstance(item, dict):
            value = item.get("id")
        if value:
            ids.append(str(value))
    return ids


def _exit_code(err: BaseException) -> int:
    return err.exit_code if isinstance(err, CountbotError) else EXIT_ERROR


# ---- config check ----


class _Report:
    def __init__(self, out: TextIO) -> None:
        self.out = out
        self.code = EXIT_OK

    def line(self, status: str, step: str, text: str, hint: str | None = None) -> None:
        """One result; `text` and `hint` may carry the server's words (errors, model ids)."""
        self.out.write(f"{status:<4}  {step:<9} {sanitize_line(text)}\n")
        if hint:
            self.out.write(f"{'':<4}  {'':<9} → {sanitize_line(hint)}\n")

    def fail(self, step: str, err: BaseException, hint: str) -> int:
        message = err.message if isinstance(err, CountbotError) else f"{type(err).__name__}: {err}"
        self.line("FAIL", step, message, hint)
        self.code = _exit_code(err)
        return self.code


def config_check(settings: Settings, provider_factory: ProviderFactory, out: TextIO) -> int:
    """Validate, then really call the provider: list models and a one-token completion."""
    report = _Report(out)
    cfg = settings.provider
    report.line("ok", "config", str(settings.config_file or "no file (defaults + environment)"))
    if cfg.type == "none":
        report.line("FAIL", "provider", "no provider is configured", NO_PROVIDER_HINT)
        return EXIT_USAGE
    report.line("ok", "provider", _describe(cfg))
    _warn_file_mode(settings, report)
    try:
        provider = provider_factory(cfg)
    except Exception as e:  # a broken provider must still get a diagnosis
        return report.fail("provider", e, diagnose(e, cfg))
    available = _check_models(provider, cfg, report)
    if available is None:
        return report.code
    if not cfg.model:
        hint = f"set providers.{cfg.name}.model, export COUNTBOT_MODEL=NAME or pass -m NAME"
        listed = ", ".join(available[:20]) or "(the server lists none)"
        report.line("FAIL", "model", f"no model chosen; available: {listed}", hint)
        return EXIT_USAGE
    _check_reply(provider, cfg, available, report)
    _check_context_window(settings, report)
    if report.code == EXIT_OK:
        out.write("all checks passed\n")
    return report.code


def _describe(cfg: ProviderConfig) -> str:
    if cfg.type == "local":
        return f"{cfg.name} (embedded) {cfg.model_path} · model {cfg.model}"
    key = f"{cfg.masked_api_key} from {cfg.api_key_source}" if cfg.api_key else "no key"
    model = cfg.model or "(not chosen)"
    return f"{cfg.name} {cfg.api_base} · model {model} · {key}"


def _warn_file_mode(settings: Settings, report: _Report) -> None:
    file = settings.config_file
    literal = any(p.api_key_source == "config file" for p in settings.providers.values())
    if file is None or not literal:
        return
    try:
        mode = file.stat().st_mode
    except OSError:
        return
    if mode & (stat.S_IRWXG | stat.S_IRWXO):
        report.line(
            "warn",
            "config",
            "the file holds an API key and others can read it",
            f"chmod 600 {file}, or use api_key_env / api_key_cmd",
        )


def _check_models(
    provider: CheckedProvider, cfg: ProviderConfig, report: _Report
) -> list[str] | None:
    """The model list ([] when the server has no list), or None after a fatal failure."""
    try:
        available = _ids(provider.list_models())
    except (ModelNotFoundError, ServerError) as e:  # some servers have no /models: go on
        report.line("warn", "models", f"could not list models: {e.message}")
        return []
    except Exception as e:
        report.fail("models", e, diagnose(e, cfg))
        return None
    if cfg.model and available and cfg.model not in available:
        close = did_you_mean(cfg.model, available)
        report.line(
            "warn",
            "models",
            f"{len(available)} available, but not '{cfg.model}'",
            close or "available: " + ", ".join(available[:20]),
        )
    else:
        report.line("ok", "models", f"{len(available)} available")
    return available


def _check_reply(
    provider: CheckedProvider, cfg: ProviderConfig, available: list[str], report: _Report
) -> None:
    req = ChatRequest(
        model=cfg.model,
        messages=[{"role": "user", "content": "Say OK."}],
        max_tokens=1,
        stream=False,
    )
    started = time.monotonic()
    try:
        provider.complete(req)
    except Exception as e:
        report.fail("reply", e, diagnose(e, cfg, available))
        return
    report.line("ok", "reply", f"{cfg.model} answered in {time.monotonic() - started:.2f} s")


def _check_context_window(settings: Settings, report: _Report) -> None:
    """The window a turn is budgeted against, where that figure comes from, and whether the
    server runs a smaller one (asked after the reply, which has loaded the model)."""
    cfg = settings.provider
    if cfg.type != "openai" or not cfg.model:
        return
    used = context_window_of(with_server_context_window(settings).provider, cfg.model)
    server = server_context_window_now(settings)
    if user_set(cfg) and server is not None and server.n < used.n:
        report.line(
            "warn",
            "window",
            f"{used.n:,} tokens ({used.source}), but the server runs {server.n:,} "
            f"({server.source}): longer prompts are cut or refused",
            raise_hint(cfg, settings),
        )
        return
    if server is not None and not user_set(cfg):
        used = server
    unsure = not used.loaded or used.source == ASSUMED_SOURCE
    hint = raise_hint(cfg, settings) if unsure else None
    report.line("ok", "window", f"{used.n:,} tokens ({used.source})", hint)


# ---- models ----


def models(
    settings: Settings,
    provider_factory: ProviderFactory,
    out: TextIO,
    json_out: bool = False,
    folder: Path | None = None,
) -> int:
    """`GET {api_base}/models`: one id a line (the current one marked on a terminal), or JSON;
    then, with the models `folder`, what is pulled there (and on a terminal the catalogue)."""
    from countbot_cli.commands.models import pulled_json, pulled_rows  # `models` only

    cfg = settings.provider
    if cfg.type == "none":
        raise UsageError("no provider is configured", hint=NO_PROVIDER_HINT)
    try:
        ids = _ids(provider_factory(cfg).list_models())
    except CountbotError as e:
        e.hint = diagnose(e, cfg)
        raise
    if json_out:
        data = {"provider": cfg.name, "api_base": cfg.api_base, "model": cfg.model, "models": ids}
        out.write(json_text({**data, **(pulled_json(folder) if folder else {})}) + "\n")
        return EXIT_OK
    tty = isatty(out)
    for model_id in ids:  # ids come from the server: no escape sequence reaches the terminal
        mark = ("* " if model_id == cfg.model else "  ") if tty else ""
        out.write(f"{mark}{sanitize_line(model_id)}\n")
    for row in pulled_rows(folder, everything=tty) if folder else []:
        out.write(row + "\n")
    return EXIT_OK
