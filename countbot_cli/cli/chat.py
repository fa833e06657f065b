"""Composition of the interactive chat: `countbot`, `countbot chat`, `countbot sessions resume ID`.

The REPL's part of the composition root: settings, store, session and the conversation (a new
engine when `/model` switches) built with app.py's functions, the approval prompt paused around
the turn on screen, then `Repl.run()`. The REPL itself (repl/) never imports app.py.
"""

from __future__ import annotations

import sys
from dataclasses import dataclass
from typing import TYPE_CHECKING, TextIO, cast

from countbot_cli.errors import UsageError
from countbot_cli.ui.terminal import isatty

if TYPE_CHECKING:
    from countbot_cli.repl.view import TurnOnScreen


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
    import prompt_toolkit  # noqa: F401  (first: the prompt is what the user waits for)

    from countbot_cli import app
    from countbot_cli.conversation.chat import open_session
    from countbot_cli.conversation.input.attachments import PendingAttachments
    from countbot_cli.conversation.server_window import fitted_to_server
    from countbot_cli.repl.loop import Repl
    from countbot_cli.repl.view import PausingConfirmer, TurnOnScreen
    from countbot_cli.ui.confirm import TerminalConfirmer

    if opts.session and opts.cont:
        raise UsageError("use either -s/--session ID or -c/--continue, not both")
    if opts.pick and opts.session:
        raise UsageError("use either -s/--session ID or --pick, not both")
    if not (isatty(sys.stdin) and isatty(sys.stdout)):
        raise UsageError(
            "the interactive chat needs a terminal",
            hint='in pipes and scripts use `countbot ask "…"`',
        )
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
    store = app.make_store(settings)
    if opts.pick:
        from countbot_cli.ui.session_picker import pick_session

        resume = pick_session(store)
        if resume is None:
            sys.stdout.write("Nothing resumed.\n")
            return 0
    session, is_new = open_session(store, settings, ref=resume or opts.session, cont=opts.cont)
    settings = fitted_to_server(settings, session if is_new else None)  # asked once, cached
    screen = TurnOnScreen()  # the turn in progress: the approval prompt and notices draw around it
    side = cast(TextIO, _SideStream(screen))
    conversation = app.build_conversation(
        settings,
        store,
        provider_for=lambda s: app.make_provider(s, side),
        tools_enabled=not opts.no_tools,
        yes=opts.yes,
        confirmer=PausingConfirmer(TerminalConfirmer(sys.stdin, sys.stderr), screen),
        session=session,
        is_new=is_new,
    )
    return Repl(conversation=conversation, screen=screen, attachments=pending).run()


class _SideStream:
    """stderr for the provider's notices (retries): written through the turn's view, if any, so
    the spinner's line is erased first."""

    def __init__(self, screen: TurnOnScreen) -> None:
        self.screen = screen

    def write(self, text: str) -> int:
        view = self.screen.view
        if view is not None:
            view.side_note(text)
        else:
            sys.stderr.write(text)
        return len(text)

    def flush(self) -> None:
        sys.stderr.flush()
