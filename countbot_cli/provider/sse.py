"""An incremental, tolerant Server-Sent Events decoder: bytes in, events out.

Follows the WHATWG framing (HTML §9.2) with the tolerances chat servers need:

- lines end with CR, LF or CRLF, also when a CRLF is split across two feeds;
- bytes are buffered until a whole line arrived, so UTF-8 split across chunks decodes intact
  (CR and LF never occur inside a multi-byte UTF-8 sequence);
- `:` comment lines (keep-alives such as `: OPENROUTER PROCESSING`) are ignored;
- multi-line `data:` is joined with "\\n"; one optional space after the colon is stripped;
- events whose data is empty or blank are skipped (openai-python#2722 crashed on them);
- `close()` flushes a last line and a last event that had no blank line after it.

Cost: linear in the input. A line still incomplete when a feed ends is not searched again: the
next feed searches only the new bytes. A line longer than `max_line` bytes (MAX_LINE, 16 MiB,
by default) raises `LineTooLong` as soon as the pending bytes pass the cap, so memory stays
bounded by the cap plus one network chunk.

No third-party imports: the decoder is tested alone by cutting recorded streams anywhere.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

_LINE_END = re.compile(rb"[\r\n]")
_CR = 0x0D
_LF = 0x0A
_BOM = "\ufeff"
MAX_LINE = 16 * 1024 * 1024  # bytes in one SSE line (one `data:` line holds one whole chunk)


class LineTooLong(ValueError):
    """A line grew past the decoder's cap without ending."""

    def __init__(self, limit: int) -> None:
        super().__init__(f"a line of the event stream is longer than {limit:,} bytes")
        self.limit = limit


@dataclass(frozen=True)
class SSEEvent:
    """One dispatched event. `event` and `id` are None when the event did not set them."""

    data: str
    event: str | None = None
    id: str | None = None
    retry: int | None = None


class SSEDecoder:
    """Feed bytes as they arrive; each call returns the events completed by those bytes."""

    def __init__(self, max_line: int = MAX_LINE) -> None:
        self.max_line = max_line
        self._buf = bytearray()
        self._scanned = 0  # bytes of _buf already searched for a line end (none found)
        self._skip_lf = False  # the last feed ended with CR: a leading LF belongs to it
        self._first_line = True
        self._reset_event()

    def _reset_event(self) -> None:
        self._data: list[str] = []
        self._event: str | None = None
        self._id: str | None = None
        self._retry: int | None = None

    def feed(self, data: bytes) -> list[SSEEvent]:
        if not data:
            return []
        buf = self._buf
        start = len(buf)
        buf += data
        pos = 0
        if self._skip_lf:
            self._skip_lf = False
            if buf[start] == _LF:
                del buf[start]
        events: list[SSEEvent] = []
        search_from = self._scanned
        while (m := _LINE_END.search(buf, search_from)) is not None:
            end = m.start()
            if end - pos > self.max_line:
                raise LineTooLong(self.max_line)
            line = buf[pos:end]
            pos = end + 1
            if buf[end] == _CR:
                if pos < len(buf):
                    if buf[pos] == _LF:
                        pos += 1
                else:
                    self._skip_lf = True
            search_from = pos
            event = self._line(line)
            if event is not None:
                events.append(event)
        del buf[:pos]
        self._scanned = len(buf)
        if self._scanned > self.max_line:
            raise LineTooLong(self.max_line)
        return events

    def close(self) -> list[SSEEvent]:
        """End of stream: decode a last unterminated line and dispatch a pending event."""
        events: list[SSEEvent] = []
        if self._buf:
            line = bytes(self._buf)
            self._buf.clear()
            self._scanned = 0
            event = self._line(line)
            if event is not None:
                events.append(event)
        event = self._dispatch()
        if event is not None:
            events.append(event)
        self._skip_lf = False
        return events

    def _line(self, raw: bytes | bytearray) -> SSEEvent | None:
        line = raw.decode("utf-8", errors="replace")
        if self._first_line:
            self._first_line = False
            line = line.removeprefix(_BOM)
        if not line:
            return self._dispatch()
        if line.startswith(":"):
            return None
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
        return None

    def _dispatch(self) -> SSEEvent | None:
        data = "\n".join(self._data)
        event = SSEEvent(data=data, event=self._event or None, id=self._id, retry=self._retry)
        self._reset_event()
        return event if data.strip() else None


def decode_all(data: bytes) -> list[SSEEvent]:
    """Decode a whole body at once (a convenience for tests and non-streamed fallbacks)."""
    decoder = SSEDecoder()
    return decoder.feed(data) + decoder.close()
