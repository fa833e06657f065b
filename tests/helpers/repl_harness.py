"""The REPL in-process, for the tests in tests/repl/: keys, turns, Ctrl-C, on a real engine
(prompt-toolkit pipe input + DummyOutput, rich consoles on StringIO). The model is the loopback
FakeServer (`Harness(tmp_path, server)`: the `harness` fixture) where what goes over HTTP
matters, or a `ScriptedProvider` (`Harness(tmp_path, ScriptedProvider())`: the `scripted`
fixture) where it does not: the REPL's own logic (commands, branching, the picker), with no
socket, no memory upkeep and the requests as the engine made them.

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
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

import fakeserver as fs
from cbenv import QUIET_MEMORY, make_cb
from prompt_toolkit.input import create_pipe_input
from prompt_toolkit.output import DummyOutput
from rich.console import Console
from waits import wait_until

from countbot_cli import app
from countbot_cli.config.settings import Settings, load_settings
from countbot_cli.conversation.chat import Conversation
from countbot_cli.conversation.sessions.session import Session
from countbot_cli.provider.base import Provider
from countbot_cli.provider.fake import ScriptedProvider
from countbot_cli.repl.loop import Repl
from countbot_cli.repl.view import PausingConfirmer, TurnOnScreen
from countbot_cli.tools.approval import Confirmer
from countbot_cli.ui.confirm import TerminalConfirmer

Step = str | Callable[["Harness"], None]


UNREACHABLE = "http://127.0.0.1:9/v1"  # the configured server of a scripted harness: nothing


class Harness:
    def __init__(
        self,
        tmp_path: Path,
        model: fs.FakeServer | ScriptedProvider,
        *,
        tools: bool = False,
        **config: Any,
    ) -> None:
        if tools:
            config.setdefault("tools", {"enabled": True, "workspace": str(tmp_path / "work")})
        self.tmp_path = tmp_path
        self.server = model if isinstance(model, fs.FakeServer) else None
        self.provider = model if isinstance(model, ScriptedProvider) else None
        if self.provider is not None:  # every call takes a scripted reply: no upkeep calls
            config = {**QUIET_MEMORY, **config}
        base_url = self.server.base_url if self.server is not None else UNREACHABLE
        self.cb = make_cb(tmp_path, base_url, **config)
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
            provider_for=self._provider,
            tools_enabled=True,
            yes=False,
            confirmer=PausingConfirmer(confirmer, screen) if confirmer is not None else None,
            session=session,
            is_new=is_new,
        )

    def _provider(self, settings: Settings) -> Provider:
        if self.provider is not None:
            return self.provider
        return app.make_provider(settings, io.StringIO())

    def sent(self) -> list[list[dict[str, Any]]]:
        """The messages of every chat request the model got, in order."""
        if self.provider is not None:
            return [r.messages for r in self.provider.requests]
        assert self.server is not None
        return [b["messages"] for b in self.server.chat_bodies()]

    def sent_users(self) -> list[str]:
        """The last (user) message of every chat request."""
        return [messages[-1]["content"] for messages in self.sent()]

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
        repl = Repl(conversation=conversation, screen=screen, **kw)
        self.prompts_shown = 0
        prompt = repl._prompt_session()  # the one the REPL will use: each prompt is counted
        shown = prompt.prompt

        def counted(*args: Any, **kwargs: Any) -> str:
            self.prompts_shown += 1
            return shown(*args, **kwargs)

        prompt.prompt = counted  # type: ignore[method-assign]
        return repl

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
        """Wait until the REPL shows its next prompt and reads keys (steps are sent one prompt
        at a time)."""
        seen = getattr(self, "_seen", 0)

        def shown() -> bool:
            if done.is_set():
                raise RuntimeError("the REPL ended before the next step")
            return self._prompt_after(seen)

        wait_until(shown, f"prompt #{seen + 1}", timeout)
        self._seen = self.prompts_shown

    def wait_idle(self, timeout: float = 20) -> None:
        """Wait until the REPL is back at its prompt after the last line a step typed (its turn
        or command is done)."""
        seen = getattr(self, "_seen", 0)
        wait_until(lambda: self._prompt_after(seen), f"prompt #{seen + 1}", timeout)

    def _prompt_after(self, seen: int) -> bool:
        """A prompt later than the `seen`th is up and reads keys."""
        repl = self.repl
        if repl is None or repl._prompt is None:
            return False
        return self.prompts_shown > seen and repl._prompt.app.is_running

    def wait_for(
        self, text: str, timeout: float = 10, *, stream: str = "out", count: int = 1
    ) -> None:
        """Wait until `text` is on `stream` (at least `count` times)."""
        buf = self.out if stream == "out" else self.err
        wait_until(
            lambda: buf.getvalue().count(text) >= count,
            f"{text!r} in {stream}: {buf.getvalue()[-800:]!r}",
            timeout,
        )

    def line(self) -> str | None:
        """What the prompt's input line reads now; None while no prompt reads keys."""
        prompt = self.repl._prompt if self.repl is not None else None
        if prompt is None or not prompt.app.is_running:
            return None
        return prompt.default_buffer.text

    def wait_line(self, text: str, timeout: float = 10) -> None:
        """Wait until a prompt reads keys and its input line reads `text` (the keys sent before
        are handled; /edit's prompt holding the old question counts)."""
        wait_until(lambda: self.line() == text, f"the input line to read {text!r}", timeout)

    def wait_menu(self, *items: str, timeout: float = 10) -> None:
        """Wait until the completion menu (computed as you type) lists exactly `items`."""

        def shown() -> bool:
            prompt = self.repl._prompt if self.repl is not None else None
            state = prompt.default_buffer.complete_state if prompt is not None else None
            return state is not None and [c.text for c in state.completions] == list(items)

        wait_until(shown, f"the completion menu to list {items}", timeout)

    def wait_taken(self, timeout: float = 10) -> None:
        """Wait until the prompt has taken its line and the REPL works on it (a command that
        opens its own screen, such as the session picker, reads the keys sent next)."""
        wait_until(
            lambda: (
                self.repl is not None
                and self.repl._prompt is not None
                and not self.repl._prompt.app.is_running
            ),
            "the prompt to take its line",
            timeout,
        )

    def wait_search(self, text: str | None, timeout: float = 10) -> None:
        """Wait until a history search (Ctrl-R) is open with `text` typed into it; `None`:
        until no search is open."""

        def searching() -> bool:
            prompt = self.repl._prompt if self.repl is not None else None
            if prompt is None:
                return False
            if text is None:
                return not prompt.app.layout.is_searching
            return prompt.app.layout.is_searching and prompt.search_buffer.text == text

        what = "the history search to close" if text is None else f"a search for {text!r}"
        wait_until(searching, what, timeout)

    def wait_history(self, timeout: float = 10) -> None:
        """Wait until the prompt has loaded the input history file (Ctrl-R searches it)."""

        def loaded() -> bool:  # the file read, and every entry in the line's history
            prompt = self.repl._prompt if self.repl is not None else None
            if prompt is None:
                return False
            entries = len(list(prompt.history.get_strings()))
            return entries > 0 and len(prompt.default_buffer._working_lines) > entries

        wait_until(loaded, "the input history to load", timeout)

    def toolbar(self, timeout: float = 20) -> str:
        """The bottom toolbar once the after-turn memory upkeep is done (no `⟳ memory`)."""
        repl = self.repl
        assert repl is not None
        wait_until(lambda: not repl.conversation.upkeep_running, "the upkeep to end", timeout)
        return repl.toolbar()

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
