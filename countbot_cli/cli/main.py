"""The typer app: parses flags and calls the command bodies (commands/). No logic here.

Only typer is imported at module level; each command imports what it needs when it runs, so
`countbot --help` stays fast.

The annotations here are evaluated when the module runs, not postponed (no `from __future__
import annotations`, unlike the rest of the package): typer reads the parameters' annotations
of the command that runs at every start, and postponed each is a string it compiles and
evaluates then (about 3 % of an `ask --plain`); evaluated, they are bytecode in the .pyc
(tests/cli/test_ask.py checks).
"""

import copy
import sys
from pathlib import Path
from typing import Annotated, Any

import typer

from countbot_cli.cli.groups import GROUPS, add_groups
from countbot_cli.cli.options import (
    ConfigOpt,
    ModelOpt,
    ProviderOpt,
    SystemOpt,
    config_of,
    guarded,
    hand_down,
)
from countbot_cli.errors import EXIT_CODES_HELP

HELP = f"""countbot: chat with OpenAI-compatible language models from the terminal.

\b
Examples:
  countbot                          interactive chat (/help lists its commands)
  countbot -c                       continue the latest conversation in the chat
  countbot "what is a monad?"       the same as `countbot ask "what is a monad?"`
  git diff | countbot "write a commit message"
  countbot -- sessions              a prompt that is a command's name: after --
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
# the groups (sessions, memory, config, mcp) are put under it when needed: cli/groups.py

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
PickOpt = Annotated[
    bool,
    typer.Option("--pick", help="Choose the session to resume in a picker (on a terminal)."),
]
ContextWindowOpt = Annotated[
    int | None,
    typer.Option(
        "--context-window",
        min=1,
        metavar="TOKENS",
        help="The model's context window, for a model countbot does not know "
        "(also COUNTBOT_CONTEXT_WINDOW, or context_window in the config).",
    ),
]
RoleOpt = Annotated[
    str | None,
    typer.Option(
        "--role", "-r", help="Add roles/NAME.md's text to the system prompt (see `roles`)."
    ),
]
ChatAttachOpt = Annotated[
    list[str] | None,
    typer.Option(
        "--attach",
        "-a",
        metavar="PATH|URL",
        help="Attach a file, image, PDF or http(s) page to the first message (repeatable); "
        "/attach in the chat attaches more.",
    ),
]
OptionOpt = Annotated[
    list[str] | None,
    typer.Option(
        "--option",
        "-o",
        metavar="KEY VALUE",
        help="A model option for this call (repeatable): temperature, top_p, max_tokens, seed, "
        "reasoning_effort, or any other request field.",
    ),
]


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
    role: RoleOpt = None,
    option: OptionOpt = None,
    attach: ChatAttachOpt = None,
    pick: PickOpt = False,
) -> None:
    """With no command: the interactive chat (the same as `countbot chat`)."""
    if version:
        from countbot_cli import __version__

        typer.echo(f"countbot {__version__}")
        raise typer.Exit(0)
    hand_down(ctx, config)
    chat_flags = (
        session or cont or model or provider or system or yes or no_tools or role or option
    ) or (attach or pick)
    if ctx.invoked_subcommand is None:
        _run_chat(
            ctx,
            config,
            session=session,
            cont=cont,
            model=model,
            provider=provider,
            system=system,
            yes=yes,
            no_tools=no_tools,
            role=role,
            option=option,
            attach=attach,
            pick=pick,
        )
    elif chat_flags:
        sys.stderr.write(
            "countbot: error: -s/-c/-m/-p/-r/-o/-a/--system/--yes/--no-tools/--pick before a "
            "command only "
            "apply "
            f"to the chat; put them after `{ctx.invoked_subcommand}`\n"
        )
        raise typer.Exit(2)


def _run_chat(
    ctx: typer.Context,
    config: str | None,
    *,
    resume: str | None = None,
    role: str | None = None,
    option: list[str] | None = None,
    **flags: Any,
) -> None:
    def go() -> int:
        from countbot_cli.commands.roles import choose
        from countbot_cli.repl.chat import ChatOptions, run_chat

        chosen = choose(role, flags.pop("system", None), flags.pop("model", None), option)
        opts = ChatOptions(
            config=config_of(ctx, config),
            system=chosen.system,
            model=chosen.model,
            options=chosen.options,
            **flags,
        )
        return run_chat(opts, resume=resume)

    guarded(go)


@app.command(
    help="The interactive chat (also what `countbot` alone starts). /help inside lists the commands."
)
def chat(
    ctx: typer.Context,
    session: SessionOpt = None,
    cont: ContinueOpt = False,
    model: ModelOpt = None,
    provider: ProviderOpt = None,
    system: SystemOpt = None,
    yes: YesOpt = False,
    no_tools: NoToolsOpt = False,
    role: RoleOpt = None,
    option: OptionOpt = None,
    attach: ChatAttachOpt = None,
    context_window: ContextWindowOpt = None,
    pick: PickOpt = False,
    config: ConfigOpt = None,
) -> None:
    _run_chat(
        ctx,
        config,
        context_window=context_window,
        pick=pick,
        session=session,
        cont=cont,
        model=model,
        provider=provider,
        system=system,
        yes=yes,
        no_tools=no_tools,
        role=role,
        option=option,
        attach=attach,
    )


@app.command(
    help="Ask one question, print the answer, exit. Piped stdin (up to 1 MB) is appended "
    "to the prompt.",
    epilog="\b\n" + EXIT_CODES_HELP,
)
def ask(
    ctx: typer.Context,
    prompt: Annotated[
        list[str] | None, typer.Argument(help="The question.", show_default=False)
    ] = None,
    session: SessionOpt = None,
    cont: ContinueOpt = False,
    no_save: Annotated[
        bool, typer.Option("--no-save", help="Do not save this conversation.")
    ] = False,
    model: ModelOpt = None,
    provider: ProviderOpt = None,
    system: SystemOpt = None,
    file: Annotated[
        list[Path] | None,
        typer.Option("--file", "-f", help="The same as -a, for files (repeatable)."),
    ] = None,
    attach: Annotated[
        list[str] | None,
        typer.Option(
            "--attach",
            "-a",
            metavar="PATH|URL",
            help="Attach a text file (up to 1 MB), an image (png, jpeg, gif, webp; scaled "
            "down past ~2 MP), a PDF (its text, first 50 pages) or an http(s) page (its text) "
            "(repeatable).",
        ),
    ] = None,
    no_stream: Annotated[
        bool, typer.Option("--no-stream", help="Wait for the whole answer.")
    ] = False,
    json_out: Annotated[
        bool,
        typer.Option(
            "--json",
            help="Print one JSON object: session_id, model, answer, usage, tool_calls, "
            "finish_reason, memory_used, memory_written.",
        ),
    ] = False,
    plain: Annotated[
        bool,
        typer.Option(
            "--plain",
            help="Raw text, no markdown rendering (automatic when stdout is not a terminal).",
        ),
    ] = False,
    jsonl: Annotated[
        bool,
        typer.Option(
            "--jsonl",
            help="Print one JSON object a line as the turn happens (text, reasoning, tool_call, "
            "tool_result, notice, usage, error; last: end with the answer, status, exit_code).",
        ),
    ] = False,
    extract: Annotated[
        bool,
        typer.Option(
            "--extract",
            "-x",
            help="Print only the code of the answer: its first fenced code block, raw "
            "(none: nothing printed, exit 7).",
        ),
    ] = False,
    extract_all: Annotated[
        bool,
        typer.Option(
            "--extract-all", help="Like -x, with every fenced code block (a blank line between)."
        ),
    ] = False,
    fallback: Annotated[
        list[str] | None,
        typer.Option(
            "--fallback",
            metavar="NAME",
            help="When the provider cannot answer (network, timeout, 5xx, 429, quota), answer "
            "with provider NAME (`local`: the embedded model); repeatable, in order; replaces "
            "the config's `fallback:` chain.",
        ),
    ] = None,
    template: Annotated[
        str | None,
        typer.Option(
            "--template",
            "-t",
            metavar="NAME",
            help="Ask templates/NAME.md, its $ARGUMENTS / $1…$9 filled from the prompt words.",
        ),
    ] = None,
    schema: Annotated[
        str | None,
        typer.Option(
            "--schema",
            metavar="FILE|JSON",
            help="Answer with one JSON value conforming to this JSON schema (a file, or the "
            "schema itself); checked, repaired once, else exit 7. Prints the value.",
        ),
    ] = None,
    no_memory: Annotated[
        bool,
        typer.Option(
            "--no-memory", help="Send nothing from MEMORY.md and write nothing to it this call."
        ),
    ] = False,
    remember: Annotated[
        bool, typer.Option("--remember", help="Distil this exchange into MEMORY.md now.")
    ] = False,
    yes: YesOpt = False,
    no_tools: NoToolsOpt = False,
    role: RoleOpt = None,
    option: OptionOpt = None,
    context_window: ContextWindowOpt = None,
    config: ConfigOpt = None,
) -> None:
    def go() -> int:
        from countbot_cli.commands.ask import AskOptions, run_ask
        from countbot_cli.commands.roles import choose

        chosen = choose(role, system, model, option, list(prompt or []), template)
        opts = AskOptions(
            config=config_of(ctx, config),
            provider=provider,
            model=chosen.model,
            system=chosen.system,
            options=chosen.options,
            prompt=chosen.prompt,
            session=session,
            cont=cont,
            no_save=no_save,
            files=list(file or []),
            attach=list(attach or []),
            no_stream=no_stream,
            json_out=json_out,
            plain=plain,
            yes=yes,
            no_tools=no_tools,
            extract="all" if extract_all else "first" if extract else None,
            jsonl=jsonl,
            schema=schema,
            context_window=context_window,
            fallback=list(fallback or []),
            no_memory=no_memory,
            remember=remember,
        )
        return run_ask(opts)

    guarded(go)


# `sessions resume`: put under the `sessions` group by cli/groups.py
def sessions_resume(
    ctx: typer.Context,
    session_id: Annotated[str | None, typer.Argument(metavar="[ID]")] = None,
    model: ModelOpt = None,
    provider: ProviderOpt = None,
    system: SystemOpt = None,
    yes: YesOpt = False,
    no_tools: NoToolsOpt = False,
    config: ConfigOpt = None,
) -> None:
    _run_chat(
        ctx,
        config,
        resume=session_id,
        pick=session_id is None,
        model=model,
        provider=provider,
        system=system,
        yes=yes,
        no_tools=no_tools,
    )


@app.command(help="List the roles (<config folder>/roles/NAME.md): name and first line.")
def roles() -> None:
    from countbot_cli.commands.roles import roles_list

    guarded(lambda: roles_list(sys.stdout, sys.stderr))


@app.command(
    help="Print a shell completion script (commands, options, session ids, roles). "
    'bash: eval "$(countbot completion bash)" in ~/.bashrc; zsh: the same in ~/.zshrc; '
    "fish: countbot completion fish > ~/.config/fish/completions/countbot.fish"
)
def completion(shell: Annotated[str, typer.Argument(metavar="bash|zsh|fish")]) -> None:
    from countbot_cli.commands.complete import completion as body

    guarded(lambda: body(shell, sys.stdout))


def command_names() -> list[str]:
    """The names typer gives the root's commands and groups (hidden ones included)."""
    return [_name(c) for c in app.registered_commands] + list(GROUPS)


def whole_app() -> typer.Typer:
    """The root with every command and group under it (the groups imported now, once)."""
    if not app.registered_groups:
        add_groups(app, GROUPS, sessions_resume)
    return app


def _name(command: typer.models.CommandInfo) -> str:
    callback = command.callback.__name__ if command.callback else ""
    return (command.name or callback).replace("_", "-")


def run(argv: list[str]) -> None:
    from countbot_cli.cli.routing import command_of, join_option_pairs, route
    from countbot_cli.interrupts import stop_on_termination

    if argv[:1] == ["__complete"]:  # the shell asking for candidates (commands/complete.py)
        import typer.main

        from countbot_cli.commands.complete import run_complete

        *before, current = argv[1:] or [""]
        if before:  # the words as they will run: `countbot -t <Tab>` is `countbot ask -t <Tab>`
            before = route(before, command_names(), stdin_tty=True)
        root = typer.main.get_command(whole_app())
        raise SystemExit(run_complete(root, [*before, current]))
    stop_on_termination()  # done by __main__ already; again for a caller of run()
    names = command_names()
    argv = join_option_pairs(route(argv, names, stdin_tty=_stdin_is_tty()))
    _app_for(command_of(argv, names))(args=argv, prog_name="countbot")


def _app_for(command: str | None) -> typer.Typer:
    """The root with only `command` under it: typer turns every command it holds into click's
    at each start (about 25 ms for all of countbot's), and one command needs no other. The
    whole app when no command runs (the root's --help lists them all; the chat)."""
    if command is None:
        return whole_app()
    narrowed = copy.copy(app)
    narrowed.registered_commands = [c for c in app.registered_commands if _name(c) == command]
    narrowed.registered_groups = []
    add_groups(narrowed, [command], sessions_resume)
    return narrowed


def _stdin_is_tty() -> bool:
    try:
        return sys.stdin is not None and sys.stdin.isatty()
    except (AttributeError, ValueError):
        return False
