"""Make untrusted text (model output, tool output, titles) safe to print on a terminal (SPEC §10).

`sanitize` removes escape sequences and every C0/C1 control except newline and tab, without
hiding text (an unterminated or over-long sequence loses only its introducer); `StreamSanitizer`
does the same on a stream, whatever its chunks. `json_text` escapes the same characters inside
JSON. `visible`, `layout` and `compact` show every invisible character of text a person must
read exactly, and `cells` measures it. `LazyPattern` is a regex compiled on first use. Never
print untrusted text as rich markup. No third-party imports: every layer may use it.
docs/design/robustness.md says more.
"""

from __future__ import annotations

import json
import math
import re
import unicodedata
from collections.abc import Callable
from typing import Any


class LazyPattern:
    """`re.compile(source, flags)`, done the first time `.re` is read rather than at import."""

    __slots__ = ("_compiled", "_flags", "_source")

    def __init__(self, source: str, flags: int = 0) -> None:
        self._source, self._flags = source, flags
        self._compiled: re.Pattern[str] | None = None

    @property
    def re(self) -> re.Pattern[str]:
        if self._compiled is None:  # two threads may both compile it: the same pattern
            self._compiled = re.compile(self._source, self._flags)
        return self._compiled


MAX_STRING = 4096  # body of an OSC/DCS/SOS/PM/APC string sequence
MAX_PARAMS = 256  # CSI parameter bytes
_MAX_INTER = 16  # intermediate bytes of a CSI or other ESC sequence

_CSI_START = r"(?:\x1b\[|\x9b)"
_STRING_START = r"(?:\x1b[\]PX^_]|[\x90\x98\x9d\x9e\x9f])"
_STRING_BODY = rf"[^\x07\x1b\x9c]{{0,{MAX_STRING}}}"
_CSI = rf"{_CSI_START}[0-?]{{0,{MAX_PARAMS}}}[ -/]{{0,{_MAX_INTER}}}[@-~]"
_STRING = rf"{_STRING_START}{_STRING_BODY}(?:\x07|\x1b\\|\x9c)"
_OTHER_ESC = rf"\x1b[ -/]{{0,{_MAX_INTER}}}[0-~]"
_SEQUENCE = LazyPattern(f"{_CSI}|{_STRING}|{_OTHER_ESC}")  # only text with a control in it
# C0/C1 controls (but \n and \t), and the bidi embedding/override/isolate controls, which can
# make text display in another order than it is stored ("Trojan Source")
_CONTROL = re.compile(r"[\x00-\x08\x0b-\x1f\x7f-\x9f\u202a-\u202e\u2066-\u2069]")
_NEWLINES = re.compile(r"\r\n?")

# every proper prefix of a sequence above: the start of one that a later chunk may complete
_PARTIAL = LazyPattern(
    rf"(?:{_CSI_START}[0-?]{{0,{MAX_PARAMS}}}[ -/]{{0,{_MAX_INTER}}}"
    rf"|{_STRING_START}{_STRING_BODY}\x1b?"
    rf"|\x1b[ -/]{{0,{_MAX_INTER}}})\Z"
)
# the longest such prefix: an introducer of two, a full body, the ESC of a final ESC \
_PARTIAL_MAX = 2 + MAX_STRING + 1
_STRING_HEAD = LazyPattern(_STRING_START)
_STRING_STOP = re.compile(r"[\x07\x1b\x9c\r]")  # ends or may end a held string's body
# in JSON: what the terminal would act on, plus the line/paragraph separators
_JSON_UNSAFE = LazyPattern(r"[\x7f-\x9f\u2028\u2029\u202a-\u202e\u2066-\u2069]")


def sanitize(text: str) -> str:
    """`text` with escape sequences and control characters (except \\n and \\t) removed."""
    if not _CONTROL.search(text):
        return text
    return _strip(_NEWLINES.sub("\n", text))


def _strip(text: str) -> str:
    """`sanitize` for text whose line ends are already \\n."""
    if not _CONTROL.search(text):
        return text
    return _CONTROL.sub("", _SEQUENCE.re.sub("", text))


def sanitize_line(text: str) -> str:
    """`sanitize`, then every run of whitespace (newlines, tabs) as one space: for titles."""
    return " ".join(sanitize(text).split())


def json_text(obj: Any, *, indent: int | None = 2) -> str:
    """`obj` as JSON (non-ASCII kept readable) with DEL, C1 and bidi controls, which
    `ensure_ascii=False` leaves raw, written as \\u escapes: the same JSON value, inert on a
    terminal. Such characters only occur inside JSON strings, where an escape means the same."""
    try:
        dumped = json.dumps(obj, ensure_ascii=False, indent=indent, allow_nan=False)
    except ValueError:  # NaN or Infinity, which JSON has no word for: null instead
        dumped = json.dumps(_finite(obj), ensure_ascii=False, indent=indent, allow_nan=False)
    return _JSON_UNSAFE.re.sub(lambda m: f"\\u{ord(m.group()):04x}", dumped)


def _finite(obj: Any) -> Any:
    """`obj` with every float that is not finite made None (lists, tuples and dicts walked)."""
    if isinstance(obj, float):
        return obj if math.isfinite(obj) else None
    if isinstance(obj, dict):
        return {k: _finite(v) for k, v in obj.items()}
    if isinstance(obj, (list, tuple)):
        return [_finite(v) for v in obj]
    return obj


def _hold_from(text: str) -> int:
    """Where the unfinished sequence at the end of `text` starts (len(text) if none): the
    leftmost start of a proper prefix of a sequence that reaches the end. A prefix holds no
    BEL or ST and an ESC only first or last, so the search starts past the last of those."""
    end = len(text)
    start = max(
        end - _PARTIAL_MAX,
        text.rfind("\x07") + 1,
        text.rfind("\x9c") + 1,
        text.rfind("\x1b", 0, end - 1),
        0,
    )
    match = _PARTIAL.re.search(text, start)
    return match.start() if match else end


class StreamSanitizer:
    """`sanitize` for text arriving in chunks, whatever the cuts: the concatenated output of
    `feed`s and `flush` equals `sanitize` of the concatenated input.

    `feed` returns what is safe to print now and keeps back a possible unfinished sequence (at
    most `MAX_STRING` + 4 characters: a longer one can no longer complete and is released as
    `sanitize` would show it); `flush` returns the rest at the end of the stream.
    """

    def __init__(self) -> None:
        self._pending = ""  # line ends already \n, but a last lone \r (maybe half of \r\n)
        self._room = -1  # body characters a held string sequence may still take (-1: none)

    def feed(self, chunk: str) -> str:
        if not self._pending and not _CONTROL.search(chunk):
            return chunk
        if len(chunk) <= self._room and not _STRING_STOP.search(chunk):
            # the held string sequence goes on: same result as below without rescanning it,
            # so a long sequence fed a character at a time costs linear time
            self._pending += chunk
            self._room -= len(chunk)
            return ""
        text = self._pending + chunk
        cr = "\r" if text.endswith("\r") else ""
        text = _NEWLINES.sub("\n", text[: len(text) - len(cr)])
        cut = _hold_from(text)
        self._hold(text[cut:] + cr)
        return _strip(text[:cut])

    def _hold(self, pending: str) -> None:
        self._pending = pending
        head = _STRING_HEAD.re.match(pending)
        extendable = head is not None and not pending.endswith(("\x1b", "\r"))
        self._room = head.end() + MAX_STRING - len(pending) if head and extendable else -1

    def flush(self) -> str:
        text = self._pending
        self._hold("")
        return sanitize(text)


# ---- text a person must read exactly (the approval prompt) ----

# candidates for escaping: everything but printable ASCII, newline and tab (see _hidden)
_NON_PLAIN = LazyPattern(r"[^\x20-\x7e\n\t]")
# categories never shown raw: controls, format (bidi, zero-width, soft hyphen, tags), line and
# paragraph separators, surrogates, private use, unassigned
_HIDDEN_CATEGORIES = frozenset({"Cc", "Cf", "Zl", "Zp", "Cs", "Co", "Cn"})
# blank-looking letters, marks and symbols (Hangul fillers, combining grapheme joiner, Mongolian
# vowel separator, braille blank); U+3000 (ideographic space) is kept: it is common in CJK text,
# and a run of it is counted like any run of blanks
_BLANK_LOOKALIKES = frozenset("\u115f\u1160\u3164\uffa0\u034f\u180e\u2800")
_NAMED = {"\r": "\\r", "\x1b": "\\x1b", "\x00": "\\0"}
BLANK_RUN = 48  # a run of blanks this many terminal columns wide (or wider) is shown as a count
BLANK_LINES_KEPT = 2  # blank lines of a run shown before the rest is counted
TAB_STOP = 8
_BLANKS = LazyPattern(r"[ \t\u3000]+")  # what visible() leaves blank: space, tab, U+3000
SGR = re.compile(r"\x1b\[[0-9;]*m")  # the prompt's own colours (never from untrusted text)


def _hidden(c: str) -> bool:
    if c in _BLANK_LOOKALIKES:
        return True
    cat = unicodedata.category(c)
    return cat in _HIDDEN_CATEGORIES or (cat == "Zs" and c != "\u3000")


def _escape(c: str) -> str:
    if c in _NAMED:
        return _NAMED[c]
    code = ord(c)
    if code < 0x100:
        return f"\\x{code:02x}"
    return f"\\u{code:04x}" if code < 0x10000 else f"\\U{code:08x}"


def visible(text: str, mark: Callable[[str], str] | None = None) -> str:
    """`text` with every control, invisible or look-alike blank character shown as an escape
    (`\\x1b`, `\\u202e`, `\\xa0`); `mark` styles each escape (reverse video on a terminal)."""

    def esc(m: re.Match[str]) -> str:
        c = m.group()
        if not _hidden(c):
            return c
        return mark(_escape(c)) if mark else _escape(c)

    return _NON_PLAIN.re.sub(esc, text)


def _is_blank(raw: str) -> bool:
    """A line that shows nothing: empty or blanks, after a diff or command marker."""
    body = raw[2:] if raw[:2] in ("$ ", "> ") else raw[1:] if raw[:1] in "+- " else raw
    return not body.strip(" \t\u3000")


def compact(lines: list[str]) -> list[str]:
    """Runs of blank lines cut to BLANK_LINES_KEPT plus a count (keeping each run's marker)."""
    out: list[str] = []
    run = 0
    for i, raw in enumerate(lines):
        same = i > 0 and _is_blank(raw) and _is_blank(lines[i - 1]) and raw[:1] == lines[i - 1][:1]
        run = run + 1 if same else 0
        if run < BLANK_LINES_KEPT:
            out.append(raw)
            continue
        if run == BLANK_LINES_KEPT:
            out.append("")  # placeholder for the count
        n = run - BLANK_LINES_KEPT + 1
        marker = raw[:2] if raw[:2] in ("$ ", "> ") else raw[:1].strip()
        out[-1] = f"{marker}[… {n} more blank line{'s' if n > 1 else ''} …]"
    return out


def cells(text: str) -> int:
    """Terminal columns `text` takes (no tabs or controls in it): East Asian wide and full-width
    characters take two, combining marks none."""
    width = 0
    for c in text:
        if c < "\u0300":
            width += 1
        elif unicodedata.combining(c):
            continue
        else:
            width += 2 if unicodedata.east_asian_width(c) in "WF" else 1
    return width


def layout(text: str, col: int = 0, count: Callable[[str], str] | None = None) -> str:
    """Blanks of a line made what the terminal shows: tabs expanded to spaces (stops every
    TAB_STOP columns, the line starting at column `col`) and a run of blanks BLANK_RUN or more
    columns wide replaced by `[… N blanks …]` (styled by `count`). `text` is already escaped
    (`visible`); SGR colour codes in it take no columns."""
    out: list[str] = []
    pos = 0
    for m in _BLANKS.re.finditer(text):
        before = text[pos : m.start()]
        out.append(before)
        col += cells(SGR.sub("", before))
        run = m.group()
        expanded = _expand(run, col)
        if cells(expanded) >= BLANK_RUN:
            shown = f"[… {len(run)} blank{'s' if len(run) > 1 else ''} …]"
            shown = count(shown) if count else shown
            out.append(shown)
            col += cells(SGR.sub("", shown))
        else:
            out.append(expanded)
            col += cells(expanded)
        pos = m.end()
    out.append(text[pos:])
    return "".join(out)


def _expand(run: str, col: int) -> str:
    """A run of blanks starting at column `col` with its tabs as spaces."""
    parts: list[str] = []
    for c in run:
        if c == "\t":
            n = TAB_STOP - col % TAB_STOP
            parts.append(" " * n)
            col += n
        else:
            parts.append(c)
            col += 2 if c == "\u3000" else 1
    return "".join(parts)


# Han (with extensions and compatibility ideographs), kana and Hangul syllables: the text that
# search and memory cut into character bigrams, as it has no spaces between words (a character
# class body, for `[...]`)
CJK_CHARS = (
    "\u3040-\u30ff\u31f0-\u31ff\u3400-\u4dbf\u4e00-\u9fff\uac00-\ud7af\uf900-\ufaff"
    "\U00020000-\U0003134f"
)
