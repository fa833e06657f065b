"""The `sessions`, `memory` and `config` command groups (`sessions resume` lives in main.py,
beside the chat it starts)."""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Annotated, Any

import typer

from countbot_cli.cli.options import (
    ConfigOpt,
    JsonOpt,
    ProviderOpt,
    global_opts,
    guarded,
    load_for_command,
)

sessions_app = typer.Typer(help="List, show and manage saved conversations.")
memory_app = typer.Typer(help="Long-term memory (MEMORY.md).", no_args_is_help=True)
config_app = typer.Typer(
    help="Create, show, check and trust the configuration.", no_args_is_help=True
)


# ---- sessions ----


def _store(config: str | None) -> Any:
    from countbot_cli.app import make_store

    return make_store(load_for_command(config, require_provider=False))


@sessions_app.callback(invoke_without_command=True)
def sessions_default(ctx: typer.Context, config: ConfigOpt = None) -> None:
    """`countbot sessions` alone lists them, like `sessions list`."""
    if config:
        global_opts["config"] = config
    if ctx.invoked_subcommand is None:
        from countbot_cli.ui.sessions import sessions_list as _list

        guarded(lambda: _list(_store(config), sys.stdout))


@sessions_app.command("list", help="Newest first: id, title, messages, updated, model.")
def sessions_list(
    json_out: JsonOpt = False,
    limit: Annotated[int | None, typer.Option("-n", help="Show at most N sessions.")] = None,
    config: ConfigOpt = None,
) -> None:
    from countbot_cli.ui.sessions import sessions_list as _list

    guarded(lambda: _list(_store(config), sys.stdout, json_out=json_out, limit=limit))


@sessions_app.command(
    "search", help="Find sessions by what was said in them (titles, live and archived messages)."
)
def sessions_search(
    words: Annotated[list[str], typer.Argument(metavar="WORDS...")],
    json_out: JsonOpt = False,
    limit: Annotated[int, typer.Option("-n", help="At most N sessions.")] = 10,
    config: ConfigOpt = None,
) -> None:
    def go() -> int:
        from countbot_cli.memory.session_meaning import MeaningSearch
        from countbot_cli.ui.session_search import sessions_search as _search

        search = MeaningSearch(_store(config))  # notices go where the store's go (stderr)
        return _search(search, words, sys.stdout, json_out=json_out, limit=limit)

    guarded(go)


@sessions_app.command("show", help="Print a session's transcript.")
def sessions_show(
    session_id: Annotated[str, typer.Argument(metavar="ID")],
    json_out: JsonOpt = False,
    config: ConfigOpt = None,
) -> None:
    from countbot_cli.ui.sessions import sessions_show as _show

    guarded(
        lambda: _show(
            _store(config), session_id, sys.stdout, json_out=json_out, tty=sys.stdout.isatty()
        )
    )


@sessions_app.command("delete", help="Delete sessions (asks unless --yes).")
def sessions_delete(
    session_ids: Annotated[list[str], typer.Argument(metavar="ID...")],
    yes: Annotated[bool, typer.Option("--yes", "-y", help="Do not ask.")] = False,
    config: ConfigOpt = None,
) -> None:
    from countbot_cli.ui.sessions import sessions_delete as _delete

    def ask_user(question: str) -> bool:
        from countbot_cli.errors import UsageError

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
    from countbot_cli.ui.sessions import sessions_rename as _rename

    guarded(lambda: _rename(_store(config), session_id, " ".join(title), out=sys.stdout))


@sessions_app.command(
    "fork", help="Copy a session up to message N into a new session (the original is kept)."
)
def sessions_fork(
    session_id: Annotated[str, typer.Argument(metavar="ID")],
    at: Annotated[
        int | None,
        typer.Option("--at", metavar="N", help="Keep the first N messages (default: all)."),
    ] = None,
    title: Annotated[str, typer.Option("--title", help="The new session's title.")] = "",
    config: ConfigOpt = None,
) -> None:
    from countbot_cli.ui.sessions import sessions_fork as _fork

    guarded(lambda: _fork(_store(config), session_id, sys.stdout, at=at, title=title))


@sessions_app.command("export", help="Export a session as markdown or JSON.")
def sessions_export(
    session_id: Annotated[str, typer.Argument(metavar="ID")],
    fmt: Annotated[
        str | None,
        typer.Option("--format", help="md or json (default: the file's extension, else md)."),
    ] = None,
    output: Annotated[
        Path | None, typer.Option("--output", "-o", help="Write to FILE instead of stdout.")
    ] = None,
    force: Annotated[bool, typer.Option("--force", help="Replace FILE if it exists.")] = False,
    config: ConfigOpt = None,
) -> None:
    from countbot_cli.ui.sessions import sessions_export as _export

    guarded(
        lambda: _export(
            _store(config),
            session_id,
            fmt=fmt,
            output=output,
            out=sys.stdout,
            force=force,
            confirm=_yes_no if sys.stdin and sys.stdin.isatty() else None,
            overwrite_hint="pass --force to replace it",
        )
    )


def _yes_no(question: str) -> bool:
    """Ask on the terminal; anything but y/yes is no."""
    try:
        return input(f"{question} [y/N] ").strip().lower() in ("y", "yes")
    except EOFError:
        return False


@sessions_app.command(
    "summary", help="Show, set or clear a session's summary (sent as session context)."
)
def sessions_summary(
    session_id: Annotated[str, typer.Argument(metavar="ID")],
    text: Annotated[list[str] | None, typer.Argument(metavar="[TEXT]")] = None,
    clear: Annotated[bool, typer.Option("--clear", help="Remove the summary.")] = False,
    config: ConfigOpt = None,
) -> None:
    from countbot_cli.ui.sessions import sessions_summary as _summary

    joined = " ".join(text) if text else None
    guarded(lambda: _summary(_store(config), session_id, joined, clear=clear, out=sys.stdout))


# ---- memory ----


def _memory(config: str | None) -> Any:
    from countbot_cli.memory.store import MemoryStore

    return MemoryStore(load_for_command(config, require_provider=False).memory.file)


@memory_app.command(
    "show", help="Print MEMORY.md entries, numbered 1..N, pinned and muted ones marked."
)
def memory_show(
    tail: Annotated[int | None, typer.Option("--tail", help="Only the last N entries.")] = None,
    json_out: JsonOpt = False,
    config: ConfigOpt = None,
) -> None:
    if json_out:
        from countbot_cli.ui.memory_trace import memory_show_json

        guarded(lambda: memory_show_json(_memory(config), sys.stdout, tail=tail))
        return
    from countbot_cli.ui.memory import memory_show as _show

    guarded(lambda: _show(_memory(config), sys.stdout, tail=tail))


@memory_app.command("why", help="Print the conversation messages behind memory entry N.")
def memory_why(line: Annotated[int, typer.Argument(metavar="N")], config: ConfigOpt = None) -> None:
    from countbot_cli.ui.memory_trace import memory_why as _why

    guarded(lambda: _why(_memory(config), _store(config), line, sys.stdout))


@memory_app.command(
    "edit", help="Open MEMORY.md in $EDITOR, at entry N if given (other writers wait meanwhile)."
)
def memory_edit(
    number: Annotated[int | None, typer.Argument(metavar="[N]")] = None,
    config: ConfigOpt = None,
) -> None:
    from countbot_cli.ui.memory_trace import memory_edit as _edit

    guarded(lambda: _edit(_memory(config), sys.stdout, number=number))


@memory_app.command(
    "search", help="Search long-term memory (all words first, then more matches, newer first)."
)
def memory_search(
    words: Annotated[list[str], typer.Argument(metavar="WORDS...")],
    limit: Annotated[int, typer.Option("-n", help="At most N results.")] = 10,
    config: ConfigOpt = None,
) -> None:
    from countbot_cli.ui.memory import memory_search as _search

    guarded(lambda: _search(_memory(config), words, sys.stdout, limit=limit))


def _mark(verb: str, line: int, config: str | None) -> None:
    from countbot_cli.ui.memory import memory_mark

    guarded(lambda: memory_mark(_memory(config), verb, line, sys.stdout))


@memory_app.command("pin", help="Send memory entry N with every request (in the system prompt).")
def memory_pin(line: Annotated[int, typer.Argument(metavar="N")], config: ConfigOpt = None) -> None:
    _mark("pin", line, config)


@memory_app.command("unpin", help="Stop sending memory entry N with every request.")
def memory_unpin(
    line: Annotated[int, typer.Argument(metavar="N")], config: ConfigOpt = None
) -> None:
    _mark("unpin", line, config)


@memory_app.command("mute", help="Never recall memory entry N into a request.")
def memory_mute(
    line: Annotated[int, typer.Argument(metavar="N")], config: ConfigOpt = None
) -> None:
    _mark("mute", line, config)


@memory_app.command("unmute", help="Let memory entry N be recalled again.")
def memory_unmute(
    line: Annotated[int, typer.Argument(metavar="N")], config: ConfigOpt = None
) -> None:
    _mark("unmute", line, config)


@memory_app.command(
    "tidy",
    help="Propose merges, supersessions and drops of MEMORY.md lines as a diff; apply the ones "
    "you answer yes to (the lines taken out go to MEMORY.archive.jsonl). Without a terminal "
    "it only prints them.",
)
def memory_tidy(
    no_model: Annotated[
        bool, typer.Option("--no-model", help="Only the proposals found without the model.")
    ] = False,
    config: ConfigOpt = None,
) -> None:
    def go() -> int:
        from countbot_cli.memory.store import MemoryStore
        from countbot_cli.ui.memory_tidy import memory_tidy as _tidy

        settings = load_for_command(config, require_provider=False)
        store = MemoryStore(settings.memory.file)
        tty = bool(sys.stdin and sys.stdin.isatty() and sys.stdout.isatty())
        model = None if no_model else _tidy_model(store, settings)
        return _tidy(
            store, sys.stdout, ask=_line if tty else None, edit=_edit if tty else None, model=model
        )

    guarded(go)


def _tidy_model(store: Any, settings: Any) -> Any:
    """memory tidy's model on the configured provider; None when there is none to ask (the
    embedded model is too small to judge which facts replace which)."""
    from countbot_cli.app import make_provider
    from countbot_cli.errors import CountbotError
    from countbot_cli.memory.tidy import TidyModel

    if settings.provider.type == "local":
        return None
    try:
        return TidyModel(store, settings, make_provider(settings, sys.stderr))
    except CountbotError:
        return None


def _line(question: str) -> str | None:
    try:
        return input(question)
    except (EOFError, KeyboardInterrupt):
        return None


def _edit(text: str) -> str | None:
    sys.stdout.write(f"  the line now: {text}\n")
    return _line("  new text (empty: leave it): ")


@memory_app.command("add", help="Add an entry to long-term memory.")
def memory_add(
    text: Annotated[list[str], typer.Argument(metavar="TEXT")], config: ConfigOpt = None
) -> None:
    from countbot_cli.ui.memory import memory_add as _add

    guarded(lambda: _add(_memory(config), " ".join(text), sys.stdout))


@memory_app.command("delete", help="Delete entries by number (see `memory show`).")
def memory_delete(
    lines: Annotated[list[int], typer.Argument(metavar="N...")], config: ConfigOpt = None
) -> None:
    from countbot_cli.ui.memory import memory_delete as _delete

    guarded(lambda: _delete(_memory(config), lines, sys.stdout))


# ---- config ----


@config_app.command("init", help="Write a starter config file.")
def config_init(
    path: Annotated[
        Path | None, typer.Argument(help="Where (default: the user config folder).")
    ] = None,
    force: Annotated[bool, typer.Option("--force", help="Overwrite an existing file.")] = False,
) -> None:
    from countbot_cli.cli.config import config_init as _init

    guarded(lambda: _init(path, force=force, out=sys.stdout))


@config_app.command("show", help="Print the effective configuration (secrets masked).")
def config_show(config: ConfigOpt = None) -> None:
    from countbot_cli.cli.config import config_show as _show

    guarded(lambda: _show(load_for_command(config, require_provider=False), sys.stdout))


@config_app.command("path", help="Print every resolved path.")
def config_path(config: ConfigOpt = None) -> None:
    from countbot_cli.cli.config import config_path as _path

    guarded(lambda: _path(load_for_command(config, require_provider=False), sys.stdout))


@config_app.command(
    "trust",
    help="Apply a project's ./config.yaml (or PATH, or its AGENTS.md) as it is now: validate, "
    "show, ask, record.",
)
def config_trust(
    path: Annotated[Path | None, typer.Argument(help="The file (default: ./config.yaml).")] = None,
    yes: Annotated[bool, typer.Option("--yes", "-y", help="Do not ask (no terminal).")] = False,
) -> None:
    from countbot_cli.cli.trust import Review, page_on_terminal
    from countbot_cli.cli.trust import config_trust as _trust

    tty = bool(sys.stdin and sys.stdin.isatty())
    on_screen = tty and sys.stdout.isatty()
    review = Review(
        sys.stdout, yes, _yes_no if tty else None, page_on_terminal if on_screen else None
    )
    guarded(lambda: _trust(path, out=sys.stdout, review=review))


allow_app = typer.Typer(
    help="Approvals saved with `A` at a prompt (in the user's own config folder).",
    no_args_is_help=True,
)
config_app.add_typer(allow_app, name="allow")


@allow_app.command("list", help="Print the saved approvals and the file holding them.")
def config_allow_list() -> None:
    from countbot_cli.cli.config import allow_list

    guarded(lambda: allow_list(sys.stdout))


@allow_app.command("remove", help="Forget one saved approval (the command or tool as listed).")
def config_allow_remove(
    rule: Annotated[str, typer.Argument(metavar="RULE", help="The exact text listed.")],
) -> None:
    from countbot_cli.cli.config import allow_remove

    guarded(lambda: allow_remove(rule, sys.stdout))


@config_app.command("untrust", help="Stop applying a trusted ./config.yaml (or PATH).")
def config_untrust(
    path: Annotated[Path | None, typer.Argument(help="The file (default: ./config.yaml).")] = None,
) -> None:
    from countbot_cli.cli.trust import config_untrust as _untrust

    guarded(lambda: _untrust(path, out=sys.stdout))


@config_app.command(
    "check", help="Validate the config, then call the provider (list models, one-token completion)."
)
def config_check(provider: ProviderOpt = None, config: ConfigOpt = None) -> None:
    def go() -> int:
        from dataclasses import replace

        from countbot_cli.app import make_provider
        from countbot_cli.cli.config import config_check as _check

        settings = load_for_command(config, provider=provider, require_model=False)
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
