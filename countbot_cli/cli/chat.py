"""Composition of the interactive chat: `countbot`, `countbot chat`, `countbot sessions resume ID`.

The REPL's part of the composition root: settings, store, session and an engine factory (a new
engine when `/model` switches) built with app.py's functions, then `Repl.run()`. The REPL itself
(repl/) never imports app.py.
"""

from __future__ import annotations

import sys
from dataclasses import dataclass, replace
from typing import TYPE_CHECKING, TextIO, cast

from countbot_cli.errors import UsageError
from countbot_cli.ui.terminal import isatty

if TYPE_CHECKING:
    from countbot_cli.config.settings import Settings
    from countbot_cli.conversation.engine import Engine
    from countbot_cli.repl.loop import Repl
    from countbot_cli.tools.approval import Confirmer


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


def run_chat(opts: ChatOptions, *, resume: str | None = None) -> int:
    """Start the REPL on a new conversation, `-s ID`, `-c` (the latest) or `resume`."""
    import prompt_toolkit  # noqa: F401  (first: the prompt is what the user waits for)

    from countbot_cli import app
    from countbot_cli.repl.loop import Repl

    if opts.session and opts.cont:
        raise UsageError("use either -s/--session ID or -c/--continue, not both")
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
    )
    settings = app.load_settings(common)
    store = app.make_store(settings)
    session, is_new = app.open_session(store, settings, ref=resume or opts.session, cont=opts.cont)
    side = _SideStream()

    def engine_for(model: str | None, confirmer: Confirmer | None) -> Engine:
        s = settings if model is None else with_model(settings, model)
        return app.build_engine(
            s,
            app.make_provider(s, cast(TextIO, side)),
            store,
            tools_enabled=not opts.no_tools,
            yes=opts.yes,
            confirmer=confirmer,
        )

    from countbot_cli.ui.confirm import TerminalConfirmer

    repl = Repl(
        settings=settings,
        store=store,
        engine_factory=engine_for,
        session=session,
        is_new=is_new,
        confirmer=TerminalConfirmer(sys.stdin, sys.stderr),
    )
    side.repl = repl
    return repl.run()


def with_model(settings: Settings, model: str) -> Settings:
    """The same settings on another model of the same provider (for /model)."""
    return replace(settings, provider=replace(settings.provider, model=model))


class _SideStream:
    """stderr for the provider's notices (retries): written through the turn's view, if any, so
    the spinner's line is erased first."""

    def __init__(self) -> None:
        self.repl: Repl | None = None

    def write(self, text: str) -> int:
        view = self.repl.view if self.repl is not None else None
        if view is not None:
            view.side_note(text)
        else:
            sys.stderr.write(text)
        return len(text)

    def flush(self) -> None:
        sys.stderr.flush()
