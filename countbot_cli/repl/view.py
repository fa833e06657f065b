"""The REPL's TurnView: the streamed answer on the main console, the rest on the side (stderr).

While the model has not answered yet, a spinner with the elapsed time runs on the side stream
(a daemon thread; only on a terminal). It is stopped, and its line erased, before anything else
is printed, so it never ends up in the answer. After the answer, `summary` prints the token
usage and the elapsed time, dimmed. Tool calls are shown as short dim notices; the full output of
the last one is kept for `/last-tool`.

The lines themselves (usage, tool previews) are written by ui/transcript.py; the terminal mode
while a turn streams is ui/terminal.py's `QuietKeys`.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import IO, TYPE_CHECKING, Any

from countbot_cli.textsafe import sanitize, sanitize_line
from countbot_cli.ui.livetail import LiveTail
from countbot_cli.ui.stallredraw import StallRedraw
from countbot_cli.ui.status import StatusLine, dim
from countbot_cli.ui.stream import StreamView
from countbot_cli.ui.terminal import columns
from countbot_cli.ui.transcript import interrupted_what, short_args, tool_preview, usage_line

if TYPE_CHECKING:
    from rich.console import Console

    from countbot_cli.conversation.turn_record import TurnResult
    from countbot_cli.messages import ToolCall
    from countbot_cli.provider import ProviderStats
    from countbot_cli.tools.approval import Confirmer, Decision, Reprepare
    from countbot_cli.tools.base import PreparedCall, ToolResult
    from countbot_cli.ui.terminal import QuietKeys

_FRAMES = "⠋⠙⠹⠸⠼⠴⠦⠧⠇⠏"
_ASCII_FRAMES = "-\\|/"


class Spinner:
    """`label` with a spinning glyph and the elapsed seconds, redrawn on one dim status line of
    `stream` (ui/status.py)."""

    def __init__(
        self,
        stream: IO[str],
        label: str,
        *,
        interval: float = 0.1,
        extra: Callable[[], str] | None = None,
    ) -> None:
        self._stream = stream
        self._label = label
        self._extra = extra  # more for the line, asked each frame (what is typed ahead)
        self._interval = interval
        self._line = StatusLine(stream, quiet_errors=True)  # the terminal may go away
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None
        enc = (getattr(stream, "encoding", None) or "").lower().replace("-", "")
        self._frames = _FRAMES if enc == "utf8" else _ASCII_FRAMES

    @property
    def running(self) -> bool:
        return self._thread is not None

    def start(self) -> None:
        if self._thread is not None:
            return
        self._stop.clear()
        self._thread = threading.Thread(target=self._spin, name="countbot-spinner", daemon=True)
        self._thread.start()

    def stop(self) -> None:
        """Stop and erase the line; returns only when the thread has written its last frame."""
        thread, self._thread = self._thread, None
        if thread is None:
            return
        self._stop.set()
        thread.join()
        self._line.clear()

    def _spin(self) -> None:
        started = time.monotonic()
        n = 0
        while not self._stop.is_set():
            elapsed = time.monotonic() - started
            clock = f" {elapsed:.0f}s" if elapsed >= 1 else ""
            frame = self._frames[n % len(self._frames)]
            line = f"{frame} {self._label}{clock}{self._extra() if self._extra else ''}"
            self._line.show(line[: max(10, columns(self._stream) - 1)])  # one line: \r redraws it
            n += 1
            self._stop.wait(self._interval)


@dataclass
class TurnOnScreen:
    """The REPL's turn in progress, for what draws in the middle of it (the approval prompt,
    a provider's notices): its view and the terminal mode. None between turns."""

    view: ReplView | None = None
    keys: QuietKeys | None = None
    notify: Callable[[], None] | None = None  # the bell/desktop note when an approval waits


class PausingConfirmer:
    """Settles the streamed text, stops the spinner and puts the terminal in its usual mode
    before the approval prompt is shown."""

    def __init__(self, inner: Confirmer, screen: TurnOnScreen) -> None:
        self.inner = inner
        self.screen = screen

    def confirm(self, prepared: PreparedCall, reprepare: Reprepare | None = None) -> Decision:
        if self.screen.view is not None:
            self.screen.view.pause()
        if self.screen.notify is not None:
            self.screen.notify()
        keys = self.screen.keys
        if keys is None:
            return self.inner.confirm(prepared, reprepare)
        with keys.normal():
            return self.inner.confirm(prepared, reprepare)


class ReplView:
    """One turn on screen. `console` gets the answer; `side` the spinner, usage line and errors.

    The renderer redraws its live tail only when text arrives (throttled); when the stream
    stalls, a timer thread draws the pending frame. One lock serialises every call into the
    renderer, so that thread never writes in the middle of a print from the main thread."""

    def __init__(
        self,
        console: Console,
        side: Console,
        *,
        waiting: str,
        spinner: bool = False,
        stream_view: Any = None,
        stats: Callable[[], ProviderStats | None] | None = None,
        keep_tool: Callable[[str, str], object] | None = None,
        typed: Callable[[], str] | None = None,
    ) -> None:
        self.console = console
        self._typed = typed  # the type-ahead queue, shown on the spinner's line
        self._keep_tool = keep_tool  # (call, full output): kept for /last-tool
        self.side = side
        self.stream: Any = stream_view or StreamView(console, side=side)
        self._waiting = waiting
        self._spin = spinner
        self._spinner: Spinner | None = None
        self.frames = StallRedraw(self.stream)
        self.last_tool: tuple[str, str] | None = None  # (name and arguments, full output)
        self.tool_calls = 0
        self._stats = stats
        self._started = time.monotonic()
        self.tail: LiveTail | None = None  # a running command's last lines
        self._start_spinner(waiting)

    def waiting(self, label: str) -> None:
        """What the spinner says until the answer starts (after waiting for the upkeep)."""
        self._waiting = label
        self._start_spinner(label)

    def _end_tail(self) -> None:
        tail, self.tail = self.tail, None
        if tail is not None:
            tail.erase()

    # ---- TurnView ----

    def text(self, delta: str) -> None:
        self._quiet()
        with self.frames.lock:
            self.stream.feed(delta)
            self.frames.schedule()

    def reasoning(self, delta: str) -> None:
        self._quiet()
        with self.frames.lock:
            self.stream.reasoning(delta)
            self.frames.schedule()

    def notice(self, text: str) -> None:
        self._quiet()
        with self.frames.lock:
            self.stream.notice(text)

    def tool_start(self, prepared: PreparedCall) -> None:
        self._quiet()
        self.tool_calls += 1
        with self.frames.lock:
            self.stream.notice(f"⚙ {prepared.call.name} {short_args(prepared.args)}")
        self._start_spinner(f"running {sanitize_line(prepared.call.name)}")

    def tool_output(self, text: str) -> None:
        """A running command's output (from its reader threads): a live tail of its last lines
        on the side stream, in place of the spinner, on a terminal only."""
        if not self._spin:
            return
        if self.tail is None:
            self._quiet()
            self.tail = LiveTail(self.side.file)
        self.tail.feed(text)

    def tool_end(self, prepared: PreparedCall, result: ToolResult, decision: Decision) -> None:
        self._end_tail()
        self._quiet()
        call = f"{prepared.call.name} {short_args(prepared.args, 200)}"
        self.last_tool = (call, result.full or result.content)
        if self._keep_tool is not None:
            self._keep_tool(*self.last_tool)
        with self.frames.lock:
            for line in tool_preview(result):
                self.stream.notice(line)
        self._start_spinner(self._waiting)  # the model is asked again: its next round

    def tool_denied(self, call: ToolCall, how: str, reason: str) -> None:
        pass  # the notice before it said so

    # ---- turn life cycle ----

    def pause(self) -> None:
        """Before something else uses the terminal mid-turn (the approval prompt): the text so
        far is settled and a blank line separates it from the question."""
        self._settle()
        with self.frames.lock:
            if self.stream.text or self.tool_calls:
                self.console.print()

    def finish(self) -> None:
        self._settle()
        self.frames.close()

    def abort(self, note: str = "interrupted") -> None:
        self._end_tail()
        self._quiet()
        self.frames.close()
        with self.frames.lock:
            self.stream.abort(note)

    def summary(
        self, result: TurnResult, elapsed: float, stats: ProviderStats | None = None
    ) -> None:
        """The dim line after an answer: tokens and time (with the local model's load time and
        speed when `stats` has them); or the error of a failed turn."""
        self._quiet()
        from rich.text import Text

        if result.status == "failed" and result.error is not None:
            msg = sanitize(result.error.user_message())
            self.side.print(Text(f"error: {msg}", style="red"))
            self.side.print(Text("the question is kept; /retry sends it again", style="dim"))
            return
        if result.status == "interrupted":
            self.side.print(Text(f"{interrupted_what(result)}; /retry asks again", style="dim"))
            return
        self.side.print(Text(usage_line(result, elapsed, stats), style="dim"))

    def side_note(self, text: str) -> None:
        """A line for the side stream from elsewhere (a provider's retry notice): the spinner's
        line is erased first, and the spinner goes on below it while nothing has arrived yet."""
        spinner = self._spinner
        spinning = spinner is not None and spinner.running
        self._quiet()
        self.side.file.write(text)
        self.side.file.flush()
        if spinning and spinner is not None:
            spinner.start()

    # ---- after the turn (conversation.chat.ConversationView) ----

    def turn_ended(self, result: TurnResult) -> None:
        """The answer settled (or marked interrupted), then the dim usage line."""
        if result.status == "interrupted":
            self.abort("interrupted")
        else:
            self.finish()
        stats = self._stats() if self._stats is not None else None
        self.summary(result, time.monotonic() - self._started, stats)

    def upkeep_started(self) -> None:
        """Memory upkeep runs (it may ask the model for a summary): a spinner on the side."""
        self._start_spinner("updating memory")

    def upkeep_note(self, text: str, *, failed: bool) -> None:
        from rich.text import Text

        self._quiet()
        style = "yellow" if failed else "dim"
        self.console.print(Text(sanitize(text), style=style), soft_wrap=True)

    def upkeep_ended(self) -> None:
        self._quiet()

    # ---- internals ----

    def _settle(self) -> None:
        self._quiet()
        self.frames.cancel()
        with self.frames.lock:
            self.stream.finish()

    def _start_spinner(self, label: str) -> None:
        if not self._spin:
            return
        self._quiet()
        self._spinner = Spinner(self.side.file, label, extra=self._typed)
        self._spinner.start()

    def _quiet(self) -> None:
        if self._spinner is not None and self._spinner.running:
            self._spinner.stop()


def write_banner(out: IO[str], provider: Any, *, styled: bool) -> None:
    """The REPL's first line: provider/model and as many key hints as fit the terminal, dim when
    `styled` (a terminal)."""
    text = f"countbot · {sanitize_line(provider.name)}/{sanitize_line(provider.model)}"
    width = columns(out)
    for hint in (" · /help for commands · Alt-Enter for a new line · Ctrl-D quits", " · /help"):
        if len(text) + len(hint) <= width:
            text += hint
            break
    out.write(dim(text) + "\n" if styled else text + "\n")
    out.flush()
