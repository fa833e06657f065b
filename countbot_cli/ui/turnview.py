"""TurnViews for `ask`: plain text, JSON (collect only) and rendered markdown on a TTY.

stdout carries the answer and nothing else; status, notices, tool lines and errors go to stderr.
"""

from __future__ import annotations

import sys
from typing import TYPE_CHECKING, Literal, TextIO

from countbot_cli.errors import OutputClosed
from countbot_cli.textsafe import StreamSanitizer, json_text, sanitize
from countbot_cli.ui.livetail import LiveTail
from countbot_cli.ui.stallredraw import StallRedraw
from countbot_cli.ui.status import StatusLine
from countbot_cli.ui.stream import StreamView, make_console
from countbot_cli.ui.terminal import isatty

if TYPE_CHECKING:
    from countbot_cli.conversation.turn_record import TurnResult
    from countbot_cli.messages import ToolCall
    from countbot_cli.tools.approval import Decision
    from countbot_cli.tools.base import PreparedCall, ToolResult


class _StderrNotices:
    """Status line while waiting for the first token, then one-line notices, all on stderr.
    On a terminal both are dim (ui/status.py); piped, a notice is a `countbot: ` line."""

    def __init__(self, err: TextIO, *, waiting: str | None) -> None:
        self.err = err
        self.tty = isatty(err)
        self._status = StatusLine(err)
        if waiting:
            self.status(waiting)  # names the model

    def status(self, text: str) -> None:
        """A dim status line (on a terminal only) until the next output clears it."""
        if self.tty:
            self._status.show(sanitize(text))

    def clear_status(self) -> None:
        self._status.clear()

    def line(self, text: str) -> None:
        text = sanitize(text)
        if self.tty:
            self._status.line(text)
        else:
            self.err.write(f"countbot: {text}\n")
            self.err.flush()


class PlainView:
    """Raw answer text to stdout as it arrives (sanitised); the rest to stderr."""

    def __init__(self, out: TextIO, err: TextIO, *, waiting: str | None = None) -> None:
        self.out = _AnswerOut(out)
        self.notices = _StderrNotices(err, waiting=waiting)
        self._last = ""
        self.memory_shown: list[str] = []  # MEMORY.md lines the memory tool showed the model
        # holds back an escape sequence cut by a chunk boundary until it is complete
        self._clean = StreamSanitizer()

    def text(self, delta: str) -> None:
        self.notices.clear_status()
        self._answer(self._clean.feed(delta))

    def _answer(self, text: str) -> None:
        if text:
            self.out.write(text)
            self.out.flush()
            self._last = text

    def reasoning(self, delta: str) -> None:
        self.notices.clear_status()

    def notice(self, text: str) -> None:
        self.notices.line(text)

    def tool_start(self, prepared: PreparedCall) -> None:
        from countbot_cli.ui.transcript import short_args  # with tools only (start-up)

        self.pause()
        self.notice(f"→ {prepared.call.name} {short_args(prepared.args)}")

    def tool_output(self, text: str) -> None:
        pass  # piped: the command's output is the model's, not the screen's (MarkdownView draws it)

    def tool_end(self, prepared: PreparedCall, result: ToolResult, decision: Decision) -> None:
        from countbot_cli.memory.tool import shown_lines  # with tools only (start-up)
        from countbot_cli.tools.shell import failed_stderr_tail  # with tools only (start-up)

        if prepared.call.name == "memory" and result.ok:  # for --json's memory_used
            self.memory_shown += shown_lines(result.content)
        state = "ok" if result.ok else (result.error or "failed")
        self.notice(f"← {prepared.call.name}: {state}")
        for line in failed_stderr_tail(result):  # why a command failed, on screen
            self.notice(f"  {line}")

    def tool_denied(self, call: ToolCall, how: str, reason: str) -> None:
        pass  # the notice before it said so

    def pause(self) -> None:
        """Before a tool runs or a prompt is drawn: end the current line of answer text."""
        self.notices.clear_status()
        self._answer(self._clean.flush())
        if self._last and not self._last.endswith("\n"):
            self.out.write("\n")
            self.out.flush()
            self._last = "\n"

    def finish(self) -> None:
        self.pause()

    def abort(self, note: str) -> None:
        self.finish()

    # ---- after the turn (conversation.chat.ConversationView) ----

    def turn_ended(self, result: TurnResult) -> None:
        if result.status == "interrupted":
            self.abort("interrupted")
        else:
            self.finish()

    def upkeep_started(self) -> None:
        self.notices.status("… updating memory")

    def upkeep_note(self, text: str, *, failed: bool) -> None:
        self.notices.clear_status()
        self.notices.err.write(f"countbot: {sanitize(text)}\n")
        self.notices.err.flush()

    def upkeep_ended(self) -> None:
        self.notices.clear_status()


class JsonView(PlainView):
    """Collects nothing on stdout (the caller prints one JSON object); notices to stderr."""

    def __init__(self, err: TextIO) -> None:
        super().__init__(sys.stdout, err)

    def text(self, delta: str) -> None:
        self.notices.clear_status()

    def finish(self) -> None:
        self.notices.clear_status()


JSONL_OUTPUT_CHARS = 4000  # a tool result's output in a `tool_result` line, at most


# the "type" of a line `ask --jsonl` writes (the README's schema)
JsonlType = Literal[
    "text", "reasoning", "notice", "tool_call", "tool_result", "usage", "error", "end"
]


class JsonlView(PlainView):
    """`ask --jsonl`: one JSON object a line on stdout as the turn happens (the schema is in the
    README); notices also on stderr as usual. The caller ends it with `end`."""

    def __init__(self, out: TextIO, err: TextIO) -> None:
        super().__init__(out, err)

    def emit(self, kind: JsonlType, **fields: object) -> None:
        self.out.write(json_text({"type": kind, **fields}, indent=None) + "\n")
        self.out.flush()

    def text(self, delta: str) -> None:
        if delta:
            self.emit("text", delta=delta)

    def reasoning(self, delta: str) -> None:
        if delta:
            self.emit("reasoning", delta=delta)

    def notice(self, text: str) -> None:
        super().notice(text)
        self.emit("notice", text=sanitize(text))

    def tool_start(self, prepared: PreparedCall) -> None:
        call = prepared.call
        self.emit("tool_call", id=call.id, name=call.name, arguments=prepared.args, run=True)

    def tool_end(self, prepared: PreparedCall, result: ToolResult, decision: Decision) -> None:
        content = result.content
        self.emit(
            "tool_result",
            id=prepared.call.id,
            name=prepared.call.name,
            approval=decision.how,
            ok=result.ok,
            error=result.error,
            output=content[:JSONL_OUTPUT_CHARS],
            output_chars=len(content),
        )

    def tool_denied(self, call: ToolCall, how: str, reason: str) -> None:
        self.emit("tool_call", id=call.id, name=call.name, run=False, approval=how, reason=reason)

    def end(
        self,
        result: TurnResult,
        exit_code: int,
        status: str | None = None,
        *,
        parsed: object = None,
    ) -> None:
        """The last lines: usage (null counts when the server reported none), the error if any,
        whole answer, the status (`status`, else the turn's), the exit code and what `ask` put
        in `result.memory` (memory_used, memory_written: memory/report.py)."""
        if result.usage_reported:
            self.emit("usage", **result.usage.to_dict())
        else:  # the server reported none: null, never a count of 0
            self.emit("usage", prompt_tokens=None, completion_tokens=None, total_tokens=None)
        if result.error is not None:
            self.emit("error", message=result.error.user_message(), exit_code=exit_code)
        self.emit(
            "end",
            session_id=result.session_id,
            model=result.model,
            answer=result.answer,
            status=status or result.status,
            finish_reason=result.finish_reason,
            exit_code=exit_code,
            **({"parsed": parsed} if parsed is not None else {}),
            **({"fallback": result.fallback} if result.fallback is not None else {}),
            **result.memory,
        )

    def finish(self) -> None:
        self.notices.clear_status()


class MarkdownView(PlainView):
    """Rendered markdown on a TTY through the streaming renderer; a stalled stream's pending
    frame is still drawn (stallredraw.StallRedraw)."""

    def __init__(self, out: TextIO, err: TextIO, *, waiting: str | None = None) -> None:
        super().__init__(out, err, waiting=waiting)
        self.console = make_console(file=out)
        self.stream = StreamView(self.console)
        self.frames = StallRedraw(self.stream)
        self.tail: LiveTail | None = None  # a running command's last lines, on stderr

    def tool_output(self, text: str) -> None:
        """A running command's output (from its reader threads): the live tail, on a terminal."""
        if not self.notices.tty:
            return
        if self.tail is None:
            self.tail = LiveTail(self.notices.err)
        self.tail.feed(text)

    def tool_end(self, prepared: PreparedCall, result: ToolResult, decision: Decision) -> None:
        self._end_tail()
        super().tool_end(prepared, result, decision)

    def _end_tail(self) -> None:
        tail, self.tail = self.tail, None
        if tail is not None:
            tail.erase()

    def text(self, delta: str) -> None:
        self.notices.clear_status()
        with self.frames.lock:
            self.stream.feed(delta)
            self.frames.schedule()

    def reasoning(self, delta: str) -> None:
        self.notices.clear_status()
        with self.frames.lock:
            self.stream.reasoning(delta)
            self.frames.schedule()

    def notice(self, text: str) -> None:
        self.notices.clear_status()
        with self.frames.lock:
            self.stream.notice(text)

    def pause(self) -> None:
        """Settle the live tail (it stays on screen as final) before a tool or a prompt."""
        self.notices.clear_status()
        self.frames.cancel()
        with self.frames.lock:
            self.stream.finish()

    def finish(self) -> None:
        self.pause()
        self.frames.close()

    def abort(self, note: str) -> None:
        self._end_tail()
        self.notices.clear_status()
        self.frames.close()
        with self.frames.lock:
            self.stream.abort(note)


class _AnswerOut:
    """stdout for the answer. When its reader goes away (`countbot ask … | head -1`: EPIPE) the
    first failed write raises OutputClosed, so the engine ends the turn as on Ctrl-C and saves
    it; later writes are dropped. guarded() then points stdout at /dev/null and exits 0."""

    def __init__(self, out: TextIO) -> None:
        self._out = out
        self.reader_gone = False

    def write(self, text: str) -> None:
        if not self.reader_gone:
            try:
                self._out.write(text)
            except BrokenPipeError as exc:
                self._gone(exc)

    def flush(self) -> None:
        if not self.reader_gone:
            try:
                self._out.flush()
            except BrokenPipeError as exc:
                self._gone(exc)

    def _gone(self, exc: BrokenPipeError) -> None:
        self.reader_gone = True
        raise OutputClosed(exc.errno, "the reader of the answer closed the pipe") from exc
