"""`loads_bounded`: json.loads for JSON countbot did not just write itself, with limits.

Everything parsed from outside goes through it: the provider's stream, a model's tool
arguments, session files and the small cache files beside them. At most MAX_JSON_DEPTH (256)
levels of nesting, checked without recursion and in linear time, and integers of at most
MAX_INT_DIGITS (4,300) digits. Every failure is a ValueError (`JSONLimitError` for a limit);
RecursionError never escapes. Stdlib only, cheap to import. How the depth is checked:
docs/design/robustness.md.
"""

from __future__ import annotations

import functools
import json
import re
import sys
from array import array
from collections.abc import Callable
from itertools import accumulate
from typing import Any

MAX_JSON_DEPTH = 256
MAX_INT_DIGITS = 4300

_ESCAPE = re.compile(rb"\\.", re.DOTALL)  # cut first, so strings hold no escaped quote
_STRING = re.compile(rb'"[^"]*(?:"|\Z)')  # a string, or an unterminated one up to the end
_STEPS = bytes.maketrans(b"[{]}", b"\x01\x01\xff\xff")  # +1 / -1 as signed bytes
_NOT_BRACKET = bytes(c for c in range(256) if c not in b"[]{}")
_SLICE = 1 << 16


class JSONLimitError(ValueError):
    """The JSON is nested too deeply or holds an integer too long to convert safely."""


def too_deep_message(max_depth: int = MAX_JSON_DEPTH) -> str:
    return f"JSON nested too deeply (over {max_depth} levels)"


def loads_bounded(text: str | bytes | bytearray, *, max_depth: int = MAX_JSON_DEPTH) -> Any:
    """json.loads with the limits above; raises JSONLimitError or another ValueError."""
    opens = _opens(text)
    walk = opens > max_depth and _strings_and_escapes(text) > opens
    if opens > max_depth and not walk:
        _check_brackets(_utf8(text), max_depth)
    try:
        value = _loads(text)
    except (json.JSONDecodeError, JSONLimitError):
        raise
    except RecursionError:  # json's C parser stops at the interpreter's recursion limit
        raise JSONLimitError(too_deep_message(max_depth)) from None
    except ValueError as e:
        if "digits" not in str(e):
            raise  # e.g. UnicodeDecodeError
        raise JSONLimitError(f"JSON holds an integer over {MAX_INT_DIGITS} digits long") from None
    if walk and _deeper_than(value, max_depth):
        raise JSONLimitError(too_deep_message(max_depth))
    return value


def _loads(text: str | bytes | bytearray) -> Any:
    """json.loads, straight to its C scanner for a str that is one value with nothing around it
    (a stream chunk: json.loads' Python layers cost more than the scan); anything else, and
    every error, goes through json.loads itself, so results and messages are the same."""
    hook = _int_hook()
    if type(text) is str:
        try:
            value, end = _scanner(hook)(text, 0)
        except StopIteration:  # leading whitespace, or not JSON: json.loads says which
            pass
        else:
            if end == len(text):
                return value
    return json.loads(text, parse_int=hook)


@functools.cache
def _scanner(hook: Callable[[str], int] | None) -> Callable[[str, int], tuple[Any, int]]:
    decoder: Any = json.JSONDecoder(parse_int=hook)  # its C scanner: not in the type stubs
    return decoder.scan_once


def check_depth(text: str | bytes | bytearray, *, max_depth: int = MAX_JSON_DEPTH) -> None:
    """Raise JSONLimitError if `text` nests arrays/objects deeper than `max_depth`, before any
    parsing. Linear, never recursive; brackets inside strings do not count. Text that is not
    valid JSON may pass (json.loads then says what is wrong with it)."""
    if _opens(text) > max_depth:
        _check_brackets(_utf8(text), max_depth)


def _opens(text: str | bytes | bytearray) -> int:
    """How many arrays and objects `text` may open (C speed, no copy)."""
    if type(text) is str:
        return text.count("[") + text.count("{")
    return text.count(b"[") + text.count(b"{")  # type: ignore[arg-type]


def _strings_and_escapes(text: str | bytes | bytearray) -> int:
    if type(text) is str:
        return text.count('"') // 2 + text.count("\\")
    return text.count(b'"') // 2 + text.count(b"\\")  # type: ignore[arg-type]


def _check_brackets(data: bytes, max_depth: int) -> None:
    """Cut escapes and strings out, then sum the running depth of the brackets left."""
    if b"\\" in data:
        data = _ESCAPE.sub(b"", data)
    if b'"' in data:
        data = _STRING.sub(b"", data)
    steps = data.translate(_STEPS, _NOT_BRACKET)
    depth = 0
    for start in range(0, len(steps), _SLICE):
        part = array("b")
        part.frombytes(steps[start : start + _SLICE])
        if max(accumulate(part, initial=depth)) > max_depth:
            raise JSONLimitError(too_deep_message(max_depth))
        depth += sum(part)


def _deeper_than(value: Any, max_depth: int) -> bool:
    """Whether a parsed value nests deeper than `max_depth`: level by level, no recursion."""
    level = [value] if type(value) is list or type(value) is dict else []
    depth = 0
    while level:
        depth += 1
        if depth > max_depth:
            return True
        below: list[Any] = []
        for node in level:
            items = node.values() if type(node) is dict else node
            below += [x for x in items if type(x) is list or type(x) is dict]
        level = below
    return False


def _utf8(text: str | bytes | bytearray) -> bytes:
    if isinstance(text, str):
        return text.encode("utf-8", "surrogatepass")
    data = bytes(text)
    encoding = json.detect_encoding(data)
    if encoding == "utf-8":
        return data
    return data.decode(encoding, "replace").encode("utf-8")


_GET_LIMIT: Callable[[], int] | None = getattr(sys, "get_int_max_str_digits", None)


def _int_hook() -> Callable[[str], int] | None:
    """None (json's own int) when the interpreter's int-str limit is at least as strict."""
    limit = _GET_LIMIT() if _GET_LIMIT is not None else 0
    return None if 0 < limit <= MAX_INT_DIGITS else _bounded_int


def _bounded_int(digits: str) -> int:
    if len(digits) > MAX_INT_DIGITS + (digits[:1] == "-"):
        raise JSONLimitError(f"JSON holds an integer over {MAX_INT_DIGITS} digits long")
    return int(digits)
