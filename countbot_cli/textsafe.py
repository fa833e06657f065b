"""Make untrusted text (model output, tool output, titles) safe to print on a terminal (SPEC §10).

`sanitize` removes escape sequences (CSI, OSC, DCS/SOS/PM/APC strings, other ESC sequences, and
their 8-bit C1 forms) and every other C0/C1 control except newline and tab; CRLF and lone CR
become newlines, so a CR cannot overwrite what is already on the line. An unterminated sequence
loses only its introducer, so no text is hidden.

It does not touch rich markup: print untrusted text with `markup=False` or as a rich `Text` /
`Markdown`, never as a markup string, so `[red]` prints as text.

No third-party imports here: every layer may use it.
"""

from __future__ import annotations

import re

_CSI = r"(?:\x1b\[|\x9b)[0-?]*[ -/]*[@-~]"
_STRING = r"(?:\x1b[\]PX^_]|[\x90\x98\x9d\x9e\x9f])[^\x07\x1b\x9c]*(?:\x07|\x1b\\|\x9c)"
_OTHER_ESC = r"\x1b[ -/]*[0-~]"
_SEQUENCE = re.compile(f"{_CSI}|{_STRING}|{_OTHER_ESC}")
# C0/C1 controls (but \n and \t), and the bidi embedding/override/isolate controls, which can
# make text display in another order than it is stored ("Trojan Source")
_CONTROL = re.compile(r"[\x00-\x08\x0b-\x1f\x7f-\x9f\u202a-\u202e\u2066-\u2069]")
_NEWLINES = re.compile(r"\r\n?")

# the start of a sequence that a later chunk may complete (for StreamSanitizer)
_PARTIAL = re.compile(
    r"(?:(?:\x1b\[|\x9b)[0-?]*[ -/]*"
    r"|(?:\x1b[\]PX^_]|[\x90\x98\x9d\x9e\x9f])[^\x07\x1b\x9c]*\x1b?"
    r"|\x1b[ -/]*"
    r"|\r)\Z"
)
_PARTIAL_WINDOW = 4096


def sanitize(text: str) -> str:
    """`text` with escape sequences and control characters (except \\n and \\t) removed."""
    if not _CONTROL.search(text):
        return text
    text = _NEWLINES.sub("\n", text)
    text = _SEQUENCE.sub("", text)
    return _CONTROL.sub("", text)


def sanitize_line(text: str) -> str:
    """`sanitize`, then every run of whitespace (newlines, tabs) as one space: for titles."""
    return " ".join(sanitize(text).split())


class StreamSanitizer:
    """`sanitize` for text arriving in chunks: a sequence split across chunks is still removed.

    `feed` returns what is safe to print now and keeps back a possible unfinished sequence (at
    most a few KB); `flush` returns the rest at the end of the stream.
    """

    def __init__(self) -> None:
        self._pending = ""

    def feed(self, chunk: str) -> str:
        text = self._pending + chunk
        self._pending = ""
        match = _PARTIAL.search(text, max(0, len(text) - _PARTIAL_WINDOW))
        if match and len(text) - match.start() < _PARTIAL_WINDOW:
            self._pending = text[match.start() :]
            text = text[: match.start()]
        return sanitize(text)

    def flush(self) -> str:
        text, self._pending = self._pending, ""
        return sanitize(text)
