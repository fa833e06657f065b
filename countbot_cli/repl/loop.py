"""The interactive chat (SPEC §2): a prompt-toolkit prompt, slash commands, streamed turns.

`Repl` reads input and draws; the conversation it shows is a `conversation.chat.Conversation`,
whose operations the slash commands call. Synchronous by design: the prompt reads a message,
then the answer streams in the main thread, and output is printed only while no prompt is
active. Ctrl-C during a turn is a real SIGINT (what arrived is saved, marked interrupted); at
the prompt it clears the line. Keys typed while an answer streams go to the type-ahead queue
(typeahead.py); memory upkeep runs after the answer in a worker thread. The slash commands are
in slash.py, keys in prompt.py, the view in view.py, the composition in chat.py; how they fit:
docs/design/chat.md.
"""

from __future__ import annotations

import os
import sys
import threading
import time
from pathlib import Path
from typing import IO, TYPE_CHECKING, Any

from countbot_cli.config.own_files import HISTORY_FILE
from countbot_cli.conversation.input.attachments import PendingAttachments
from countbot_cli.errors import CountbotError, Terminated
from countbot_cli.memory.keeper import MemoryKeeper
from countbot_cli.repl import slash
from countbot_cli.repl.host import TurnOp
from countbot_cli.repl.prompt import editing_mode, make_prompt, redraw_soon, trim_history
from countbot_cli.repl.tool_outputs import ToolOutputs
from countbot_cli.repl.toolbar import ContextMeter, answering, toolbar_text
from countbot_cli.repl.typeahead import LineQueue, TypeAhead
from countbot_cli.repl.view import ReplView, TurnOnScreen, write_banner
from countbot_cli.textsafe import sanitize, sanitize_line
from countbot_cli.ui import stream
from countbot_cli.ui.notify import notify
from countbot_cli.ui.session_picker import pick_session
from countbot_cli.ui.stream import make_console
from countbot_cli.ui.terminal import isatty
from countbot_cli.ui.transcript import render_recent

if TYPE_CHECKING:
    from prompt_toolkit import PromptSession
    from prompt_toolkit.input import Input
    from prompt_toolkit.output import Output
    from rich.console import Console

    from countbot_cli.conversation.chat import Conversation
    from countbot_cli.conversation.turn_record import TurnResult

RECENT_EXCHANGES = 3
UPKEEP_WAIT = "waiting for the memory upkeep (the local model answers one call at a time)"


class Repl:
    def __init__(
        self,
        *,
        conversation: Conversation,
        screen: TurnOnScreen | None = None,
        input: Input | None = None,
        output: Output | None = None,
        console: Console | None = None,
        side: Console | None = None,
        history_path: Path | None = None,
        preload: bool = True,
        spinner: bool | None = None,
        attachments: PendingAttachments | None = None,
    ) -> None:
        self.conversation = conversation
        # `-a` and `/attach`: sent with the next message
        self.attachments = attachments or PendingAttachments()
        self.settings = conversation.settings
        # the turn in progress; shared with the approval prompt and the provider's notices
        self.screen = screen or TurnOnScreen()
        self._input = input
        self._output = output
        self._console = console
        self._side = side
        self._history_path = history_path or self.settings.data_dir / HISTORY_FILE
        self._want_preload = preload
        self._spinner = spinner
        self._preload_thread: threading.Thread | None = None
        self._preloaded = threading.Event()  # the renderer and httpx are imported
        self._prompt: PromptSession[str] | None = None
        self._exit = False
        self._models: list[str] | None = None
        self._models_lock = threading.Lock()
        self.meter = ContextMeter(self.settings)
        self.meter.autoload = not preload  # else once the preload thread has its imports
        self.meter.on_ready = self._redraw_prompt
        self.tool_outputs = ToolOutputs()  # every tool call's full output, for /last-tool
        self.typed = LineQueue()  # typed ahead while answers stream (repl/typeahead.py)
        self.chat = self.settings.chat  # vi mode, Enter, notify; /set changes them
        self.screen.notify = lambda: self._notify("an approval is waiting")
        # the memory upkeep runs after the answer without holding the next prompt back
        conversation.upkeep_in_background(self._redraw_prompt)
        conversation.fallback.offer = self._ask_in_turn  # the embedded model, offered once

    # ---- the loop ----

    def run(self) -> int:
        prompt = self._prompt_session()
        self._arm_preload(prompt)
        self._banner()
        if not self.conversation.is_new:
            self.show_recent()
        try:
            while not self._exit:
                self._upkeep_notes()
                try:
                    text = prompt.prompt(default=self.typed.take_typing())
                except Terminated:
                    raise  # SIGTERM/SIGHUP: quit, never "press Ctrl-D"
                except KeyboardInterrupt:
                    self.info("(Ctrl-D or /exit quits)")
                    continue
                except EOFError:
                    break
                self._handle_safely(text)
                self._send_typed_ahead()
            self._keep_unsent(prompt)
        finally:
            self._close()
        if not self.conversation.is_new:  # how to come back to it
            sid = self.conversation.session.id
            how = f"countbot -s {sid} (or countbot sessions resume {sid})"
            self.info(f"Session {sid} saved · resume it with: {how}")
        return 0

    def _handle_safely(self, text: str) -> None:
        try:
            self.handle(text)
        except Terminated:
            raise  # the turn was saved; SIGTERM/SIGHUP end the chat
        except KeyboardInterrupt:
            if self.screen.view is not None:
                self.screen.view.abort("interrupted")
                self.screen.view = None
            else:
                self.info("interrupted")
        except CountbotError as exc:
            self.warn(exc.user_message())
        except Exception as exc:  # a bug must not end the chat: the session is saved per turn
            if os.environ.get("COUNTBOT_DEBUG"):
                raise
            if self.screen.view is not None:
                self.screen.view.abort("")
                self.screen.view = None
            self.warn(
                f"unexpected error: {type(exc).__name__}: {exc} (COUNTBOT_DEBUG=1 shows the traceback)"
            )

    def handle(self, text: str) -> None:
        stripped = text.strip()
        if not stripped:
            return
        if stripped.startswith("//"):
            self.send(stripped[1:])
        elif slash.parse(stripped) is not None:
            slash.dispatch(self, stripped)
        else:
            self.send(text.strip("\n"))

    def _send_typed_ahead(self) -> None:
        """The lines queued while answers streamed (repl/typeahead.py), in order, each its
        own message; what is still queued is shown dimmed above each one sent."""
        while self.typed.lines and not self._exit:
            line = self.typed.lines.pop(0)
            waiting = " · ".join(f"«{sanitize_line(q)[:40]}»" for q in self.typed.lines)
            self.info(f"› {sanitize_line(line)}" + (f"   (queued: {waiting})" if waiting else ""))
            self._handle_safely(line)

    def _keep_unsent(self, prompt: PromptSession[str]) -> None:
        """Lines typed ahead that quitting (Ctrl-D during an answer) left unsent go to the
        input history, where Up finds them next time; said once."""
        if not self.typed.lines:
            return
        for line in self.typed.lines:
            prompt.history.append_string(line)
        waiting = " · ".join(f"«{sanitize_line(q)[:40]}»" for q in self.typed.lines)
        self.info(f"not sent (kept in the input history): {waiting}")
        self.typed.lines.clear()

    def request_exit(self) -> None:
        self._exit = True

    def _upkeep_notes(self) -> None:
        """What the last upkeep run had to say (shown before the prompt, never across it)."""
        for text, failed in self.conversation.settle():
            (self.warn if failed else self.info)(text)

    def edit_text(self, default: str) -> str | None:
        """The main prompt again, holding `default` to edit (Ctrl-X Ctrl-E opens $EDITOR);
        None when the user cancels with Ctrl-C or Ctrl-D."""
        try:
            return self._prompt_session().prompt(default=default)
        except Terminated:
            raise  # SIGTERM/SIGHUP end the chat, they do not cancel the edit
        except (KeyboardInterrupt, EOFError):
            return None

    def pick_session(self, query: str) -> str | None:
        """The session picker (ui/session_picker.py) on this REPL's terminal: the id chosen."""
        c = self.conversation
        return pick_session(
            c.store,
            query,
            current=None if c.is_new else c.session.id,
            input=self._input,
            output=self._output,
        )

    # ---- turns ----

    def send(self, text: str) -> TurnResult | None:
        """Send `text`, with what `-a` and `/attach` hold (checked again for the model now in
        use: a refusal is a UsageError and nothing is sent; the attachments stay)."""
        if not self.attachments:
            return self.turn(lambda view: self.conversation.send(text, view))
        provider = self.conversation.engine.settings.provider
        message, attached = self.attachments.compose(text, provider)
        self.attachments.clear()  # the session keeps their records with the message
        return self.turn(lambda view: self.conversation.send(message, view, attached=attached))

    def turn(self, op: TurnOp) -> TurnResult | None:
        """Run `op` (a Conversation operation that runs a turn: send, retry) on a fresh view:
        the answer streams, then the conversation settles it on screen and runs the memory
        upkeep under a spinner. Keys typed meanwhile wait for the next prompt."""
        self._join_preload()
        model = answering(self.conversation).provider.model  # a fallback link's, while it answers
        spin = self._spinner if self._spinner is not None else isatty(self.side.file)
        waiting = f"waiting for {sanitize_line(model)}"
        upkeep = self.conversation.turn_waits_for_upkeep  # the embedded model is busy with it
        view = ReplView(
            self.console,
            self.side,
            waiting=UPKEEP_WAIT if upkeep else waiting,
            spinner=spin,
            stats=lambda: answering(self.conversation).provider.last_stats,
            keep_tool=self.tool_outputs.keep,
            typed=self.typed.summary,
        )
        self.screen.view = view
        started = time.monotonic()
        try:
            keys = TypeAhead(sys.stdin if self._input is None else None, self.typed)
            with keys as self.screen.keys:
                if upkeep:
                    self.conversation.give_way()  # the usage line says how long it took
                    view.waiting(waiting)
                result = op(view)
        except KeyboardInterrupt as exc:  # Ctrl-C held during the save is delivered after it
            if isinstance(exc, Terminated):
                raise
            view.abort("interrupted")
            return None
        finally:
            self.screen.keys = None
            self.screen.view = None
            if self.typed.quit:  # Ctrl-D stopped the answer: the chat ends after it
                self.request_exit()
        if result is not None:
            self.meter.note(result)
        if time.monotonic() - started >= self.chat.notify_after:
            self._notify("the answer is ready")
        return result

    def _notify(self, message: str) -> None:
        """The bell or a desktop notification (`chat.notify`; off by default)."""
        notify(self.chat.notify, message, self.side.file)

    def apply_chat(self) -> None:
        """The prompt follows `chat` (after /set): editing mode; Enter is read per key."""
        if self._prompt is not None:
            self._prompt.editing_mode = editing_mode(self.chat.editing_mode)

    def show_recent(self) -> None:
        render_recent(self.console, self.conversation.session, RECENT_EXCHANGES)

    # ---- the provider's models ----

    def model_names(self, *, refresh: bool = False, quiet: bool = True) -> list[str]:
        """The provider's models, fetched once (completion threads wait for one fetch); a
        failure is tolerated (an empty list when quiet)."""
        with self._models_lock:
            if self._models is None or refresh:
                try:
                    self._models = sorted(self.conversation.provider.list_models())
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

    # ---- output ----

    @property
    def console(self) -> Console:
        if self._console is None:
            self._console = make_console()
        return self._console

    @property
    def side(self) -> Console:
        if self._side is None:
            self._side = make_console(stderr=True)
        return self._side

    def write(self, text: str) -> None:
        """Plain text (already sanitised), printed as is: never interpreted as markup."""
        from rich.text import Text

        if text:
            self.console.print(Text(text.rstrip("\n")), soft_wrap=True)

    def columns(self) -> int:
        """The width of the chat's output, in columns (the terminal's, as it is now)."""
        return self.console.width

    def raw_write(self, data: str) -> None:
        """`data` straight to the terminal, unrendered: a control sequence (OSC 52)."""
        out = self._raw_out()
        out.write(data)
        out.flush()

    def info(self, text: str) -> None:
        from rich.text import Text

        self.console.print(Text(text, style="dim"), soft_wrap=True)

    def warn(self, text: str) -> None:
        from rich.text import Text

        self.console.print(Text(sanitize(text), style="yellow"), soft_wrap=True)

    def confirm(self, question: str) -> bool:
        answer = self.ask(f"{question} [y/N] ")
        return answer is not None and answer.strip().lower() in ("y", "yes")

    def ask(self, question: str) -> str | None:
        from prompt_toolkit import PromptSession

        asker: PromptSession[str] = PromptSession(input=self._input, output=self._output)
        try:
            return asker.prompt(sanitize(question))
        except Terminated:
            raise  # SIGTERM/SIGHUP end the chat, they are not "no"
        except (KeyboardInterrupt, EOFError):
            return None

    def _ask_in_turn(self, question: str) -> bool:
        """A y/N question in the middle of a turn: the view settled, the keys echoed again."""
        if self.screen.view is not None:
            self.screen.view.pause()
        keys = self.screen.keys
        if keys is None:
            return self.confirm(question)
        with keys.normal():
            return self.confirm(question)

    def clear_screen(self) -> None:
        out = self._prompt_session().output
        out.erase_screen()
        out.cursor_goto(0, 0)
        out.flush()

    def _raw_out(self) -> IO[str]:
        return self._console.file if self._console is not None else sys.stdout

    def _banner(self) -> None:
        out = self._raw_out()
        styled = self._console is None and isatty(out)  # dim, NO_COLOR or not (ui/status.py)
        write_banner(out, self.conversation.provider, styled=styled)

    # ---- the prompt ----

    def _prompt_session(self) -> PromptSession[str]:
        if self._prompt is not None:
            return self._prompt
        self._prompt = make_prompt(self, self._history_path, self._input, self._output)
        # recall's encoders stop when idle; typing a message starts them again
        self._prompt.default_buffer.on_text_changed += lambda _buffer: self._wake_recall()
        return self._prompt

    def _wake_recall(self) -> None:
        keeper = self.conversation.pair.keeper
        if isinstance(keeper, MemoryKeeper):
            keeper.recaller.wake()

    def toolbar(self) -> str:
        """provider/model · title · context used/window (percent) · tool mode (+ session grants)."""
        try:
            width = self._prompt.app.output.get_size().columns if self._prompt else 80
            upkeep = self.conversation.upkeep_running
            mode = self._vi_mode()
            text = toolbar_text(self.conversation, self.meter, width - len(mode), upkeep=upkeep)
            return mode + text
        except Exception:  # a toolbar must never break the prompt
            return " countbot "

    def _vi_mode(self) -> str:
        """` vi:insert ·` / ` vi:normal ·` in front of the toolbar in vi mode, else ""."""
        if self.chat.editing_mode != "vi" or self._prompt is None:
            return ""
        from prompt_toolkit.key_binding.vi_state import InputMode

        state = self._prompt.app.vi_state.input_mode
        names = {InputMode.NAVIGATION: "normal", InputMode.REPLACE: "replace"}
        return f" vi:{names.get(state, 'insert')} ·"

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

        def work() -> None:
            try:
                stream.preload()
                import httpx  # noqa: F401
            except Exception:  # preloading only saves time; the real import reports problems
                pass
            self._preloaded.set()
            # not the tokenizer: its tables wait for a count that matters (repl/toolbar.py)
            self.meter.autoload = True

        self._preload_thread = threading.Thread(target=work, name="countbot-preload", daemon=True)
        self._preload_thread.start()

    def _join_preload(self) -> None:
        """Before a turn: wait for the renderer's imports (not for the tokenizer)."""
        if self._preload_thread is not None:
            self._preloaded.wait(10)

    def _redraw_prompt(self) -> None:
        """From another thread: draw the prompt again (the toolbar's count changed)."""
        redraw_soon(self._prompt)

    def _close(self) -> None:
        stopped: Terminated | None = None
        if self.conversation.upkeep_running:  # its summary and cursors are saved before leaving
            self.info("finishing the memory upkeep… (Ctrl-C skips it; it runs again next time)")
            try:
                self.conversation.wait_upkeep()
            except Terminated as exc:  # SIGTERM/SIGHUP skip it too, and countbot ends with 130
                stopped = exc
            except KeyboardInterrupt:
                pass
        self._upkeep_notes()
        self.conversation.close()
        self.tool_outputs.close()
        trim_history(self._history_path)
        if stopped is not None:
            raise stopped
