"""The body of `countbot ask` (and of the bare prompt, `countbot "question"`): one question,
its answer printed, the exit code scripts read.

The question is put together before the config is read ("nothing to ask" first), the settings
shaped for this one turn (`--schema`, no automatic-memory line for a one-off ask, `--no-memory`
/ `--remember`), the conversation opened the way the chat opens it (`app.open_conversation`),
the turn run under the view the output options choose, and what it left reported
(commands/ask_report.py).
"""

from __future__ import annotations

import sys
from collections.abc import Callable, Mapping, Sequence
from dataclasses import replace
from pathlib import Path
from typing import TYPE_CHECKING, Any, NamedTuple, TextIO

from countbot_cli.app import (
    NO_OPTIONS,
    CommonOptions,
    Opening,
    load_settings,
    open_conversation,
)
from countbot_cli.commands.ask_report import report, script_status
from countbot_cli.config.fallback import check_names
from countbot_cli.config.providers import ProviderConfig
from countbot_cli.conversation.input.prompt_input import compose_prompt, read_stdin
from countbot_cli.conversation.server_window import settle_late_context_windows
from countbot_cli.conversation.structured import (
    Structured,
    ask_structured,
    load_schema,
    schema_settings,
)
from countbot_cli.errors import UsageError
from countbot_cli.memory.report import Probe
from countbot_cli.tools.approval import Confirmer
from countbot_cli.ui.terminal import isatty
from countbot_cli.ui.turnview import JsonlView, JsonView, MarkdownView, PlainView

if TYPE_CHECKING:
    from countbot_cli.conversation.input.attachments import Attached


class AskOptions(NamedTuple):
    """`ask`'s flags. A NamedTuple, not a dataclass: defined at every `ask` (DEVELOPING.md);
    its first six fields are CommonOptions' (`common()` hands them on)."""

    config: str | None = None
    provider: str | None = None
    model: str | None = None
    system: str | None = None
    options: Mapping[str, Any] = NO_OPTIONS  # -o KEY VALUE (config/options.py)
    context_window: int | None = None  # --context-window N
    prompt: Sequence[str] = ()
    session: str | None = None
    cont: bool = False
    no_save: bool = False
    files: Sequence[Path] = ()
    attach: Sequence[str] = ()  # -a PATH|URL, after the -f files
    no_stream: bool = False
    json_out: bool = False
    plain: bool = False
    yes: bool = False
    no_tools: bool = False
    extract: str | None = None  # -x "first" / --extract-all "all": print only the code
    jsonl: bool = False  # --jsonl: one JSON object a line as the turn happens
    fallback: Sequence[str] = ()  # --fallback NAME: the chain for this ask
    schema: str | None = None  # --schema FILE|JSON (conversation/structured.py)
    no_memory: bool = False  # --no-memory: nothing sent from or written to memory
    remember: bool = False  # --remember: this exchange distilled into memory now

    def common(self) -> CommonOptions:
        """The options that choose the settings."""
        return CommonOptions(
            config=self.config,
            provider=self.provider,
            model=self.model,
            system=self.system,
            options=self.options,
            context_window=self.context_window,
        )


def run_ask(
    opts: AskOptions,
    *,
    stdin: TextIO | None = None,
    out: TextIO | None = None,
    err: TextIO | None = None,
) -> int:
    out = out or sys.stdout
    err = err or sys.stderr
    _check_ask_options(opts)
    schema = load_schema(opts.schema) if opts.schema is not None else None
    stdin = stdin if stdin is not None else sys.stdin
    stdin_text = read_stdin(stdin)
    refs = [("-f", str(p)) for p in opts.files] + [("-a", ref) for ref in opts.attach]
    # "nothing to ask" is said before the config is read
    text = compose_prompt(opts.prompt, stdin_text) if not refs else ""
    attached: Attached | None = None
    settings = load_settings(opts.common(), err=err)
    if schema is not None:  # response_format, or an instruction
        settings = schema_settings(settings, schema)
    if not (opts.session or opts.cont):  # a one-off ask leaves no automatic-memory line
        settings = replace(settings, memory=settings.memory._replace(auto_memory=False))
    settings, probe = Probe.start(settings, no_memory=opts.no_memory, remember=opts.remember)
    if refs:  # -f/-a: every attachment read and checked before anything is sent
        from countbot_cli.conversation.input.attachments import compose_message  # -f/-a only

        text, attached = compose_message(opts.prompt, stdin_text, refs, settings)
    views: list[PlainView] = []  # the view, made once the provider says which model answers
    conversation = open_conversation(
        settings,
        _opening(opts, settings.providers),
        err=err,
        confirmer=_ask_confirmer(stdin, err, pause=lambda: views[0].pause()),
    )
    provider = conversation.provider
    plain = opts.plain or not isatty(out) or opts.json_out or opts.jsonl
    view = _make_view(opts, out, err, plain=plain, model=provider.model)
    views.append(view)
    try:
        # the answer is settled on screen, then memory upkeep runs under a status line
        if schema is None:
            shaped = Structured(conversation.send(text, view, attached=attached))
        else:
            shaped = ask_structured(conversation, text, view, schema, attached)
        probe.after(conversation, shaped.result, view)  # --remember; result.memory
    finally:
        conversation.close()
        settle_late_context_windows()  # one asked beside the request is cached for the next ask
    code = report(opts, shaped, provider, out, err)
    if isinstance(view, JsonlView):
        view.end(shaped.result, code, script_status(shaped, code), parsed=shaped.value)
    return code


def _opening(opts: AskOptions, providers: Mapping[str, ProviderConfig]) -> Opening:
    """The session and what the conversation may do, from ask's flags (`--fallback` checked)."""
    return Opening(
        session=opts.session,
        cont=opts.cont,
        tools=not opts.no_tools,
        yes=opts.yes,
        save=not opts.no_save,
        streaming=not opts.no_stream,
        fallback=check_names(opts.fallback, providers) if opts.fallback else None,
    )


def _check_ask_options(opts: AskOptions) -> None:
    """Options that do not go together: UsageError before anything is read."""
    if opts.session is not None and not opts.session.strip():
        raise UsageError("-s/--session needs a session id (a prefix, or 'latest')")
    if opts.session and opts.cont:
        raise UsageError("use either -s/--session ID or -c/--continue, not both")
    if sum(map(bool, (opts.extract, opts.json_out, opts.jsonl))) > 1:
        raise UsageError("use only one of -x/--extract, --json and --jsonl")
    if opts.schema is not None and opts.extract:
        raise UsageError("--schema prints the JSON value itself; it cannot be used with -x")
    if opts.no_save and (opts.session or opts.cont):
        raise UsageError(
            "--no-save starts a throwaway conversation; it cannot be used with -s or -c"
        )


def _ask_confirmer(stdin: TextIO, err: TextIO, pause: Callable[[], None]) -> Confirmer | None:
    """The approval prompt when a person is there to answer it: stdin and stderr (where the
    prompt is drawn) are terminals. Otherwise None: calls that need approval are denied with a
    one-line notice (SPEC §6, non-interactive)."""
    if not (isatty(stdin) and isatty(err)):
        return None
    from countbot_cli.ui.confirm import TerminalConfirmer  # on a terminal only (start-up)

    return TerminalConfirmer(stdin, err, before_prompt=pause)


def _make_view(opts: AskOptions, out: TextIO, err: TextIO, *, plain: bool, model: str) -> PlainView:
    waiting = f"… waiting for {model}"
    if opts.jsonl:
        return JsonlView(out, err)
    if opts.json_out or opts.extract or opts.schema is not None:
        return JsonView(err)  # -x and --schema print what they found, at the end
    if plain:
        return PlainView(out, err, waiting=waiting)
    return MarkdownView(out, err, waiting=waiting)
