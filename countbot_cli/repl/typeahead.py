"""The type-ahead queue: what is typed while an answer streams.

While a turn runs, `TypeAhead` puts the terminal in a quiet non-canonical mode (no echo, Ctrl-C
still a SIGINT) and a reader thread feeds every key to the REPL's `LineQueue`: Enter queues the
line, Esc Enter queues it in front and stops the answer, Up takes the last queued line back,
Ctrl-D on an empty line stops the answer and ends the chat.
The invariant: nothing typed is lost, and two lines are never merged into one message. The
approval prompt stops the reader first (`normal()`). Does nothing unless stdin is a POSIX
terminal. docs/design/chat.md says more.
"""

from __future__ import annotations

import codecs
import os
import signal
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from typing import Any

from countbot_cli.textsafe import sanitize_line
from countbot_cli.ui.terminal import QuietKeys

POLL = 0.05  # seconds the reader waits for a key before looking whether it should stop


@dataclass
class LineQueue:
    """The lines typed ahead and the one being typed. `feed` takes keys as the terminal sends
    them (escape sequences may be split across calls); True from it: stop the answer now."""

    lines: list[str] = field(default_factory=list)
    typing: str = ""
    quit: bool = False  # Ctrl-D on an empty line: stop the answer, then end the chat
    _escape: str = ""  # an escape sequence begun in an earlier chunk

    def feed(self, keys: str) -> bool:
        stop = False
        for ch in keys:
            stop = self._key(ch) or stop
        return stop

    def summary(self) -> str:
        """What is typed ahead, for the spinner's line: `  · queued: «a» «b» · typing: c`."""
        parts = []
        if self.lines:
            parts.append("queued: " + " ".join(f"«{_short(q)}»" for q in self.lines))
        if self.typing:
            parts.append(f"typing: {_short(self.typing)}")
        return "".join(f"  · {p}" for p in parts)

    def take_typing(self) -> str:
        """The line typed but not sent (the next prompt starts with it)."""
        text, self.typing = self.typing, ""
        return text

    def _key(self, ch: str) -> bool:
        if self._escape:
            return self._in_escape(ch)
        if ch == "\x1b":
            self._escape = ch
        elif ch in "\r\n":
            self._queue(front=False)
        elif ch == "\x04" and not self.typing:  # Ctrl-D, as at the prompt
            self.quit = True
            return True
        elif ch in "\x7f\b":
            self.typing = self.typing[:-1]
        elif ch == "\x15":  # Ctrl-U
            self.typing = ""
        elif ch == "\x17":  # Ctrl-W: the last word
            kept = self.typing.rstrip()
            self.typing = kept[: kept.rfind(" ") + 1]
        elif ch == "\t" or ch.isprintable():
            self.typing += ch
        return False

    def _in_escape(self, ch: str) -> bool:
        seq = self._escape + ch
        if seq in ("\x1b\r", "\x1b\n"):  # Esc Enter, Alt-Enter: send it now
            self._escape = ""
            return self._queue(front=True)
        if len(seq) == 2 and ch not in "[O":  # Alt-key: not a line editing key
            self._escape = ""
            return False
        if len(seq) > 2 and "\x40" <= ch <= "\x7e":  # the end of a CSI / SS3 sequence
            self._escape = ""
            if seq in ("\x1b[A", "\x1bOA") and self.lines and not self.typing:
                self.typing = self.lines.pop()  # Up: the last queued line, to edit
            return False
        self._escape = seq if len(seq) < 16 else ""
        return False

    def _queue(self, *, front: bool) -> bool:
        line, self.typing = self.typing, ""
        if not line.strip():
            return False
        if front:
            self.lines.insert(0, line)
        else:
            self.lines.append(line)
        return front


def _short(text: str) -> str:
    line = sanitize_line(text)
    return line if len(line) <= 30 else line[:29] + "…"


class TypeAhead(QuietKeys):
    """QuietKeys whose keys go to a LineQueue as they are typed (see the module)."""

    def __init__(self, stream: Any, queue: LineQueue) -> None:
        super().__init__(stream)
        self.queue = queue
        self._stop = threading.Event()
        self._decode = codecs.getincrementaldecoder("utf-8")("replace")
        self._thread: threading.Thread | None = None

    def __enter__(self) -> TypeAhead:
        if self._fd is None:
            return self
        import termios

        try:
            self._saved = termios.tcgetattr(self._fd)
            mode = termios.tcgetattr(self._fd)
            mode[0] &= ~termios.ICRNL  # Enter stays "\r"
            mode[3] &= ~(termios.ECHO | termios.ICANON | getattr(termios, "ECHOCTL", 0))
            mode[6][termios.VMIN], mode[6][termios.VTIME] = 1, 0
            termios.tcsetattr(self._fd, termios.TCSANOW, mode)
            self._quiet = mode
        except (termios.error, OSError):
            self._saved = None
            return self
        self._start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._halt()
        super().__exit__(*exc)

    @contextmanager
    def normal(self) -> Iterator[None]:
        """The usual mode, with no reader: the approval prompt reads the keys itself."""
        self._halt()
        with super().normal():
            yield
        if self._quiet is not None:
            self._start()

    def _start(self) -> None:
        self._stop.clear()
        self._thread = threading.Thread(target=self._read, name="countbot-typeahead", daemon=True)
        self._thread.start()

    def _halt(self) -> None:
        thread, self._thread = self._thread, None
        if thread is not None:
            self._stop.set()
            thread.join()

    def _read(self) -> None:
        import select

        fd = self._fd
        assert fd is not None
        while not self._stop.is_set():
            try:
                ready, _, _ = select.select([fd], [], [], POLL)
                if not ready:
                    continue
                data = os.read(fd, 1024)
            except (OSError, ValueError):
                return
            if not data:
                return
            if self.queue.feed(self._decode.decode(data)):
                os.kill(os.getpid(), signal.SIGINT)  # stop the answer: the line goes now
