"""The body of the interactive chat: `countbot`, `countbot chat`, `countbot sessions resume [ID]`.

The options checked (a terminal is needed), the settings loaded and `-a` read, the session
picked when asked (`--pick`), the conversation opened the way `ask` opens it
(`app.open_conversation`) with the approval prompt paused around the turn on screen, then
`Repl.run()`. The chat's body is the REPL's own layer: it builds the turn's screen the
approval prompt and the REPL share; the REPL itself (loop.py) is handed the conversation.
"""

from __future__ import annotations

import sys
from dataclasses import dataclass
from typing import TextIO, cast

import prompt_toolkit  # noqa: F401  (first: the prompt is what the user waits for)

from countbot_cli import app
from countbot_cli.conversation.input.attachments import PendingAttachments
from countbot_cli.errors import UsageError
from countbot_cli.repl.loop import Repl
from countbot_cli.repl.view import PausingConfirmer, TurnOnScreen
from countbot_cli.ui.confirm import TerminalConfirmer
from countbot_cli.ui.session_picker import pick_session
from countbot_cli.ui.terminal import isatty


@dataclass
class ChatOptions:
    config: str | None = None
    provider: str | None = None
    model: str | None = None
    system: str | None = None
    session: str | None = None
    cont: bool = False
    yes: bool = False
    no_tools: bool = False
    options: dict[str, object] | None = None  # -o KEY VALUE (config/options.py)
    attach: list[str] | None = None  # -a PATH|URL: sent with the first message
    context_window: int | None = None  # --context-window N
    pick: bool = False  # --pick, `sessions resume` with no id: the session picker first


def run_chat(opts: ChatOptions, *, resume: str | None = None) -> int:
    """Start the REPL on a new conversation, `-s ID`, `-c` (the latest) or `resume`."""
    _check(opts)
    common = app.CommonOptions(
        config=opts.config,
        provider=opts.provider,
        model=opts.model,
        system=opts.system,
        options=dict(opts.options or {}),
        context_window=opts.context_window,
    )
    settings = app.load_settings(common)
    pending = PendingAttachments()  # each read and checked now: a refusal is exit 2
    for ref in opts.attach or ():
        pending.add(ref, settings, settings.provider, flag="-a")
    screen = TurnOnScreen()  # the turn in progress: the approval prompt and notices draw around it
    side = cast(TextIO, _SideStream(screen))
    store = app.make_store(settings, side)
    opening = app.Opening(
        session=resume or opts.session, cont=opts.cont, tools=not opts.no_tools, yes=opts.yes
    )
    if opts.pick:
        picked = pick_session(store)
        if picked is None:
            sys.stdout.write("Nothing resumed.\n")
            return 0
        opening = opening._replace(session=picked)
    conversation = app.open_conversation(
        settings,
        opening,
        err=side,
        confirmer=PausingConfirmer(TerminalConfirmer(sys.stdin, sys.stderr), screen),
        store=store,
    )
    return Repl(conversation=conversation, screen=screen, attachments=pending).run()


def _check(opts: ChatOptions) -> None:
    """Options that do not go together, and the terminal the chat needs: UsageError."""
    if opts.session and opts.cont:
        raise UsageError("use either -s/--session ID or -c/--continue, not both")
    if opts.pick and opts.session:
        raise UsageError("use either -s/--session ID or --pick, not both")
    if not (isatty(sys.stdin) and isatty(sys.stdout)):
        raise UsageError(
            "the interactive chat needs a terminal",
            hint='in pipes and scripts use `countbot ask "…"`',
        )


class _SideStream:
    """stderr for the provider's notices (retries): written through the turn's view, if any, so
    the spinner's line is erased first. Without `ask`'s "countbot: " prefix: the chat's own lines
    (its "error: …" after a failed turn, its notes) carry none, and one screen has one style."""

    def __init__(self, screen: TurnOnScreen) -> None:
        self.screen = screen

    def write(self, text: str) -> int:
        length = len(text)
        text = "\n".join(ln.removeprefix("countbot: ") for ln in text.split("\n"))
        view = self.screen.view
        if view is not None:
            view.side_note(text)
        else:
            sys.stderr.write(text)
        return length

    def flush(self) -> None:
        sys.stderr.flush()
