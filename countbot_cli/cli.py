"""The typer app: parses flags and calls into app.py and the cmd_* modules. No logic here.

Only typer is imported at module level; each command imports what it needs when it runs, so
`countbot --help` stays fast.
"""

from __future__ import annotations

import os
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Annotated, Any

import typer

from .errors import EXIT_CODES_HELP

HELP = f"""countbot: chat with OpenAI-compatible language models from the terminal.

\b
Examples:
  countbot                          interactive chat (/help lists its commands)
  countbot -c                       continue the latest conversation in the chat
  countbot ask "what is a monad?"
  git diff | countbot ask "write a commit message"
  countbot ask -c "and in Haskell?"  continue the latest conversation
  countbot sessions list

\b
{EXIT_CODES_HELP}
"""

app = typer.Typer(
    help=HELP,
    rich_markup_mode=None,
    pretty_exceptions_enable=False,
    add_completion=False,
    no_args_is_help=False,
    context_settings={"help_option_names": ["-h", "--help"]},
)
sessions_app = typer.Typer(help="List, show and manage saved conversations.")
memory_app = typer.Typer(help="Long-term memory (MEMORY.md).", no_args_is_help=True)
config_app = typer.Typer(help="Create, show and check the configuration.", no_args_is_help=True)
app.add_typer(sessions_app, name="sessions")
app.add_typer(memory_app, name="memory")
app.add_typer(config_app, name="config")

_state: dict[str, Any] = {"config": None}

ConfigOpt = Annotated[
    str | None, typer.Option("--config", help="Config file (default: see `countbot config path`).")
]
ProviderOpt = Annotated[
    str | None, typer.Option("--provider", "-p", help="Provider name from the config.")
]
ModelOpt = Annotated[str | None, typer.Option("--model", "-m", help="Model to use.")]
SystemOpt = Annotated[
    str | None, typer.Option("--system", help="Extra instructions for the system prompt.")
]
JsonOpt = Annotated[bool, typer.Option("--json", help="Print JSON.")]


def guarded(fn: Callable[[], int | None]) -> None:
    """Run a command: map countbot errors to their one-line message and exit code."""
    from .errors import CountbotError

    try:
        code = fn() or 0
    except CountbotError as exc:
        from .app import print_error

        print_error(exc, sys.stderr)
        code = exc.exit_code
    except KeyboardInterrupt:
        sys.stderr.write("\ncountbot: interrupted\n")
        code = 130
    except BrokenPipeError:
        _silence_broken_pipe()
        code = 0
    except Exception as exc:
        if os.environ.get("COUNTBOT_DEBUG"):
            raise
        sys.stderr.write(
            f"countbot: unexpected error: {type(exc).__name__}: {exc}\n"
            "countbot: set COUNTBOT_DEBUG=1 to see the traceback, and please report it\n"
        )
        code = 1
    raise typer.Exit(code)


def _silence_broken_pipe() -> None:
    # stdout's reader went away (e.g. `countbot ask … | head -1`): exit quietly
    try:
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, sys.stdout.fileno())
    except OSError:
        pass


def _config(value: str | None) -> str | None:
    return value or _state["config"]


SessionOpt = Annotated[
    str | None, typer.Option("--session", "-s", help="Continue session ID (prefix or 'latest').")
]
ContinueOpt = Annotated[bool, typer.Option("--continue", "-c", help="Continue the latest session.")]
YesOpt = Annotated[
    bool,
    typer.Option(
        "--yes", "-y", help="Approve file writes and edits without asking (never shell commands)."
    ),
]
NoToolsOpt = Annotated[bool, typer.Option("--no-tools", help="Do not offer tools to the model.")]


@app.callback(invoke_without_command=True)
def main_options(
    ctx: typer.Context,
    config: ConfigOpt = None,
    version: Annotated[bool, typer.Option("--version", "-V", help="Print the version.")] = False,
    session: SessionOpt = None,
    cont: ContinueOpt = False,
    model: ModelOpt = None,
    provider: ProviderOpt = None,
    system: SystemOpt = None,
    yes: YesOpt = False,
    no_tools: NoToolsOpt = False,
) -> None:
    """With no command: the interactive chat (the same as `countbot chat`)."""
    if version:
        from . import __version__

        typer.echo(f"countbot {__version__}")
        raise typer.Exit(0)
    _state["config"] = config
    chat_flags = session or cont or model or provider or system or yes or no_tools
    if ctx.invoked_subcommand is None:
        _run_chat(
            config,
            session=session,
            cont=cont,
            model=model,
            provider=provider,
            system=system,
            yes=yes,
            no_tools=no_tools,
        )
    elif chat_flags:
        sys.stderr.write(
            "countbot: error: -s/-c/-m/-p/--system/--yes/--no-tools before a command only apply "
            f"to the chat; put them after `{ctx.invoked_subcommand}`\n"
        )
        raise typer.Exit(2)


def _run_chat(config: str | None, *, resume: str | None = None, **flags: Any) -> None:
    from .chat import ChatOptions, run_chat

    opts = ChatOptions(config=_config(config), **flags)
    guarded(lambda: run_chat(opts, resume=resume))


@app.command(
    help="The interactive chat (also what `countbot` alone starts). /help inside lists the commands."
)
def chat(
    session: SessionOpt = None,
    cont: ContinueOpt = False,
    model: ModelOpt = None,
    provider: ProviderOpt = None,
    system: SystemOpt = None,
    yes: YesOpt = False,
    no_tools: NoToolsOpt = False,
    config: ConfigOpt = None,
) -> None:
    _run_chat(
        config,
        session=session,
        cont=cont,
        model=model,
        provider=provider,
        system=system,
        yes=yes,
        no_tools=no_tools,
    )


@app.command(
    help="Ask one question, print the answer, exit. Piped stdin is appended to the prompt.",
    epilog="\b\n" + EXIT_CODES_HELP,
)
def ask(
    prompt: Annotated[
        list[str] | None, typer.Argument(help="The question.", show_default=False)
    ] = None,
    session: Annotated[
        str | None,
        typer.Option("--session", "-s", help="Continue session ID (prefix or 'latest')."),
    ] = None,
    cont: Annotated[
        bool, typer.Option("--continue", "-c", help="Continue the latest session.")
    ] = False,
    no_save: Annotated[
        bool, typer.Option("--no-save", help="Do not save this conversation.")
    ] = False,
    model: ModelOpt = None,
    provider: ProviderOpt = None,
    system: SystemOpt = None,
    file: Annotated[
        list[Path] | None, typer.Option("--file", "-f", help="Attach a text file (repeatable).")
    ] = None,
    no_stream: Annotated[
        bool, typer.Option("--no-stream", help="Wait for the whole answer.")
    ] = False,
    json_out: Annotated[
        bool,
        typer.Option(
            "--json",
            help="Print one JSON object: session_id, model, answer, usage, tool_calls, finish_reason.",
        ),
    ] = False,
    plain: Annotated[
        bool,
        typer.Option(
            "--plain",
            help="Raw text, no markdown rendering (automatic when stdout is not a terminal).",
        ),
    ] = False,
    yes: Annotated[
        bool,
        typer.Option(
            "--yes",
            "-y",
            help="Approve file writes and edits without asking (never shell commands).",
        ),
    ] = False,
    no_tools: Annotated[
        bool, typer.Option("--no-tools", help="Do not offer tools to the model.")
    ] = False,
    config: ConfigOpt = None,
) -> None:
    from .app import AskOptions, run_ask

    opts = AskOptions(
        config=_config(config),
        provider=provider,
        model=model,
        system=system,
        prompt=list(prompt or []),
        session=session,
        cont=cont,
        no_save=no_save,
        files=list(file or []),
        no_stream=no_stream,
        json_out=json_out,
        plain=plain,
        yes=yes,
        no_tools=no_tools,
    )
    guarded(lambda: run_ask(opts))


@app.command(help="List the provider's models (GET {api_base}/models).")
def models(
    json_out: JsonOpt = False, provider: ProviderOpt = None, config: ConfigOpt = None
) -> None:
    def go() -> int:
        from .app import make_provider
        from .cmd_config import models as _models

        settings = _settings(config, provider=provider, require_model=False)
        return _models(settings, lambda _p: make_provider(settings), sys.stdout, json_out=json_out)

    guarded(go)


# ---- sessions ----


def _settings(
    config: str | None,
    *,
    provider: str | None = None,
    require_provider: bool = True,
    require_model: bool = True,
) -> Any:
    from .app import CommonOptions, load_settings

    opts = CommonOptions(config=_config(config), provider=provider)
    return load_settings(opts, require_provider=require_provider, require_model=require_model)


def _store(config: str | None) -> Any:
    from .app import make_store

    return make_store(_settings(config, require_provider=False))


@sessions_app.callback(invoke_without_command=True)
def sessions_default(ctx: typer.Context, config: ConfigOpt = None) -> None:
    """`countbot sessions` alone lists them, like `sessions list`."""
    if config:
        _state["config"] = config
    if ctx.invoked_subcommand is None:
        from .cmd_sessions import sessions_list as _list

        guarded(lambda: _list(_store(config), sys.stdout))


@sessions_app.command("list", help="Newest first: id, title, messages, updated, model.")
def sessions_list(
    json_out: JsonOpt = False,
    limit: Annotated[int | None, typer.Option("-n", help="Show at most N sessions.")] = None,
    config: ConfigOpt = None,
) -> None:
    from .cmd_sessions import sessions_list as _list

    guarded(lambda: _list(_store(config), sys.stdout, json_out=json_out, limit=limit))


@sessions_app.command("show", help="Print a session's transcript.")
def sessions_show(
    session_id: Annotated[str, typer.Argument(metavar="ID")],
    json_out: JsonOpt = False,
    config: ConfigOpt = None,
) -> None:
    from .cmd_sessions import sessions_show as _show

    guarded(
        lambda: _show(
            _store(config), session_id, sys.stdout, json_out=json_out, tty=sys.stdout.isatty()
        )
    )


@sessions_app.command("resume", help="Open a saved session in the interactive chat.")
def sessions_resume(
    session_id: Annotated[str, typer.Argument(metavar="ID")],
    model: ModelOpt = None,
    provider: ProviderOpt = None,
    system: SystemOpt = None,
    yes: YesOpt = False,
    no_tools: NoToolsOpt = False,
    config: ConfigOpt = None,
) -> None:
    _run_chat(
        config,
        resume=session_id,
        model=model,
        provider=provider,
        system=system,
        yes=yes,
        no_tools=no_tools,
    )


@sessions_app.command("delete", help="Delete sessions (asks unless --yes).")
def sessions_delete(
    session_ids: Annotated[list[str], typer.Argument(metavar="ID...")],
    yes: Annotated[bool, typer.Option("--yes", "-y", help="Do not ask.")] = False,
    config: ConfigOpt = None,
) -> None:
    from .cmd_sessions import sessions_delete as _delete

    def ask_user(question: str) -> bool:
        from .errors import UsageError

        if not sys.stdin or not sys.stdin.isatty():
            raise UsageError("not deleting: there is no terminal to confirm on", hint="pass --yes")
        sep = " " if question.endswith("?") else ""
        return input(f"{question}{sep}[y/N] ").strip().lower() in ("y", "yes")

    guarded(lambda: _delete(_store(config), session_ids, yes=yes, confirm=ask_user, out=sys.stdout))


@sessions_app.command("rename", help="Give a session a new title.")
def sessions_rename(
    session_id: Annotated[str, typer.Argument(metavar="ID")],
    title: Annotated[list[str], typer.Argument(metavar="TITLE")],
    config: ConfigOpt = None,
) -> None:
    from .cmd_sessions import sessions_rename as _rename

    guarded(lambda: _rename(_store(config), session_id, " ".join(title), out=sys.stdout))


@sessions_app.command("export", help="Export a session as markdown or JSON.")
def sessions_export(
    session_id: Annotated[str, typer.Argument(metavar="ID")],
    fmt: Annotated[str, typer.Option("--format", help="md or json.")] = "md",
    output: Annotated[
        Path | None, typer.Option("--output", "-o", help="Write to FILE instead of stdout.")
    ] = None,
    config: ConfigOpt = None,
) -> None:
    from .cmd_sessions import sessions_export as _export

    guarded(lambda: _export(_store(config), session_id, fmt=fmt, output=output, out=sys.stdout))


@sessions_app.command(
    "summary", help="Show, set or clear a session's summary (sent as session context)."
)
def sessions_summary(
    session_id: Annotated[str, typer.Argument(metavar="ID")],
    text: Annotated[list[str] | None, typer.Argument(metavar="[TEXT]")] = None,
    clear: Annotated[bool, typer.Option("--clear", help="Remove the summary.")] = False,
    config: ConfigOpt = None,
) -> None:
    from .cmd_sessions import sessions_summary as _summary

    joined = " ".join(text) if text else None
    guarded(lambda: _summary(_store(config), session_id, joined, clear=clear, out=sys.stdout))


# ---- memory ----


def _memory(config: str | None) -> Any:
    from .memory_store import MemoryStore

    return MemoryStore(_settings(config, require_provider=False).memory.file)


@memory_app.command("show", help="Print MEMORY.md entries with their line numbers.")
def memory_show(
    tail: Annotated[int | None, typer.Option("--tail", help="Only the last N entries.")] = None,
    config: ConfigOpt = None,
) -> None:
    from .cmd_memory import memory_show as _show

    guarded(lambda: _show(_memory(config), sys.stdout, tail=tail))


@memory_app.command(
    "search", help="Search long-term memory (all words first, then more matches, newer first)."
)
def memory_search(
    words: Annotated[list[str], typer.Argument(metavar="WORDS...")],
    limit: Annotated[int, typer.Option("-n", help="At most N results.")] = 10,
    config: ConfigOpt = None,
) -> None:
    from .cmd_memory import memory_search as _search

    guarded(lambda: _search(_memory(config), words, sys.stdout, limit=limit))


@memory_app.command("add", help="Add an entry to long-term memory.")
def memory_add(
    text: Annotated[list[str], typer.Argument(metavar="TEXT")], config: ConfigOpt = None
) -> None:
    from .cmd_memory import memory_add as _add

    guarded(lambda: _add(_memory(config), " ".join(text), sys.stdout))


@memory_app.command("delete", help="Delete entries by line number (see `memory show`).")
def memory_delete(
    lines: Annotated[list[int], typer.Argument(metavar="LINE...")], config: ConfigOpt = None
) -> None:
    from .cmd_memory import memory_delete as _delete

    guarded(lambda: _delete(_memory(config), lines, sys.stdout))


# ---- config ----


@config_app.command("init", help="Write a starter config file.")
def config_init(
    path: Annotated[
        Path | None, typer.Argument(help="Where (default: the user config folder).")
    ] = None,
    force: Annotated[bool, typer.Option("--force", help="Overwrite an existing file.")] = False,
) -> None:
    from .cmd_config import config_init as _init

    guarded(lambda: _init(path, force=force, out=sys.stdout))


@config_app.command("show", help="Print the effective configuration (secrets masked).")
def config_show(config: ConfigOpt = None) -> None:
    from .cmd_config import config_show as _show

    guarded(lambda: _show(_settings(config, require_provider=False), sys.stdout))


@config_app.command("path", help="Print every resolved path.")
def config_path(config: ConfigOpt = None) -> None:
    from .cmd_config import config_path as _path

    guarded(lambda: _path(_settings(config, require_provider=False), sys.stdout))


@config_app.command(
    "check", help="Validate the config, then call the provider (list models, one-token completion)."
)
def config_check(provider: ProviderOpt = None, config: ConfigOpt = None) -> None:
    def go() -> int:
        from dataclasses import replace

        from .app import make_provider
        from .cmd_config import config_check as _check

        settings = _settings(config, provider=provider, require_model=False)
        # a check answers quickly: no retries, and a silent server is reported after 20 s
        quick = replace(
            settings,
            provider=replace(
                settings.provider,
                max_retries=0,
                read_timeout=min(settings.provider.read_timeout, 20.0),
            ),
        )
        return _check(quick, lambda _p: make_provider(quick), sys.stdout)

    guarded(go)


def run(argv: list[str]) -> None:
    _terminate_like_ctrl_c()
    app(args=argv, prog_name="countbot")


def _terminate_like_ctrl_c() -> None:
    """SIGTERM and SIGHUP (the terminal closed) stop countbot the way Ctrl-C does, so the turn
    in progress is saved (marked interrupted) instead of lost."""
    import signal

    from .errors import Terminated

    def stop(signum: int, frame: object) -> None:
        raise Terminated

    for sig in (signal.SIGTERM, getattr(signal, "SIGHUP", None)):
        if sig is not None:
            signal.signal(sig, stop)
