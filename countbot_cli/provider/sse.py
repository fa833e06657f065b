"""An incremental, tolerant Server-Sent Events decoder: bytes in, events out.

WHATWG framing with what chat servers need: CR, LF or CRLF line ends (also split across reads),
UTF-8 intact across chunks, `:` comments ignored, multi-line `data:` joined, blank events
skipped, a last event without a blank line flushed by `close()`. The invariant: linear cost,
and memory bounded by `max_line` (MAX_LINE, 16 MiB: `LineTooLong`) plus one chunk. No
third-party imports: it is tested alone by cutting recorded streams anywhere.
docs/design/providers.md says more.
"""

from __future__ import annotations

import re
from typing import NamedTuple

_LINE_ENDS = re.compile("\r\n|\r|\n")
_BOM = "\ufeff"
MAX_LINE = 16 * 1024 * 1024  # bytes in one SSE line (one `data:` line holds one whole chunk)


class LineTooLong(ValueError):
    """A line grew past the decoder's cap without ending."""

    def __init__(self, limit: int) -> None:
        super().__init__(f"a line of the event stream is longer than {limit:,} bytes")
        self.limit = limit


class SSEEvent(NamedTuple):
    """One dispatched event. `event` and `id` are None when the event did not set them."""

    data: str
    event: str | None = None
    id: str | None = None
    retry: int | None = None


def _last_line_end(data: bytes | bytearray) -> int:
    """Where the last CR or LF of `data` is, or -1 (each byte of a feed is searched once)."""
    return max(data.rfind(b"\n"), data.rfind(b"\r"))


class SSEDecoder:
    """Feed bytes as they arrive; each call returns the events completed by those bytes.

    A feed's whole lines are decoded and split at once (one `decode`, one `split`): a chunk
    server sends, usually one or a few whole events, costs a few C calls and one short loop
    over its lines."""

    def __init__(self, max_line: int = MAX_LINE) -> None:
        self.max_line = max_line
        self._pending = bytearray()  # the start of a line whose end has not arrived yet
        self._skip_lf = False  # the last feed ended with CR: a leading LF belongs to it
        self._first = True
        self._data: list[str] = []
        self._event: str | None = None
        self._id: str | None = None
        self._retry: int | None = None

    def feed(self, data: bytes | bytearray) -> list[SSEEvent]:
        if self._skip_lf and data:
            self._skip_lf = False
            if data[0] == 0x0A:
                data = data[1:]
        if not data:
            return []
        end = _last_line_end(data)
        pending = self._pending
        if end < 0:
            pending += data
            if len(pending) > self.max_line:
                raise LineTooLong(self.max_line)
            return []
        whole = data if end == len(data) - 1 else data[: end + 1]
        if pending:
            whole = pending + whole
            self._pending = bytearray(data[end + 1 :])
        elif end + 1 < len(data):
            self._pending = bytearray(data[end + 1 :])
        if len(whole) > self.max_line:
            self._check_lines(whole)
        if len(self._pending) > self.max_line:
            raise LineTooLong(self.max_line)
        text = whole.decode("utf-8", errors="replace")
        if self._first:
            self._first = False
            text = text.removeprefix(_BOM)
        if "\r" in text:
            lines = _LINE_ENDS.split(text)
            self._skip_lf = text[-1] == "\r" and end == len(data) - 1
        else:
            lines = text.split("\n")
        lines.pop()  # the text ends with a line end: nothing after it
        return self._lines(lines)

    def _check_lines(self, whole: bytes | bytearray) -> None:
        """Refuse a line longer than the cap (only looked at when the feed is that long)."""
        for line in re.split(rb"\r\n|\r|\n", bytes(whole)):
            if len(line) > self.max_line:
                raise LineTooLong(self.max_line)

    def close(self) -> list[SSEEvent]:
        """End of stream: decode a last unterminated line and dispatch a pending event."""
        lines = []
        if self._pending:
            text = self._pending.decode("utf-8", errors="replace")
            self._pending = bytearray()
            if self._first:
                text = text.removeprefix(_BOM)
            lines.append(text)
        self._first = False
        self._skip_lf = False
        return self._lines([*lines, ""])

    def _lines(self, lines: list[str]) -> list[SSEEvent]:
        events: list[SSEEvent] = []
        for line in lines:
            if not line:
                event = self._dispatch()
                if event is not None:
                    events.append(event)
            elif line.startswith("data:"):
                value = line[5:]
                self._data.append(value[1:] if value[:1] == " " else value)
            elif line[0] != ":":  # a `:` line is a comment
                self._field(line)
        return events

    def _field(self, line: str) -> None:
        name, sep, value = line.partition(":")
        if sep and value.startswith(" "):
            value = value[1:]
        if name == "data":
            self._data.append(value)
        elif name == "event":
            self._event = value
        elif name == "id":
            if "\0" not in value:
                self._id = value
        elif name == "retry" and value.isdigit():
            self._retry = int(value)

    def _dispatch(self) -> SSEEvent | None:
        parts = self._data
        data = parts[0] if len(parts) == 1 else "\n".join(parts)
        event = None
        if data and not data.isspace():
            event = SSEEvent(data, self._event or None, self._id, self._retry)
        if parts:
            self._data = []
        self._event = self._id = self._retry = None
        return event
