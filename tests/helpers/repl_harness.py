"""The REPL in-process, for the tests in tests/repl/: keys, turns, Ctrl-C, on a real engine
against the loopback FakeServer (prompt-toolkit pipe input + DummyOutput, rich consoles on
StringIO).

`Harness.run(steps)` runs `Repl.run()` in the main thread (Ctrl-C is a real SIGINT there) while
a feeder thread works through the steps: a string is typed as keys once the next prompt is
shown; a callable is called with the harness at once (to wait for output, send SIGINT, ...).
After the last step Ctrl-D quits; a watchdog closes the input if the REPL does not end in time.
"""

from __future__ import annotations

import io
import os
import signal
import threading
import time
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

import fakeserver as fs
from cbenv import make_cb
from prompt_toolkit.input import create_pipe_input
from prompt_toolkit.output import DummyOutput
from rich.console import Console

from countbot_cli import app
from countbot_cli.config.settings import Settings, load_settings
from countbot_cli.conversation.chat import Conversation
from countbot_cli.conversation.sessions.session import Session
from countbot_cli.repl.loop import Repl
from countbot_cli.repl.view import PausingConfirmer, TurnOnScreen
from countbot_cli.tools.approval import Confirmer
from countbot_cli.ui.confirm import TerminalConfirmer

Step = str | Callable[["Harness"], None]


class Harness:
    def __init__(
        self, tmp_path: Path, server: fs.FakeServer, *, tools: bool = False, **config: Any
    ) -> None:
        if tools:
            config.setdefault("tools", {"enabled": True, "workspace": str(tmp_path / "work")})
        self.tmp_path = tmp_path
        self.server = server
        self.cb = make_cb(tmp_path, server.base_url, **config)
        self.settings: Settings = load_settings(
            config_path=str(self.cb.config_file), env=self.cb.env, cwd=self.cb.work
        )
        self.store = app.make_store(self.settings, io.StringIO())
        self.out = io.StringIO()
        self.err = io.StringIO()
        self.console = Console(
            file=self.out, width=100, color_system=None, highlight=False, emoji=False
        )
        self.side = Console(
            file=self.err, width=100, color_system=None, highlight=False, emoji=False
        )
        self.history = tmp_path / "history"
        self.repl: Repl | None = None
        self.output = DummyOutput()

    def conversation(
        self,
        screen: TurnOnScreen,
        *,
        confirmer: Confirmer | None = None,
        session: Session | None = None,
        is_new: bool = True,
    ) -> Conversation:
        """The conversation as repl/chat.py builds it (the approval prompt paused around the turn
        on screen), with the providers' notices in a buffer."""
        return app.build_conversation(
            self.settings,
            self.store,
            provider_for=lambda s: app.make_provider(s, io.StringIO()),
            tools_enabled=True,
            yes=False,
            confirmer=PausingConfirmer(confirmer, screen) if confirmer is not None else None,
            session=session,
            is_new=is_new,
        )

    def make(
        self,
        *,
        confirmer: Confirmer | None = None,
        session: Session | None = None,
        is_new: bool = True,
        **kw: Any,
    ) -> Repl:
        kw.setdefault("history_path", self.history)
        kw.setdefault("preload", False)
        kw.setdefault("console", self.console)
        kw.setdefault("side", self.side)
        kw.setdefault("output", self.output)
        screen = TurnOnScreen()
        conversation = self.conversation(
            screen, confirmer=confirmer, session=session, is_new=is_new
        )
        return Repl(conversation=conversation, screen=screen, **kw)

    def run(
        self, steps: Sequence[Step], *, timeout: float = 30, end: str | None = "\x04", **kw: Any
    ) -> Repl:
        errors: list[BaseException] = []
        with create_pipe_input() as inp:
            repl = self.make(input=inp, **kw)
            self.repl = repl
            self.inp = inp
            done = threading.Event()

            def feed() -> None:
                try:
                    for step in [*steps, *([end] if end else [])]:
                        if callable(step):
                            step(self)
                        else:
                            self.wait_prompt(repl, done)
                            inp.send_text(step)
                except BaseException as exc:  # reported by the test thread
                    errors.append(exc)
                    inp.close()

            def watchdog() -> None:
                if not done.wait(timeout):
                    errors.append(TimeoutError(f"REPL still running after {timeout} s"))
                    inp.close()

            feeder = threading.Thread(target=feed, daemon=True)
            dog = threading.Thread(target=watchdog, daemon=True)
            feeder.start()
            dog.start()
            try:
                repl.run()
            finally:
                done.set()
            feeder.join(5)
        if errors:
            raise AssertionError(
                f"{errors[0]!r}\n--- out ---\n{self.out.getvalue()}\n--- err ---\n{self.err.getvalue()}"
            )
        return repl

    def send(self, keys: str) -> None:
        """Type `keys` now, without waiting for a prompt (answers to y/N questions, key chords)."""
        self.inp.send_text(keys)

    def wait_prompt(self, repl: Repl, done: threading.Event, timeout: float = 20) -> None:
        """Wait until the REPL shows its next prompt (steps are sent one prompt at a time)."""
        seen = getattr(self, "_seen", 0)
        deadline = time.monotonic() + timeout
        while repl.prompts_shown <= seen:
            if done.is_set():
                raise RuntimeError("the REPL ended before the next step")
            if time.monotonic() > deadline:
                raise TimeoutError(f"no prompt #{seen + 1}")
            time.sleep(0.01)
        self._seen = repl.prompts_shown
        time.sleep(0.05)

    def wait_for(
        self, text: str, timeout: float = 10, *, stream: str = "out", count: int = 1
    ) -> None:
        """Wait until `text` is on `stream` (at least `count` times)."""
        buf = self.out if stream == "out" else self.err
        deadline = time.monotonic() + timeout
        while buf.getvalue().count(text) < count:
            if time.monotonic() > deadline:
                raise TimeoutError(f"{text!r} not in {stream}: {buf.getvalue()[-800:]!r}")
            time.sleep(0.01)

    def session_data(self) -> Any:
        return self.cb.only_session()

    def text(self) -> str:
        return self.out.getvalue()


def interrupt_when(text: str) -> Step:
    """A step: wait until `text` is on screen, then send Ctrl-C (SIGINT) to the process."""

    def step(h: Harness) -> None:
        h.wait_for(text)
        os.kill(os.getpid(), signal.SIGINT)

    return step


def approval_answers(answers: str) -> tuple[TerminalConfirmer, io.StringIO]:
    """The real approval prompt, reading `answers` (one per line), writing to a buffer."""
    out = io.StringIO()
    return TerminalConfirmer(io.StringIO(answers), out, color=False, editor=""), out


def write_call(path: str, content: str) -> fs.Reply:
    """The model asks to write `content` to `path`."""
    return fs.tool_calls([("write_file", {"path": path, "content": content})])


USAGE = {"prompt_tokens": 1234, "completion_tokens": 56, "total_tokens": 1290}


def paragraphs(n: int, word: str = "para") -> str:
    return "".join(f"{word} {i}\n\n" for i in range(n))
