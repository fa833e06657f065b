"""The interactive chat (SPEC §2): a prompt-toolkit prompt, slash commands, streamed turns.

Synchronous by design: `PromptSession.prompt()` reads a message, then `Engine.run_turn` streams
the answer in the main thread. Output is printed only while no prompt is active (no
`patch_stdout`). While a turn streams the terminal is in cooked mode, so Ctrl-C is a real SIGINT:
the engine stops the request and saves what arrived, marked interrupted. At the prompt Ctrl-C
clears the line, or explains how to quit when the line is empty; Ctrl-D and /exit quit, with a
dim line saying how to resume the conversation if it was saved. Tools allowed with `[a]lways`
and the instructions of `/system` belong to one conversation: `/new` and `/resume` reset them
(a session's `/system` text is kept in its file).

Keys typed while an answer streams are not echoed into it and wait for the next prompt (a
typed-ahead Enter sends them then).

Start-up: prompt_toolkit is imported first and the prompt drawn at once; rich, the markdown
renderer and httpx are imported in a daemon thread while the user types (the first turn waits
for them), then the tokenizer the toolbar counts with. A new conversation is written to disk
only by its first turn. The engine's memory upkeep (which may ask the model for a summary) runs
here after the answer and its usage line, under a spinner. The slash commands are in
slash.py, key bindings, history and completion in prompt.py, the turn's view in view.py,
the context meter in toolbar.py, and the composition (settings, store, engine factory) in
cli/chat.py.
"""

from __future__ import annotations

import os
import sys
import threading
import time
from collections.abc import Callable
from pathlib import Path
from typing import IO, TYPE_CHECKING, Any

from countbot_cli.errors import CountbotError, Terminated
from countbot_cli.repl.toolbar import ContextMeter
from countbot_cli.textsafe import sanitize, sanitize_line
from countbot_cli.ui.terminal import QuietKeys, isatty
from countbot_cli.ui.transcript import render_recent

if TYPE_CHECKING:
    from prompt_toolkit import PromptSession
    from prompt_toolkit.input import Input
    from prompt_toolkit.output import Output
    from rich.console import Console

    from countbot_cli.config.settings import Settings
    from countbot_cli.conversation.engine import Engine, TurnResult
    from countbot_cli.conversation.session import Session
    from countbot_cli.conversation.store import SessionStore
    from countbot_cli.memory.store import MemoryStore
    from countbot_cli.tools.approval import Confirmer

HISTORY_FILE = ".countbot_history"
RECENT_EXCHANGES = 3

# (model or None for the configured one, confirmer) -> a new Engine on that model
EngineFactory = Callable[[str | None, "Confirmer | None"], "Engine"]
CompactHook = Callable[[str], list[str]]


class Repl:
    def __init__(
        self,
        *,
        settings: Settings,
        store: SessionStore,
        engine_factory: EngineFactory,
        session: Session | None = None,
        is_new: bool = True,
        input: Input | None = None,
        output: Output | None = None,
        console: Console | None = None,
        side: Console | None = None,
        confirmer: Confirmer | None = None,
        compact: CompactHook | None = None,
        history_path: Path | None = None,
        preload: bool = True,
        spinner: bool | None = None,
    ) -> None:
        from countbot_cli.conversation.session import new_session
        from countbot_cli.repl.view import PausingConfirmer

        self.settings = settings
        self.store = store
        self._factory = engine_factory
        self._confirmer = PausingConfirmer(confirmer, self) if confirmer is not None else None
        self.engine = engine_factory(None, self._confirmer)
        self._upkeep = _take_upkeep(self.engine)
        self._startup_system = self.engine.system_override
        self.session = session or new_session(
            provider=settings.provider.name, model=self.engine.provider.model
        )
        self.is_new = is_new or session is None
        self._input = input
        self._output = output
        self._console = console
        self._side = side
        self._compact = compact
        self._history_path = history_path or settings.data_dir / HISTORY_FILE
        self._want_preload = preload
        self._spinner = spinner
        self._preload_thread: threading.Thread | None = None
        self._preloaded = threading.Event()  # the renderer and httpx are imported
        self._prompt: PromptSession[str] | None = None
        self._exit = False
        self._models: list[str] | None = None
        self._models_lock = threading.Lock()
        self.meter = ContextMeter(settings)
        self.meter.autoload = not preload  # else the preload thread loads the tokenizer
        self.meter.on_ready = self._redraw_prompt
        self.view: Any = None  # the ReplView of the turn in progress
        self.keys: QuietKeys | None = None  # the terminal mode of the turn in progress
        self.last_tool: tuple[str, str] | None = None
        self.prompts_shown = 0  # how many times the prompt was shown (tests wait on it)

    # ---- the loop ----

    def run(self) -> int:
        prompt = self._prompt_session()
        self._arm_preload(prompt)
        self._banner()
        if not self.is_new:
            self.show_recent()
        try:
            while not self._exit:
                self.prompts_shown += 1
                try:
                    text = prompt.prompt()
                except Terminated:
                    raise  # SIGTERM/SIGHUP: quit, never "press Ctrl-D"
                except KeyboardInterrupt:
                    self.info("(Ctrl-D or /exit quits)")
                    continue
                except EOFError:
                    break
                self._handle_safely(text)
        finally:
            self._close()
        if not self.is_new:  # how to come back to it
            sid = self.session.id
            how = f"countbot -s {sid} (or countbot sessions resume {sid})"
            self.info(f"Session {sid} saved · resume it with: {how}")
        return 0

    def _handle_safely(self, text: str) -> None:
        try:
            self.handle(text)
        except Terminated:
            raise  # the turn was saved; SIGTERM/SIGHUP end the chat
        except KeyboardInterrupt:
            if self.view is not None:
                self.view.abort("interrupted")
                self.view = None
            else:
                self.info("interrupted")
        except CountbotError as exc:
            self.warn(exc.user_message())
        except Exception as exc:  # a bug must not end the chat: the session is saved per turn
            if os.environ.get("COUNTBOT_DEBUG"):
                raise
            if self.view is not None:
                self.view.abort("")
                self.view = None
            self.warn(
                f"unexpected error: {type(exc).__name__}: {exc} (COUNTBOT_DEBUG=1 shows the traceback)"
            )

    def handle(self, text: str) -> None:
        from countbot_cli.repl import slash as commands

        stripped = text.strip()
        if not stripped:
            return
        if stripped.startswith("//"):
            self.send(stripped[1:])
        elif commands.parse(stripped) is not None:
            commands.dispatch(self, stripped)
        else:
            self.send(text.strip("\n"))

    def request_exit(self) -> None:
        self._exit = True

    # ---- turns ----

    def send(self, text: str, *, replaces: str | None = None) -> TurnResult | None:
        from countbot_cli.repl.view import ReplView

        self._join_preload()
        model = self.engine.provider.model
        spin = self._spinner if self._spinner is not None else isatty(self.side.file)
        view = ReplView(
            self.console, self.side, waiting=f"waiting for {sanitize_line(model)}", spinner=spin
        )
        self.view = view
        started = time.monotonic()
        try:
            with QuietKeys(sys.stdin if self._input is None else None) as self.keys:
                result = self.engine.run_turn(
                    self.session, text, view, is_new=self.is_new, replaces=replaces
                )
        except KeyboardInterrupt as exc:  # Ctrl-C held during the save is delivered after it
            if isinstance(exc, Terminated):
                raise
            view.abort("interrupted")
            self.view = None
            self.is_new = False
            self.reload()
            return None
        finally:
            self.keys = None
        self.is_new = False
        if result.status == "interrupted":
            view.abort("interrupted")
        else:
            view.finish()
        self.view = None
        stats = self.engine.provider.last_stats
        view.summary(result, time.monotonic() - started, stats)
        if view.last_tool is not None:
            self.last_tool = view.last_tool
        if result.session_id is not None:
            self._run_upkeep(view, result.session_id)
            self.reload()  # memory upkeep may have archived messages in the file
        self.meter.note(result)
        return result

    def _run_upkeep(self, view: Any, session_id: str) -> None:
        """The engine's memory upkeep (it may ask the model for a summary), after the answer
        and its usage line, under a spinner; Ctrl-C skips it until the next turn."""
        if not self._upkeep:
            return
        with QuietKeys(sys.stdin if self._input is None else None), view.status("updating memory"):
            for hook in self._upkeep:
                try:
                    hook(session_id)
                except KeyboardInterrupt:
                    view.stop_status()
                    self.info("memory upkeep interrupted; it runs again after the next turn")
                    return
                except CountbotError as exc:
                    view.stop_status()
                    self.warn(f"memory upkeep failed: {exc.user_message()}")
                except Exception as exc:  # upkeep never ends the chat
                    view.stop_status()
                    self.warn(f"memory upkeep failed: {type(exc).__name__}: {exc}")

    # ---- sessions ----

    def start_new(self, title: str) -> None:
        from countbot_cli.conversation.session import new_session

        self.session = new_session(
            provider=self.settings.provider.name,
            model=self.engine.provider.model,
            title=" ".join(title.split()),
        )
        self.is_new = True
        self._reset_session_state()

    def resume(self, sid: str) -> None:
        self.session = self.store.load(sid)
        self.is_new = False
        self._reset_session_state()
        self.show_recent()

    def reload(self) -> None:
        if not self.is_new:
            self.session = self.store.load(self.session.id)

    def _reset_session_state(self) -> None:
        self.engine.system_override = self._startup_system
        self.engine.policy.revoke_session()  # [a]lways approvals last for one conversation
        self.meter.reset()

    def show_recent(self) -> None:
        render_recent(self.console, self.session, RECENT_EXCHANGES)

    # ---- model, tools, memory ----

    def switch_model(self, name: str) -> None:
        old = self.engine
        new = self._factory(name, self._confirmer)
        new.policy.mode = old.policy.mode
        new.policy.session_allowed = old.policy.session_allowed
        new.system_override = old.system_override
        self.engine = new
        self._upkeep = _take_upkeep(new)
        self.meter.reset()  # the last usage was reported for the other model
        try:
            old.provider.close()
        except Exception:  # closing an idle client must not stop the switch
            pass

    def model_names(self, *, refresh: bool = False, quiet: bool = True) -> list[str]:
        """The provider's models, fetched once (completion threads wait for one fetch); a
        failure is tolerated (an empty list when quiet)."""
        with self._models_lock:
            if self._models is None or refresh:
                try:
                    self._models = sorted(self.engine.provider.list_models())
                except CountbotError:
                    self._models = []
                    if not quiet:
                        raise
            return self._models

    def prefetch_models(self) -> None:
        """Fetch the model list in the background (once), so /model NAME completes at once."""
        if self._models is not None or self._models_lock.locked():
            return
        threading.Thread(target=self.model_names, name="countbot-models", daemon=True).start()

    def memory(self) -> MemoryStore:
        from countbot_cli.memory.store import MemoryStore

        return MemoryStore(self.settings.memory.file)

    def compact_hook(self) -> CompactHook | None:
        if self._compact is not None:
            return self._compact
        keeper = self.engine.memory_keeper
        return keeper.compact if keeper is not None else None

    # ---- output ----

    @property
    def console(self) -> Console:
        if self._console is None:
            from countbot_cli.ui.stream import make_console

            self._console = make_console()
        return self._console

    @property
    def side(self) -> Console:
        if self._side is None:
            from countbot_cli.ui.stream import make_console

            self._side = make_console(stderr=True)
        return self._side

    def write(self, text: str) -> None:
        """Plain text (already sanitised), printed as is: never interpreted as markup."""
        from rich.text import Text

        if text:
            self.console.print(Text(text.rstrip("\n")), soft_wrap=True)

    def info(self, text: str) -> None:
        from rich.text import Text

        self.console.print(Text(text, style="dim"), soft_wrap=True)

    def warn(self, text: str) -> None:
        from rich.text import Text

        self.console.print(Text(sanitize(text), style="yellow"), soft_wrap=True)

    def confirm(self, question: str) -> bool:
        from prompt_toolkit import PromptSession

        asker: PromptSession[str] = PromptSession(input=self._input, output=self._output)
        try:
            answer = asker.prompt(f"{sanitize(question)} [y/N] ")
        except (KeyboardInterrupt, EOFError):
            return False
        return answer.strip().lower() in ("y", "yes")

    def clear_screen(self) -> None:
        out = self._prompt_session().output
        out.erase_screen()
        out.cursor_goto(0, 0)
        out.flush()

    def _raw_out(self) -> IO[str]:
        return self._console.file if self._console is not None else sys.stdout

    def _banner(self) -> None:
        from countbot_cli.repl.view import write_banner

        out = self._raw_out()
        color = self._console is None and isatty(out) and not os.environ.get("NO_COLOR")
        write_banner(out, self.engine.provider, color=color)

    # ---- the prompt ----

    def _prompt_session(self) -> PromptSession[str]:
        if self._prompt is not None:
            return self._prompt
        from countbot_cli.repl.prompt import make_prompt

        self._prompt = make_prompt(self, self._history_path, self._input, self._output)
        return self._prompt

    def toolbar(self) -> str:
        """provider/model · title · context used/window (percent) · tool mode (+ session grants)."""
        from countbot_cli.repl.toolbar import toolbar_text

        try:
            return toolbar_text(self.engine, self.session, self.meter, is_new=self.is_new)
        except Exception:  # a toolbar must never break the prompt
            return " countbot "

    # ---- start-up and shut-down ----

    def _arm_preload(self, prompt: PromptSession[str]) -> None:
        """Start the preload once the first prompt is fully drawn (toolbar included, i.e. the
        terminal answered the cursor position request), so it does not slow that first frame."""
        if not self._want_preload:
            return
        armed = time.monotonic()

        def on_render(app: Any) -> None:
            if app.renderer.height_is_known or time.monotonic() - armed > 0.3:
                prompt.app.after_render -= on_render
                self._start_preload()

        prompt.app.after_render += on_render

    def _start_preload(self) -> None:
        if self._preload_thread is not None:
            return
        model = self.engine.provider.model

        def work() -> None:
            try:
                from countbot_cli.ui import stream as render

                render.preload()
                import httpx  # noqa: F401
            except Exception:  # preloading only saves time; the real import reports problems
                pass
            self._preloaded.set()
            try:
                self.meter.load(model)  # the toolbar's count, then the toolbar is redrawn
            except Exception:
                pass
            self.meter.autoload = True

        self._preload_thread = threading.Thread(target=work, name="countbot-preload", daemon=True)
        self._preload_thread.start()

    def _join_preload(self) -> None:
        """Before a turn: wait for the renderer's imports (not for the tokenizer)."""
        if self._preload_thread is not None:
            self._preloaded.wait(10)

    def _redraw_prompt(self) -> None:
        """From another thread: draw the prompt again (the toolbar's count changed)."""
        prompt = self._prompt
        if prompt is not None:
            prompt.app.invalidate()

    def _close(self) -> None:
        try:
            self.engine.provider.close()
        except Exception:
            pass
        from countbot_cli.repl.prompt import trim_history

        trim_history(self._history_path)


def _take_upkeep(engine: Engine) -> list[Callable[[str], None]]:
    """The engine's after-turn hooks, which the REPL runs itself (see `Repl._run_upkeep`)."""
    hooks = list(getattr(engine, "upkeep", ()))
    if hooks:
        engine.upkeep = []
    return hooks
