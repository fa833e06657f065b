"""`countbot config init|show|path|check` and `countbot models` (`config trust|untrust`: trust.py).

Each function writes to the stream it is given and returns an exit code; a problem the user must
fix is raised as a CountbotError (the CLI prints it and exits with its code). `config check` and
`models` get the provider from an injected factory, so tests use a fake one.
"""

from __future__ import annotations

import os
import shutil
import stat
import time
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any, Protocol, TextIO

from countbot_cli.config.example import EXAMPLE_CONFIG
from countbot_cli.config.file import did_you_mean
from countbot_cli.config.mcp import McpServer
from countbot_cli.config.providers import NO_PROVIDER_HINT, ProviderConfig
from countbot_cli.config.settings import Settings, default_config_path
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
from countbot_cli.memory.embed import describe as describe_recall
from countbot_cli.messages import ChatRequest
from countbot_cli.textsafe import json_text, sanitize_line
from countbot_cli.ui.terminal import isatty


class CheckedProvider(Protocol):
    def list_models(self) -> list[str]: ...
    def complete(self, req: ChatRequest) -> Any: ...


ProviderFactory = Callable[[ProviderConfig], CheckedProvider]


# ---- config init ----


def config_init(
    path: Path | None, *, force: bool, out: TextIO, env: Mapping[str, str] | None = None
) -> int:
    """Write the starter config (mode 0600). An existing file is kept unless `force`."""
    target = Path(os.path.abspath(os.path.expanduser(path))) if path else default_config_path(env)
    if target.is_dir():
        raise UsageError(f"{target} is a folder", hint="give a file path, e.g. config.yaml")
    backup = None
    if target.exists():
        if not force:
            raise UsageError(
                f"{target} already exists", hint="pass --force to replace it; a .bak copy is kept"
            )
        backup = target.with_name(target.name + ".bak")
        shutil.copy2(target, backup)
    target.parent.mkdir(parents=True, exist_ok=True, mode=0o700)
    _write_private(target, EXAMPLE_CONFIG)
    out.write(f"wrote {target} (mode 0600)\n")
    if backup is not None:
        out.write(f"the previous file is in {backup}\n")
    if path and target not in (Path.cwd() / "config.yaml", default_config_path(env)):
        out.write(f"countbot finds it with --config {target} or COUNTBOT_CONFIG={target}\n")
    elif path and target != default_config_path(env):  # ./config.yaml: a project's file
        out.write(
            "countbot applies ./config.yaml once you trust it: edit it, "
            "then run `countbot config trust`\n"
        )
    out.write(
        "next: export OPENAI_API_KEY=… (or edit the providers section for another service), "
        "then run `countbot config check`\n"
    )
    return EXIT_OK


def _write_private(target: Path, text: str) -> None:
    """Atomic write: a 0600 temporary file beside the target, fsync, rename."""
    tmp = target.with_name(f".{target.name}.{os.getpid()}.tmp")
    fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
    try:
        with os.fdopen(fd, "w", encoding="utf-8") as f:
            f.write(text)
            f.flush()
            os.fsync(f.fileno())
        os.chmod(tmp, 0o600)
        os.replace(tmp, target)
    except BaseException:
        tmp.unlink(missing_ok=True)
        raise


# ---- config show / path ----


def provider_dict(p: ProviderConfig) -> dict[str, Any]:
    d: dict[str, Any] = {"type": p.type, "preset": p.preset}
    if p.type == "local":
        d["model_path"] = p.model_path
    else:
        d["api_base"] = p.api_base
        d["api_key"] = p.masked_api_key
        d["api_key_source"] = p.api_key_source
    d.update(model=p.model or None, context_window=p.context_window)
    if p.headers:
        d["headers"] = p.masked_headers
    if p.type != "local":
        d.update(
            stream_tools=p.stream_tools,
            include_usage=p.include_usage,
            prompt_cache_key=p.prompt_cache_key,
            connect_timeout=p.connect_timeout,
            read_timeout=p.read_timeout,
            max_retries=p.max_retries,
        )
    return d


def settings_dict(s: Settings) -> dict[str, Any]:
    """The effective settings as plain data, with every secret masked."""
    t, m, pe = s.tools, s.memory, s.persona
    return {
        "config_file": str(s.config_file) if s.config_file else None,
        "provider": s.provider.name if s.provider.type != "none" else None,
        "default_provider": s.default_provider,
        "providers": {name: provider_dict(p) for name, p in s.providers.items()},
        "temperature": s.temperature,
        "max_tokens": s.max_tokens,
        "max_iterations": s.max_iterations,
        "persona": {
            "ai_name": pe.ai_name,
            "user_name": pe.user_name,
            "personality": pe.personality,
            "language": pe.language,
            "max_history_messages": pe.max_history_messages,
        },
        "memory": {
            "file": str(m.file),
            "overflow_summary": m.overflow_summary,
            "auto_memory": m.auto_memory,
            "auto_messages": m.auto_messages,
            "auto_chars": m.auto_chars,
            "inject": m.inject,
        },
        "tools": {
            "enabled": t.enabled,
            "approval": t.approval,
            "workspace": str(t.workspace),
            "allow_outside_workspace": t.allow_outside_workspace,
            "search_all_sessions": t.search_all_sessions,
            "shell_timeout": t.shell_timeout,
            "max_output_chars": t.max_output_chars,
            "allow": list(t.allow),
            "deny": list(t.deny),
        },
        "sessions_dir": str(s.sessions_dir),
        "mcp": {"servers": {m.name: mcp_server_dict(m) for m in s.mcp.servers}},
        "fallback": list(s.fallback.names),
    }


def mcp_server_dict(m: McpServer) -> dict[str, Any]:
    """One MCP server as `config show` prints it: `env` and `headers` values masked."""
    if m.url:
        d: dict[str, Any] = {"url": m.url, "headers": m.masked_headers()}
    else:
        d = {"command": m.command, "args": list(m.args), "env": m.masked_env()}
        d["cwd"] = str(m.cwd) if m.cwd else None
    d.update(allow=list(m.allow), timeout=m.timeout, start_timeout=m.start_timeout)
    return d


def config_show(settings: Settings, out: TextIO, env: Mapping[str, str] | None = None) -> int:
    import yaml

    from countbot_cli.cli.trust import trust_rows

    where = settings.config_file or "no config file: defaults and environment"
    out.write(f"# effective configuration ({where}); API keys are masked\n")
    for label, value in trust_rows(settings, os.environ if env is None else env):
        out.write(f"# {label + ':' if label else '':<11} {value}\n")
    out.write(f"# {'recall:':<11} {describe_recall(settings.memory.inject)}\n")
    if settings.provider.type == "none":
        out.write("# no provider is configured: " + NO_PROVIDER_HINT + "\n")
    text = yaml.safe_dump(settings_dict(settings), sort_keys=False, allow_unicode=True)
    out.write(text)
    return EXIT_OK


def config_path(settings: Settings, out: TextIO, env: Mapping[str, str] | None = None) -> int:
    from countbot_cli.cli.trust import trust_rows

    rows = [
        ("config file", str(settings.config_file) if settings.config_file else "(none)"),
        ("home", str(settings.home)),
        ("sessions", str(settings.sessions_dir)),
        ("memory file", str(settings.memory.file)),
        ("data dir", str(settings.data_dir)),
        ("workspace", str(settings.tools.workspace)),
        ("saved approvals", str(settings.tools.saved_file)),
    ]
    if settings.provider.type == "local":
        rows.append(("model file", settings.provider.model_path or "(none)"))
    if settings.config_file is None:
        rows.append(
            (
                "searched",
                "--config, $COUNTBOT_CONFIG, ./config.yaml, " + str(settings.home / "config.yaml"),
            )
        )
    rows += trust_rows(settings, os.environ if env is None else env)
    width = max(len(label) for label, _ in rows)
    for label, value in rows:
        out.write(f"{label.ljust(width)}  {value}\n")
    return EXIT_OK


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


# ---- models ----


def models(
    settings: Settings, provider_factory: ProviderFactory, out: TextIO, json_out: bool = False
) -> int:
    """`GET {api_base}/models`: one id a line (the current one marked on a terminal), or JSON."""
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
        out.write(json_text(data) + "\n")
        return EXIT_OK
    tty = isatty(out)
    for model_id in ids:  # ids come from the server: no escape sequence reaches the terminal
        mark = ("* " if model_id == cfg.model else "  ") if tty else ""
        out.write(f"{mark}{sanitize_line(model_id)}\n")
    return EXIT_OK


def allow_list(out: TextIO, env: Mapping[str, str] | None = None) -> int:
    """`config allow list`: the rules saved with `A`, one a line, and the file holding them."""
    from countbot_cli.config import saved_allow
    from countbot_cli.config.settings import default_home
    from countbot_cli.textsafe import visible

    path = saved_allow.allow_file(default_home(os.environ if env is None else env))
    rules = saved_allow.load(path).rules()
    if not rules:
        out.write(f"no saved approvals ({path} has none)\n")
        return 0
    out.write(f"saved approvals in {path}:\n")
    for kind, text in rules:
        out.write(f"  {kind:<8} {visible(text)}\n")
    return 0


def allow_remove(rule: str, out: TextIO, env: Mapping[str, str] | None = None) -> int:
    """`config allow remove RULE`: forget one saved command or tool (the exact text listed)."""
    from countbot_cli.config import saved_allow
    from countbot_cli.config.settings import default_home

    path = saved_allow.allow_file(default_home(os.environ if env is None else env))
    kind = saved_allow.remove(path, rule)
    if kind is None:
        raise UsageError(
            f"no saved approval {sanitize_line(rule)!r} in {path} (see `countbot config allow list`)"
        )
    out.write(f"removed the saved {kind} rule {sanitize_line(rule)!r} from {path}\n")
    return 0
