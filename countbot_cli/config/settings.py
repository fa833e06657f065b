"""Settings: defaults <- YAML file <- environment <- flags, frozen, with every path resolved.

Lookup of the file (SPEC §3): `--config PATH`, `$COUNTBOT_CONFIG`, `./config.yaml`,
`$XDG_CONFIG_HOME/countbot/config.yaml`. A `./config.yaml` found by that lookup is applied only
when the user has trusted these exact bytes (`countbot config trust`, see `trust`); otherwise
the user's own file is used and the Settings name the ignored one. Relative paths in a file resolve against its folder;
with no file the home folder is `$XDG_CONFIG_HOME/countbot`. Every path countbot touches comes
from here, and `load_settings(env=..., cwd=...)` is the one override tests need: nothing reads
`os.environ` or the real home folder when both are given (with `HOME` in `env`).

Provider choice and API keys are in `providers.py`; file reading in `file.py`; where the
files are (countbot's folder, the lookup) in `home.py`; the preset table in `presets`.
"""

from __future__ import annotations

import os
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field, replace
from pathlib import Path
from types import MappingProxyType
from typing import Any, Literal, NamedTuple, get_args

from countbot_cli import keyguard
from countbot_cli.config import own_files, saved_allow, trust
from countbot_cli.config.attach import AttachSettings, parse_attach
from countbot_cli.config.chat import ChatSettings, parse_chat
from countbot_cli.config.fallback import Chain, parse_fallback
from countbot_cli.config.file import (
    Section,
    load_yaml,
    read_config,
    top_level_keys,
)
from countbot_cli.config.home import default_home, find_config_file, found_in_cwd, user_config_file
from countbot_cli.config.mcp import McpSettings, parse_mcp
from countbot_cli.config.presets import local_model_available as local_model_available
from countbot_cli.config.prices import Price, parse_prices
from countbot_cli.config.provider_entry import PROVIDER_KEYS as PROVIDER_KEYS
from countbot_cli.config.providers import ProviderConfig, resolve_providers
from countbot_cli.config.providers import mask_header as mask_header
from countbot_cli.config.providers import mask_secret as mask_secret
from countbot_cli.errors import ConfigError

TOP_KEYS = (
    "default_provider",
    "providers",
    "temperature",
    "max_tokens",
    "max_iterations",
    "persona",
    "memory",
    "tools",
    "sessions_dir",
    "attachments",
    "mcp",
    "prices",
    "fallback",
    "chat",
)
CONTEXT_WINDOW_VAR = "COUNTBOT_CONTEXT_WINDOW"
PERSONA_KEYS = ("ai_name", "user_name", "personality", "language", "max_history_messages")
MEMORY_KEYS = (
    "file",
    "overflow_summary",
    "session_summary",
    "auto_memory",
    "auto_messages",
    "auto_chars",
    "inject",
    "recall_lines",
    "recall_tokens",
    "recall_wait",
    "recall_keep",
)
TOOL_KEYS = (
    "enabled",
    "approval",
    "workspace",
    "allow_outside_workspace",
    "search_all_sessions",
    "shell_timeout",
    "max_output_chars",
    "allow",
    "deny",
)
InjectMode = Literal["relevant", "recent", "off"]  # which memory lines go with a question
ApprovalMode = Literal["ask", "auto", "off"]  # how tool calls that change things are approved
INJECT_MODES: tuple[InjectMode, ...] = get_args(InjectMode)
APPROVAL_MODES: tuple[ApprovalMode, ...] = get_args(ApprovalMode)


class Persona(NamedTuple):
    ai_name: str = "countbot"
    user_name: str = "user"
    personality: str = ""  # empty: the default personality of the system prompt
    language: str = "en"
    max_history_messages: int = 50  # 0 = unlimited


class MemorySettings(NamedTuple):
    file: Path
    overflow_summary: bool = True
    session_summary: bool = True  # the rolling summary of what left the window (memory/rolling.py)
    auto_memory: bool = True
    auto_messages: int = 30
    auto_chars: int = 15000
    inject: InjectMode = "relevant"
    recall_lines: int = 20  # at most this many lines go with a message (memory/recall.py) ...
    recall_tokens: int = 1000  # ... within this many tokens
    # seconds a turn waits for recall by meaning (the encoders, lines not yet embedded): the
    # rest is recalled by its words while it is embedded in the background
    recall_wait: float = 1.0
    # seconds the recall encoders stay loaded after countbot ends, for the next `ask` (as
    # Ollama keeps a model loaded): a warm `ask` then does not load them (memory/encoder_linger.py)
    recall_keep: float = 300.0
    off: bool = False  # `ask --no-memory`: no pinned lines, no memory tool (not a config key)


class ToolSettings(NamedTuple):
    workspace: Path
    enabled: bool = True
    approval: ApprovalMode = "ask"
    allow_outside_workspace: bool = False
    search_all_sessions: bool = False  # search_sessions reads every project's sessions unasked
    shell_timeout: float = 60.0
    max_output_chars: int = 10000
    allow: tuple[str, ...] = ()
    deny: tuple[str, ...] = ()
    # saved with `A` at a prompt, in the user's own folder (config/saved_allow.py)
    saved_commands: tuple[str, ...] = ()  # exact exec commands
    saved_tools: tuple[str, ...] = ()
    saved_file: Path | None = None  # where they live: one of countbot's own files


@dataclass(frozen=True)
class Settings:
    config_file: Path | None
    home: Path  # the folder relative paths resolve against
    sessions_dir: Path
    data_dir: Path  # input history and other small state
    provider: ProviderConfig
    providers: Mapping[str, ProviderConfig]
    default_provider: str
    temperature: float | None
    max_tokens: int | None
    max_iterations: int
    system: str | None
    persona: Persona
    memory: MemorySettings
    tools: ToolSettings
    ignored_config: Path | None = None  # a ./config.yaml left out: not trusted (yet)
    ignored_why: str = ""  # "untrusted" | "changed" (trusted once, edited since)
    trust_store: Path | None = None  # the list of trusted project files (trust.store_path)
    user_config: Path | None = None  # the user's own config.yaml, also when a project's is used
    attach: AttachSettings = AttachSettings()  # limits of -a/--attach (config.attachments)
    mcp: McpSettings = field(default_factory=McpSettings)  # MCP servers (config.mcp)
    # model -> its prices (config.prices); empty: no cost is shown
    prices: Mapping[str, Price] = field(default_factory=lambda: MappingProxyType({}))
    fallback: Chain = Chain()  # providers a failed turn moves on to (config/fallback.py)
    chat: ChatSettings = ChatSettings()  # the chat's prompt: vi mode, Enter, notify (config.chat)

    @property
    def own_files(self) -> own_files.OwnFiles:
        """Every file countbot keeps for itself (config/own_files.py): the tools always ask."""
        return own_files.collect(
            config_file=self.config_file,
            sessions_dir=self.sessions_dir,
            memory_file=self.memory.file,
            data_dir=self.data_dir,
            others=(self.trust_store, self.tools.saved_file, self.user_config),
        )


# ---- which file applies ----


def is_countbot_file(data: bytes) -> bool:
    """False for another program's config.yaml: a non-empty mapping without a countbot key.
    Text that is not even a YAML mapping counts as countbot's (it may be a broken one)."""
    try:
        keys = top_level_keys(data.decode("utf-8"))
    except UnicodeDecodeError:
        return True
    return not keys or any(key in TOP_KEYS for key in keys)


def _project_file(file: Path, env: Mapping[str, str]) -> tuple[Section | None, str]:
    """A ./config.yaml found by lookup: (its root when trusted, else None; why it is left
    out: "untrusted", "changed", or "" for another program's file, left out silently)."""
    try:
        data = read_config(file)
    except ConfigError:
        return None, "untrusted"  # unreadable or too big: it cannot have been trusted
    verdict = trust.status(file, data, default_home(env))
    if verdict == "trusted":
        return load_yaml(file, data), ""
    return None, verdict if is_countbot_file(data) else ""


_NOTIFIED: set[Path] = set()


def untrusted_notice(settings: Settings) -> str | None:
    """The one-line notice about an ignored ./config.yaml: once per file and process."""
    file = settings.ignored_config
    if file is None or file in _NOTIFIED:
        return None
    _NOTIFIED.add(file)
    if settings.ignored_why == "changed":
        return (
            "ignored ./config.yaml: it changed since you trusted it; "
            "review it, then run: countbot config trust"
        )
    return (
        "ignored ./config.yaml: a project's config is not applied until you trust it (it could "
        "redirect your prompts and keys or run commands); to use it, run: countbot config trust"
    )


# ---- loading ----


def load_settings(
    *,
    config_path: str | Path | None = None,
    env: Mapping[str, str] | None = None,
    cwd: Path | None = None,
    provider: str | None = None,
    model: str | None = None,
    system: str | None = None,
    require_provider: bool = True,
    require_model: bool = True,
    find_local_model: Callable[[], str | None] = local_model_available,
) -> Settings:
    """Build the effective settings. Raises ConfigError (exit 2) naming file, line and key.

    `require_provider=False` (for `config show|path`, `sessions`, `memory`) never runs
    `api_key_cmd` and tolerates a missing key, model or provider (then a type "none"
    placeholder). `require_model=False` (for `models`, `config check`) tolerates a missing model.
    `COUNTBOT_NO_LOCAL_MODEL=1` in `env` turns off the fallback to the embedded model.
    An untrusted ./config.yaml is not read beyond its top-level keys: the result names it in
    `ignored_config` (see `untrusted_notice`).
    """
    env = os.environ if env is None else env
    cwd = Path(os.path.abspath(Path.cwd() if cwd is None else cwd))
    if env.get("COUNTBOT_NO_LOCAL_MODEL", "").strip() not in ("", "0"):
        find_local_model = _no_local_model
    file = find_config_file(config_path, env, cwd)
    ignored, why = None, ""
    root: Section | None = None
    if file is not None and found_in_cwd(file, config_path, env, cwd):
        root, why = _project_file(file, env)
        if root is None:
            ignored = file if why else None
            file = user_config_file(env)
    if root is None:
        root = load_yaml(file) if file else Section.empty()
    settings = _build(
        root,
        file,
        env,
        cwd,
        provider=provider,
        model=model,
        system=system,
        require_provider=require_provider,
        require_model=require_model,
        find_local_model=find_local_model,
    )
    if env is os.environ:  # the keys read from it are passed on to no child
        keyguard.forget(os.environ, settings.providers.values())
    return replace(
        settings,
        ignored_config=ignored,
        ignored_why=why if ignored else "",
        trust_store=trust.store_path(default_home(env)),
        user_config=default_home(env) / "config.yaml",
    )


def check_file(
    file: Path, data: bytes, *, env: Mapping[str, str], cwd: Path
) -> tuple[Settings, Section]:
    """Validate `data` (just read from `file`) as a whole config, running no command: what
    `config trust` shows before it records the file. Raises ConfigError like loading does."""
    if not is_countbot_file(data):
        keys = ", ".join(TOP_KEYS[:4])
        raise ConfigError(
            "no countbot key at the top level: this is another program's file, "
            "and countbot ignores it anyway",
            file=str(file),
            hint=f"countbot's keys are {keys}, …",
        )
    root = load_yaml(file, data)
    cwd = Path(os.path.abspath(cwd))
    settings = _build(root, file, env, cwd, require_provider=False, require_model=False)
    return settings, root


def _build(
    root: Section,
    file: Path | None,
    env: Mapping[str, str],
    cwd: Path,
    *,
    provider: str | None = None,
    model: str | None = None,
    system: str | None = None,
    require_provider: bool = True,
    require_model: bool = True,
    find_local_model: Callable[[], str | None] = local_model_available,
) -> Settings:
    root.check_keys(TOP_KEYS)
    home = file.parent if file else default_home(env)
    # the whole file is checked before the provider is resolved (and a key command runs)
    persona = _persona(root.section("persona"))
    memory = _memory(root.section("memory"), home, env)
    tools = _tools(root.section("tools"), home, env, cwd)
    attach = parse_attach(root.section("attachments"))
    chat = parse_chat(root.section("chat"))
    mcp = parse_mcp(root.section("mcp"), home, env)
    prices = parse_prices(root.section("prices"))
    fallback = parse_fallback(root, env, home, find_local_model)
    temperature = root.number("temperature", 0.0, 2.0)
    max_tokens = root.integer("max_tokens", minimum=1)
    max_iterations = _or(root.integer("max_iterations", minimum=1), 10)
    sessions_dir = root.path("sessions_dir", home, env) or home / "sessions"
    chosen, providers, default_name = resolve_providers(
        root,
        env,
        home,
        flag_provider=provider,
        flag_model=model,
        strict=require_provider,
        require_model=require_provider and require_model,
        find_local_model=find_local_model,
    )
    chosen = _context_window_from_env(chosen, env)
    if chosen.is_bundled_model and root.section("memory").flag("auto_memory") is None:
        memory = memory._replace(auto_memory=False)  # the 135M model's summaries are junk
    return Settings(
        config_file=file,
        home=home,
        sessions_dir=sessions_dir,
        data_dir=home,
        provider=chosen,
        providers=MappingProxyType(providers),
        default_provider=default_name,
        temperature=temperature,
        max_tokens=max_tokens,
        max_iterations=max_iterations,
        system=system,
        persona=persona,
        memory=memory,
        tools=tools,
        attach=attach,
        mcp=mcp,
        prices=prices,
        fallback=fallback,
        chat=chat,
    )


def _context_window_from_env(chosen: ProviderConfig, env: Mapping[str, str]) -> ProviderConfig:
    """`COUNTBOT_CONTEXT_WINDOW=N` over the chosen provider's `context_window`."""
    raw = env.get(CONTEXT_WINDOW_VAR, "").strip()
    if not raw:
        return chosen
    n = int(raw) if raw.isdigit() else 0
    if n < 1:
        raise ConfigError(
            f"{CONTEXT_WINDOW_VAR}: expected a whole number of tokens above 0, got {raw!r}",
            hint="e.g. COUNTBOT_CONTEXT_WINDOW=32768, or unset it",
        )
    return replace(chosen, context_window=n, context_window_source=CONTEXT_WINDOW_VAR)


def _no_local_model() -> str | None:
    return None


def _or(value: Any, default: Any) -> Any:
    return default if value is None else value


def _persona(sec: Section) -> Persona:
    sec.check_keys(PERSONA_KEYS)
    d = Persona()
    return Persona(
        ai_name=_or(sec.text("ai_name"), d.ai_name),
        user_name=_or(sec.text("user_name"), d.user_name),
        personality=_or(sec.text("personality"), d.personality),
        language=_or(sec.text("language"), d.language),
        max_history_messages=_or(sec.integer("max_history_messages", 0), d.max_history_messages),
    )


def _memory(sec: Section, home: Path, env: Mapping[str, str]) -> MemorySettings:
    sec.check_keys(MEMORY_KEYS)
    file = sec.path("file", home, env) or home / "MEMORY.md"
    d = MemorySettings(file=file)
    return MemorySettings(
        file=file,
        overflow_summary=_or(sec.flag("overflow_summary"), d.overflow_summary),
        session_summary=_or(sec.flag("session_summary"), d.session_summary),
        auto_memory=_or(sec.flag("auto_memory"), d.auto_memory),
        auto_messages=_or(sec.integer("auto_messages", 1), d.auto_messages),
        auto_chars=_or(sec.integer("auto_chars", 1), d.auto_chars),
        inject=_or(sec.choice("inject", INJECT_MODES), d.inject),
        recall_lines=_or(sec.integer("recall_lines", 1), d.recall_lines),
        recall_tokens=_or(sec.integer("recall_tokens", 1), d.recall_tokens),
        recall_wait=_or(sec.number("recall_wait", 0.0), d.recall_wait),
        recall_keep=_or(sec.number("recall_keep", 0.0), d.recall_keep),
    )


def _tools(sec: Section, home: Path, env: Mapping[str, str], cwd: Path) -> ToolSettings:
    sec.check_keys(TOOL_KEYS)
    workspace = sec.path("workspace", home, env) or cwd
    d = ToolSettings(workspace=workspace)
    saved_file = saved_allow.allow_file(default_home(env))
    saved = saved_allow.load(saved_file)
    return ToolSettings(
        workspace=workspace,
        enabled=_or(sec.flag("enabled"), d.enabled),
        approval=_or(sec.choice("approval", APPROVAL_MODES), d.approval),
        allow_outside_workspace=_or(sec.flag("allow_outside_workspace"), d.allow_outside_workspace),
        search_all_sessions=_or(sec.flag("search_all_sessions"), d.search_all_sessions),
        shell_timeout=_or(sec.number("shell_timeout", 1.0), d.shell_timeout),
        max_output_chars=_or(sec.integer("max_output_chars", 100), d.max_output_chars),
        allow=_or(sec.texts("allow"), d.allow),
        deny=_or(sec.texts("deny"), d.deny),
        saved_commands=saved.commands,
        saved_tools=saved.tools,
        saved_file=saved_file,
    )
