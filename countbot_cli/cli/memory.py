"""The `memory` command group: typer declarations only; each command calls its body in
commands/memory.py, commands/memory_trace.py or commands/memory_tidy.py."""

from __future__ import annotations

import sys
from typing import TYPE_CHECKING, Annotated

import typer

from countbot_cli.cli.options import ConfigOpt, JsonOpt, guarded, load_for_command
from countbot_cli.cli.sessions import store_for

if TYPE_CHECKING:
    from countbot_cli.memory.store import MemoryStore

memory_app = typer.Typer(help="Long-term memory (MEMORY.md).", no_args_is_help=True)

NumberArg = Annotated[int, typer.Argument(metavar="N")]


def memory_for(ctx: typer.Context, config: str | None) -> MemoryStore:
    """MEMORY.md of the settings `--config` (here or above) names."""
    from countbot_cli.memory.store import MemoryStore

    return MemoryStore(load_for_command(ctx, config, require_provider=False).memory.file)


@memory_app.command(
    "show", help="Print MEMORY.md entries, numbered 1..N, pinned and muted ones marked."
)
def memory_show(
    ctx: typer.Context,
    tail: Annotated[int | None, typer.Option("--tail", help="Only the last N entries.")] = None,
    json_out: JsonOpt = False,
    config: ConfigOpt = None,
) -> None:
    from countbot_cli.commands.memory import memory_show as text_body
    from countbot_cli.commands.memory_trace import memory_show_json as json_body

    body = json_body if json_out else text_body
    guarded(lambda: body(memory_for(ctx, config), sys.stdout, tail=tail))


@memory_app.command("why", help="Print the conversation messages behind memory entry N.")
def memory_why(ctx: typer.Context, line: NumberArg, config: ConfigOpt = None) -> None:
    from countbot_cli.commands.memory_trace import memory_why as body

    guarded(lambda: body(memory_for(ctx, config), store_for(ctx, config), line, sys.stdout))


@memory_app.command(
    "edit", help="Open MEMORY.md in $EDITOR, at entry N if given (other writers wait meanwhile)."
)
def memory_edit(
    ctx: typer.Context,
    number: Annotated[int | None, typer.Argument(metavar="[N]")] = None,
    config: ConfigOpt = None,
) -> None:
    from countbot_cli.commands.memory_trace import memory_edit as body

    guarded(lambda: body(memory_for(ctx, config), sys.stdout, number=number))


@memory_app.command(
    "search", help="Search long-term memory (all words first, then more matches, newer first)."
)
def memory_search(
    ctx: typer.Context,
    words: Annotated[list[str], typer.Argument(metavar="WORDS...")],
    limit: Annotated[int, typer.Option("-n", help="At most N results.")] = 10,
    config: ConfigOpt = None,
) -> None:
    from countbot_cli.commands.memory import memory_search as body

    guarded(lambda: body(memory_for(ctx, config), words, sys.stdout, limit=limit))


def _mark(ctx: typer.Context, verb: str, line: int, config: str | None) -> None:
    from countbot_cli.commands.memory import memory_mark

    guarded(lambda: memory_mark(memory_for(ctx, config), verb, line, sys.stdout))


@memory_app.command("pin", help="Send memory entry N with every request (in the system prompt).")
def memory_pin(ctx: typer.Context, line: NumberArg, config: ConfigOpt = None) -> None:
    _mark(ctx, "pin", line, config)


@memory_app.command("unpin", help="Stop sending memory entry N with every request.")
def memory_unpin(ctx: typer.Context, line: NumberArg, config: ConfigOpt = None) -> None:
    _mark(ctx, "unpin", line, config)


@memory_app.command("mute", help="Never recall memory entry N into a request.")
def memory_mute(ctx: typer.Context, line: NumberArg, config: ConfigOpt = None) -> None:
    _mark(ctx, "mute", line, config)


@memory_app.command("unmute", help="Let memory entry N be recalled again.")
def memory_unmute(ctx: typer.Context, line: NumberArg, config: ConfigOpt = None) -> None:
    _mark(ctx, "unmute", line, config)


@memory_app.command(
    "tidy",
    help="Propose merges, supersessions and drops of MEMORY.md lines as a diff; apply the ones "
    "you answer yes to (the lines taken out go to MEMORY.archive.jsonl). Without a terminal "
    "it only prints them.",
)
def memory_tidy(
    ctx: typer.Context,
    no_model: Annotated[
        bool, typer.Option("--no-model", help="Only the proposals found without the model.")
    ] = False,
    config: ConfigOpt = None,
) -> None:
    from countbot_cli.commands.memory_tidy import run_tidy
    from countbot_cli.ui.terminal import isatty

    on_terminal = isatty(sys.stdin) and isatty(sys.stdout)
    guarded(
        lambda: run_tidy(
            load_for_command(ctx, config, require_provider=False),
            sys.stdout,
            no_model=no_model,
            on_terminal=on_terminal,
        )
    )


@memory_app.command("add", help="Add an entry to long-term memory.")
def memory_add(
    ctx: typer.Context,
    text: Annotated[list[str], typer.Argument(metavar="TEXT")],
    config: ConfigOpt = None,
) -> None:
    from countbot_cli.commands.memory import memory_add as body

    guarded(lambda: body(memory_for(ctx, config), " ".join(text), sys.stdout))


@memory_app.command("delete", help="Delete entries by number (see `memory show`).")
def memory_delete(
    ctx: typer.Context,
    lines: Annotated[list[int], typer.Argument(metavar="N...")],
    config: ConfigOpt = None,
) -> None:
    from countbot_cli.commands.memory import memory_delete as body

    guarded(lambda: body(memory_for(ctx, config), lines, sys.stdout))
