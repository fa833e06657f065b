"""Construction: builds settings, store, provider, and the conversation (tools, approval
policy, memory, engine) that `ask` and the chat hold; `open_conversation`, the one way both
open it. Nothing here runs a command: the bodies are commands/ (ask) and repl/chat.py (the
chat), which call in here; tests call these functions with injected streams.

The tools (their registry, skills, the memory and session-search tools) are imported only when
tools are on, and MCP's only when a server is configured (it loads asyncio and the SDK): a
plain `ask` without them loads none of it (tests/helpers/start_up.py, docs/design/startup.md).
"""

from __future__ import annotations

import contextlib
import json
import sys
from collections.abc import Callable, Mapping, Sequence
from dataclasses import replace
from datetime import date
from types import MappingProxyType
from typing import TYPE_CHECKING, Any, NamedTuple, TextIO

from countbot_cli import fileio
from countbot_cli.config.instructions import instructions_for
from countbot_cli.config.options import apply_options
from countbot_cli.config.own_files import NOTICES_FILE
from countbot_cli.config.settings import Settings, untrusted_notice
from countbot_cli.config.settings import load_settings as settings_from
from countbot_cli.conversation.budget import make_budget
from countbot_cli.conversation.chat import Conversation, ModelPair, open_session
from countbot_cli.conversation.engine import Engine
from countbot_cli.conversation.fallback import Fallback
from countbot_cli.conversation.server_window import (
    context_window_notice,
    fitted_to_server,
    with_context_window,
)
from countbot_cli.conversation.sessions.store import SessionStore
from countbot_cli.conversation.tokens import TokenCounter
from countbot_cli.errors import CountbotError, UsageError
from countbot_cli.memory.keeper import MemoryKeeper
from countbot_cli.memory.store import MemoryStore
from countbot_cli.provider import Provider
from countbot_cli.provider import make_provider as provider_of
from countbot_cli.textsafe import sanitize
from countbot_cli.tools.approval import ApprovalPolicy, Confirmer

if TYPE_CHECKING:
    from countbot_cli.config.providers import ProviderConfig
    from countbot_cli.conversation.sessions.session import Session
    from countbot_cli.tools.registry import ToolRegistry


NO_OPTIONS: Mapping[str, Any] = MappingProxyType({})


class CommonOptions(NamedTuple):
    """What of a command's flags chooses its settings (`load_settings`). A NamedTuple, not a
    dataclass: defined at every start (DEVELOPING.md)."""

    config: str | None = None
    provider: str | None = None
    model: str | None = None
    system: str | None = None
    options: Mapping[str, Any] = NO_OPTIONS  # -o KEY VALUE (config/options.py)
    context_window: int | None = None  # --context-window N (ask, chat)


def load_settings(
    opts: CommonOptions,
    *,
    require_provider: bool = True,
    require_model: bool = True,
    err: TextIO | None = None,
) -> Settings:
    """The settings, saying once on stderr when an untrusted ./config.yaml was left out."""
    settings = settings_from(
        config_path=opts.config,
        provider=opts.provider,
        model=opts.model,
        system=opts.system,
        require_provider=require_provider,
        require_model=require_model,
    )
    if note := untrusted_notice(settings):
        _notice_daily(err or sys.stderr, settings, note, settings.ignored_config)
    settings = apply_options(settings, opts.options)
    if opts.context_window is not None:  # --context-window N
        return with_context_window(settings, opts.context_window)
    return settings


def make_store(settings: Settings, err: TextIO | None = None) -> SessionStore:
    stream = err or sys.stderr
    return SessionStore(
        settings.sessions_dir,
        on_notice=lambda m: _notice(stream, m),
        workspace=str(settings.tools.workspace),
    )


def make_provider(settings: Settings, err: TextIO | None = None) -> Provider:
    stream = err or sys.stderr
    p = settings.provider
    if p.type == "local" and p.implicit:
        other = (
            f"or set up a provider in {settings.config_file}"
            if settings.config_file is not None
            else "`countbot config init` sets up another provider"
        )
        _notice_daily(
            stream,
            settings,
            f"no provider configured: using the embedded local model {p.model} (offline, for "
            "a smoke test and short answers; `countbot models pull qwen3-1.7b` fetches a "
            f"capable one, {other})",
            p.model,
        )
    return provider_of(p, on_notice=lambda m: _notice(stream, m))


def _notice(err: TextIO, text: str) -> None:
    err.write(f"countbot: {sanitize(text)}\n")
    err.flush()


def _notice_daily(err: TextIO, settings: Settings, text: str, about: object) -> None:
    """`_notice`, said once a day about one file (`about`): a notice that comes back on every
    `ask` is noise. The data folder's NOTICES_FILE holds what was said today; where it cannot
    be read or written, the notice is said every time."""
    path = settings.data_dir / NOTICES_FILE
    key, today = f"{about}\t{text}", date.today().isoformat()
    doc = fileio.read_json_cache(path, 64_000, lambda _why: None)
    said = doc.get("said") if doc.get("day") == today else None
    said = [k for k in said if isinstance(k, str)] if isinstance(said, list) else []
    if key in said:
        return
    _notice(err, text)
    record = json.dumps({"day": today, "said": [*said, key]}).encode()
    with contextlib.suppress(OSError, CountbotError):
        path.parent.mkdir(mode=0o700, parents=True, exist_ok=True)
        fileio.atomic_write(path, record, durable=False)


class Notices:
    """The notices a conversation gives about its settings (an untrusted or cut instructions
    file, a skill left out), each said once on `err` however many engines `/model` builds."""

    def __init__(self, err: TextIO) -> None:
        self.err = err
        self.said: set[str] = set()

    def __call__(self, text: str) -> None:
        if text not in self.said:
            self.said.add(text)
            _notice(self.err, text)


def with_model(settings: Settings, model: str) -> Settings:
    """The same settings on another model of the same provider (for /model)."""
    return replace(settings, provider=replace(settings.provider, model=model))


def build_conversation(
    settings: Settings,
    store: SessionStore,
    *,
    provider_for: Callable[[Settings], Provider],
    tools_enabled: bool,
    yes: bool,
    confirmer: Confirmer | None = None,
    session: Session | None = None,
    is_new: bool = True,
    save: bool = True,
    streaming: bool = True,
    fallback: Sequence[str] | None = None,
    link_provider: Callable[[Settings], Provider] | None = None,
) -> Conversation:
    """The conversation `ask` and the REPL hold: its tools, approval policy and memory, and a
    model pair (engine + memory keeper) on the provider `provider_for` makes for a model's
    settings, again when `/model` switches. save=False: nothing is written (`--no-save`).
    `fallback`: the chain (None: the config's); a link's provider is `link_provider`'s."""
    memory = MemoryStore(settings.memory.file)
    notices = Notices(sys.stderr)  # an untrusted AGENTS.md named once, whatever /model builds
    held: list[Conversation] = []  # search_sessions leaves out the conversation's own session
    tools = (
        _tool_registry(settings, memory, lambda: held[0].session.id if held else None)
        if tools_enabled and settings.tools.enabled
        else None
    )

    def pair_for(
        model: str | None, policy: ApprovalPolicy, options: Mapping[str, Any]
    ) -> ModelPair:
        s = settings if model is None else with_model(settings, model)
        s = apply_options(s, options)  # /set and /role's options, on top of -o's
        return build_pair(
            s,
            provider_for(s),
            store if save else None,
            tools=tools,
            policy=policy,
            memory=memory,
            streaming=streaming,
            notices=notices,
        )

    def link(name: str) -> Engine:  # a provider of the fallback chain, when a turn needs it
        s = replace(settings, provider=link_settings(settings, name))
        provider = (link_provider or make_provider)(s)
        return build_pair(
            s,
            provider,
            store if save else None,
            tools=tools,
            policy=held[0].policy,
            memory=memory,
            streaming=streaming,
            notices=notices,
        ).engine

    chain = settings.fallback.names if fallback is None else tuple(fallback)
    convo = Conversation(
        settings=settings,
        store=store,
        pairs=pair_for,
        policy=_policy(settings, yes=yes, confirmer=confirmer),
        session=session,
        is_new=is_new,
        save=save,
    )
    convo.fallback = Fallback(chain, link, local_available=lambda: _has_local(settings))
    held.append(convo)
    return convo


def link_settings(settings: Settings, name: str) -> ProviderConfig:
    """A fallback link's provider, resolved now (its key command runs): ConfigError if not."""
    resolve = settings.fallback.resolve
    if resolve is None:
        raise UsageError(f"provider '{name}' cannot be resolved here")
    return resolve(name)


def _has_local(settings: Settings) -> bool:
    """The embedded model can answer (the `local` extra is installed)."""
    try:
        link_settings(settings, "local")
    except CountbotError:
        return False
    return True


def build_engine(
    settings: Settings,
    provider: Provider,
    store: SessionStore | None,
    *,
    tools_enabled: bool,
    yes: bool,
) -> Engine:
    """The engine `build_conversation` builds on `provider`, alone (benches, provider tests)."""
    memory = MemoryStore(settings.memory.file)
    tools = _tool_registry(settings, memory) if tools_enabled and settings.tools.enabled else None
    policy = _policy(settings, yes=yes, confirmer=None)
    return build_pair(settings, provider, store, tools=tools, policy=policy, memory=memory).engine


def build_pair(
    settings: Settings,
    provider: Provider,
    store: SessionStore | None,
    *,
    tools: ToolRegistry | None,
    policy: ApprovalPolicy,
    memory: MemoryStore,
    streaming: bool = True,
    notices: Notices | None = None,
) -> ModelPair:
    """An engine and its memory keeper on `provider` (store None: nothing is saved, so the
    keeper has no session to keep); `notices`: where the instructions file and the skills are
    named (once each)."""
    notices = notices or Notices(sys.stderr)
    counter = TokenCounter(provider.model)
    keeper = MemoryKeeper(settings, provider, store, memory, counter=counter)
    if settings.memory.inject == "relevant":  # recall by meaning: the models load meanwhile
        keeper.recaller.notice = lambda m: _notice(sys.stderr, m)
        keeper.recaller.start()
    engine = Engine(
        settings=settings,
        provider=provider,
        tools=tools,
        policy=policy,
        budget=make_budget(settings, counter),
        recall=keeper.recall if settings.memory.inject != "off" else None,
        pinned=None if settings.memory.off else keeper.pinned,  # ask --no-memory
        instructions=instructions_for(settings, notices),
        skills=_skills(settings, notices) if tools is not None else [],  # read with read_file
        streaming=streaming,
    )
    engine.context_window_notice = context_window_notice(settings, provider)
    return ModelPair(engine, keeper)


def _skills(settings: Settings, notices: Notices) -> list[tuple[str, str, str]]:
    """The skills' lines for the stable head (config/skills.py); left-out ones named once.
    Only with tools on (the module docstring)."""
    from countbot_cli.config.skills import listing, skills_for  # with tools only (start-up)

    found = skills_for(settings, notices)
    return listing(found, settings.tools.workspace)


def _policy(settings: Settings, *, yes: bool, confirmer: Confirmer | None) -> ApprovalPolicy:
    return ApprovalPolicy(
        mode=settings.tools.approval,
        yes_writes=yes,
        confirmer=confirmer,
        saved_tools=frozenset(settings.tools.saved_tools),
    )


def _tool_registry(
    settings: Settings, memory: MemoryStore, current: Callable[[], str | None] = lambda: None
) -> ToolRegistry:
    """`current()`: the session the tools serve (search_sessions leaves it out). Imported here:
    a plain `ask` without tools loads none of it (the module docstring)."""
    from countbot_cli.config.skills import skills_for  # with tools only (start-up)
    from countbot_cli.conversation.sessions.search_tool import search_sessions_tool  # likewise
    from countbot_cli.memory.session_meaning import MeaningSearch  # with tools only (start-up)
    from countbot_cli.memory.tool import memory_tool  # with tools only (start-up)
    from countbot_cli.tools.registry import ToolContext, ToolRegistry, default_tools  # likewise

    t = settings.tools
    ctx = ToolContext(
        workspace=t.workspace,
        max_output_chars=t.max_output_chars,
        shell_timeout=t.shell_timeout,
        allow_outside_workspace=t.allow_outside_workspace,
        secret_values=tuple(p.api_key for p in settings.providers.values() if p.api_key)
        + ((settings.provider.api_key,) if settings.provider.api_key else ())
        + settings.mcp.secret_values(),  # MCP servers' env and headers
        # countbot's own files always need approval, even inside the workspace
        protected=settings.own_files,
        # the user's own skills (config/skills.py): read_file reads them without asking
        readable=tuple(s.file.parent for s in skills_for(settings) if not s.project),
    )
    search = search_sessions_tool(
        settings.sessions_dir,
        current,
        workspace=str(t.workspace),
        everywhere=t.search_all_sessions,
        searcher=lambda store: MeaningSearch(
            store, on_notice=lambda _m: None, wait=settings.memory.recall_wait
        ),
    )
    mine = [] if settings.memory.off else [memory_tool(memory)]  # ask --no-memory: none
    registry = ToolRegistry([*default_tools(ctx), *mine, search], ctx)
    if settings.mcp.servers:  # their tools join on the first turn that offers tools
        from countbot_cli.tools.mcp import add_mcp_tools  # asyncio and the SDK: with servers only

        add_mcp_tools(registry, settings.mcp.servers, lambda m: _notice(sys.stderr, m))
    return registry


class Opening(NamedTuple):
    """How `ask` and the chat open their conversation: which session, and with what."""

    session: str | None = None  # -s ID (a prefix, or 'latest'); `sessions resume ID`
    cont: bool = False  # -c: the latest session
    tools: bool = True  # --no-tools: none offered
    yes: bool = False  # --yes: file writes and edits approved
    save: bool = True  # --no-save: nothing written
    streaming: bool = True  # --no-stream: the whole answer at once
    fallback: Sequence[str] | None = None  # --fallback NAME...: the chain (None: the config's)


def open_conversation(
    settings: Settings,
    opening: Opening,
    *,
    err: TextIO,
    confirmer: Confirmer | None,
    store: SessionStore | None = None,
) -> Conversation:
    """The one way `ask` and the chat open a conversation: the store (unless given), the
    session (new, `-s ID` or `-c`), the context window fitted to the server, the providers
    (their notices on `err`), and the conversation with its tools, approval policy, memory and
    fallback chain."""
    store = store or make_store(settings, err)
    session, is_new = open_session(store, settings, ref=opening.session, cont=opening.cont)
    settings = fitted_to_server(settings, session if is_new else None)  # asked once, cached
    return build_conversation(
        settings,
        store,
        provider_for=lambda s: make_provider(s, err),
        tools_enabled=opening.tools,
        yes=opening.yes,
        confirmer=confirmer,
        session=session,
        is_new=is_new,
        save=opening.save,
        streaming=opening.streaming,
        fallback=opening.fallback,
        link_provider=lambda s: make_provider(s, err),
    )
