"""The `sessions` command group: typer declarations only; each command calls its body in
commands/sessions.py or commands/session_search.py (`sessions resume` is in main.py, beside
the chat it starts, and put under this group by cli/groups.py)."""

from __future__ import annotations

import sys
from pathlib import Path
from typing import TYPE_CHECKING, Annotated

import typer

from countbot_cli.cli.options import ConfigOpt, JsonOpt, guarded, hand_down, load_for_command

if TYPE_CHECKING:
    from countbot_cli.conversation.sessions.store import SessionStore

sessions_app = typer.Typer(help="List, show and manage saved conversations.")

IdArg = Annotated[str, typer.Argument(metavar="ID")]


def store_for(ctx: typer.Context, config: str | None) -> SessionStore:
    """The session store of the settings `--config` (here or above) names."""
    from countbot_cli.app import make_store

    return make_store(load_for_command(ctx, config, require_provider=False))


@sessions_app.callback(invoke_without_command=True)
def sessions_default(ctx: typer.Context, config: ConfigOpt = None) -> None:
    """`countbot sessions` alone lists them, like `sessions list`."""
    hand_down(ctx, config)
    if ctx.invoked_subcommand is None:
        from countbot_cli.commands.sessions import sessions_list

        guarded(lambda: sessions_list(store_for(ctx, None), sys.stdout))


@sessions_app.command("list", help="Newest first: id, title, messages, updated, model.")
def sessions_list(
    ctx: typer.Context,
    json_out: JsonOpt = False,
    limit: Annotated[int | None, typer.Option("-n", help="Show at most N sessions.")] = None,
    config: ConfigOpt = None,
) -> None:
    from countbot_cli.commands.sessions import sessions_list as body

    guarded(lambda: body(store_for(ctx, config), sys.stdout, json_out=json_out, limit=limit))


@sessions_app.command(
    "search", help="Find sessions by what was said in them (titles, live and archived messages)."
)
def sessions_search(
    ctx: typer.Context,
    words: Annotated[list[str], typer.Argument(metavar="WORDS...")],
    json_out: JsonOpt = False,
    limit: Annotated[int, typer.Option("-n", help="At most N sessions.")] = 10,
    config: ConfigOpt = None,
) -> None:
    from countbot_cli.commands.session_search import search_command

    guarded(
        lambda: search_command(
            store_for(ctx, config), words, sys.stdout, json_out=json_out, limit=limit
        )
    )


@sessions_app.command("show", help="Print a session's transcript.")
def sessions_show(
    ctx: typer.Context, session_id: IdArg, json_out: JsonOpt = False, config: ConfigOpt = None
) -> None:
    from countbot_cli.commands.sessions import sessions_show as body

    guarded(
        lambda: body(
            store_for(ctx, config),
            session_id,
            sys.stdout,
            json_out=json_out,
            tty=sys.stdout.isatty(),
        )
    )


@sessions_app.command("delete", help="Delete sessions (asks unless --yes).")
def sessions_delete(
    ctx: typer.Context,
    session_ids: Annotated[list[str], typer.Argument(metavar="ID...")],
    yes: Annotated[bool, typer.Option("--yes", "-y", help="Do not ask.")] = False,
    config: ConfigOpt = None,
) -> None:
    from countbot_cli.commands.sessions import sessions_delete as body
    from countbot_cli.ui.questions import yes_no
    from countbot_cli.ui.terminal import isatty

    confirm = yes_no if isatty(sys.stdin) else None
    guarded(
        lambda: body(store_for(ctx, config), session_ids, yes=yes, confirm=confirm, out=sys.stdout)
    )


@sessions_app.command("rename", help="Give a session a new title.")
def sessions_rename(
    ctx: typer.Context,
    session_id: IdArg,
    title: Annotated[list[str], typer.Argument(metavar="TITLE")],
    config: ConfigOpt = None,
) -> None:
    from countbot_cli.commands.sessions import sessions_rename as body

    guarded(lambda: body(store_for(ctx, config), session_id, " ".join(title), out=sys.stdout))


@sessions_app.command(
    "fork", help="Copy a session up to message N into a new session (the original is kept)."
)
def sessions_fork(
    ctx: typer.Context,
    session_id: IdArg,
    at: Annotated[
        int | None,
        typer.Option("--at", metavar="N", help="Keep the first N messages (default: all)."),
    ] = None,
    title: Annotated[str, typer.Option("--title", help="The new session's title.")] = "",
    config: ConfigOpt = None,
) -> None:
    from countbot_cli.commands.sessions import sessions_fork as body

    guarded(lambda: body(store_for(ctx, config), session_id, sys.stdout, at=at, title=title))


@sessions_app.command("export", help="Export a session as markdown or JSON.")
def sessions_export(
    ctx: typer.Context,
    session_id: IdArg,
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
    from countbot_cli.commands.sessions import sessions_export as body
    from countbot_cli.ui.questions import yes_no
    from countbot_cli.ui.terminal import isatty

    guarded(
        lambda: body(
            store_for(ctx, config),
            session_id,
            fmt=fmt,
            output=output,
            out=sys.stdout,
            force=force,
            confirm=yes_no if isatty(sys.stdin) else None,
            overwrite_hint="pass --force to replace it",
        )
    )


@sessions_app.command(
    "summary", help="Show, set or clear a session's summary (sent as session context)."
)
def sessions_summary(
    ctx: typer.Context,
    session_id: IdArg,
    text: Annotated[list[str] | None, typer.Argument(metavar="[TEXT]")] = None,
    clear: Annotated[bool, typer.Option("--clear", help="Remove the summary.")] = False,
    config: ConfigOpt = None,
) -> None:
    from countbot_cli.commands.sessions import sessions_summary as body

    joined = " ".join(text) if text else None
    guarded(lambda: body(store_for(ctx, config), session_id, joined, clear=clear, out=sys.stdout))
