"""jsonsafe.loads_bounded: depth and integer limits, checked without recursion, in linear time."""

from __future__ import annotations

import json
import re
import sys
from typing import Any

import pytest

from countbot_cli import jsonsafe
from countbot_cli.jsonsafe import (
    MAX_INT_DIGITS,
    MAX_JSON_DEPTH,
    JSONLimitError,
    check_depth,
    loads_bounded,
)


def _nested(depth: int, open_: str = "[", close: str = "]") -> str:
    return open_ * depth + close * depth


def test_the_limit_is_exact_for_arrays_and_objects() -> None:
    assert loads_bounded(_nested(MAX_JSON_DEPTH)) is not None
    with pytest.raises(JSONLimitError, match=f"over {MAX_JSON_DEPTH} levels"):
        loads_bounded(_nested(MAX_JSON_DEPTH + 1))
    objects = '{"a":' * MAX_JSON_DEPTH + "1" + "}" * MAX_JSON_DEPTH
    assert loads_bounded(objects)["a"]["a"] is not None
    with pytest.raises(JSONLimitError):
        loads_bounded('{"a":[' * 130 + "1" + "]}" * 130)  # 260 levels, mixed


@pytest.mark.parametrize("depth", [900, 990, 5_000, 200_000])
def test_deep_input_is_a_limit_error_never_a_recursion_error(depth: int) -> None:
    for text in (_nested(depth), "[" * depth, '{"k":' * depth + "0" + "}" * depth):
        with pytest.raises(JSONLimitError):
            loads_bounded(text)
        with pytest.raises(JSONLimitError):
            loads_bounded(text.encode())


def test_brackets_inside_strings_do_not_count() -> None:
    text = json.dumps({"content": "[" * 5_000 + "{" * 5_000, "list": ["]" * 300, "[[["]})
    assert loads_bounded(text)["list"][1] == "[[["
    # an escaped quote does not end the string, an escaped backslash does
    tricky = json.dumps(['\\"' + "[" * 400, "\\", "[" * 400 + '"'])
    assert loads_bounded(tricky) == ['\\"' + "[" * 400, "\\", "[" * 400 + '"']
    # brackets that only look like they are inside a string are counted
    with pytest.raises(JSONLimitError):
        loads_bounded('["\\\\"' + "," + "[" * 300 + "]" * 300 + "]")


@pytest.mark.parametrize(("depth", "ok"), [(255, True), (256, False), (300, False), (990, False)])
def test_string_heavy_documents_are_measured_after_parsing(depth: int, ok: bool) -> None:
    # more strings than brackets (a session file): parsed, then measured level by level
    text = "[" + '"s",' * 5_000 + "[" * depth + "]" * depth + "]"  # total depth: depth + 1
    if ok:
        assert len(loads_bounded(text)) == 5_001
    else:
        with pytest.raises(JSONLimitError, match="nested too deeply"):
            loads_bounded(text)


def test_many_shallow_brackets_are_fine() -> None:
    doc = [[i, {"x": [i]}] for i in range(20_000)]
    assert loads_bounded(json.dumps(doc)) == doc


def test_long_integers_are_refused_floats_and_strings_are_not() -> None:
    assert loads_bounded("9" * MAX_INT_DIGITS) == int("9" * MAX_INT_DIGITS)
    assert loads_bounded("-" + "9" * MAX_INT_DIGITS) < 0
    with pytest.raises(JSONLimitError, match="digits"):
        loads_bounded('{"path": ' + "1" * (MAX_INT_DIGITS + 1) + "}")
    assert loads_bounded(json.dumps({"n": "1" * 10_000}))["n"] == "1" * 10_000
    assert loads_bounded("0." + "1" * 10_000) == pytest.approx(1 / 9)


def test_long_integers_are_refused_even_with_the_interpreter_limit_lifted() -> None:
    if not hasattr(sys, "set_int_max_str_digits"):
        pytest.skip("this Python has no int-str limit")
    old = sys.get_int_max_str_digits()
    sys.set_int_max_str_digits(0)
    try:
        with pytest.raises(JSONLimitError, match="digits"):
            loads_bounded("[" + "7" * 50_000 + "]")
        assert loads_bounded("[12]") == [12]
    finally:
        sys.set_int_max_str_digits(old)


def test_malformed_json_is_still_a_decode_error() -> None:
    with pytest.raises(json.JSONDecodeError):
        loads_bounded('{"a": ')
    with pytest.raises(ValueError) as info:
        loads_bounded(b"\xff\xfe\x00garbage")
    assert not isinstance(info.value, JSONLimitError)


# a stream chunk goes straight to json's scanner: the same value, or the same error, as json.loads
AS_JSON_LOADS = [
    '{"choices":[{"index":0,"delta":{"content":" the"}}]}',
    ' {"a": 1}',
    '{"a": 1} ',
    '{"a": 1}\n',
    "\t[1, 2]",
    '{"a": 1} {"b": 2}',
    '{"a": 1}x',
    "[1, 2]]",
    "",
    "   ",
    "nul",
    '"text"',
    "12",
    "-0.5e3",
    "NaN",
    "[Infinity, -Infinity]",
    '{"a": 1, "a": 2}',
    '{"\\ud83c\\udf0d": "\\u00e9"}',
    '{"a": [1, 2, {"b": null}], "c": true, "d": false}',
]


@pytest.mark.parametrize("text", AS_JSON_LOADS)
def test_a_chunk_parses_as_json_loads_would(text: str) -> None:
    try:
        expected: Any = json.loads(text)
    except json.JSONDecodeError as e:
        with pytest.raises(json.JSONDecodeError) as info:
            loads_bounded(text)
        assert (info.value.msg, info.value.pos) == (e.msg, e.pos)
    else:
        got = loads_bounded(text)
        assert json.dumps(got) == json.dumps(expected)  # NaN != NaN; their text is equal
        assert json.dumps(loads_bounded(text.encode())) == json.dumps(expected)


class _CountedPattern:
    """A compiled regex that records how many characters each `sub` call was given."""

    def __init__(self, pattern: re.Pattern[bytes], seen: list[int]) -> None:
        self.pattern, self.seen = pattern, seen

    def sub(self, repl: bytes, data: bytes) -> bytes:
        self.seen.append(len(data))
        return self.pattern.sub(repl, data)


@pytest.fixture
def scan_work(monkeypatch: pytest.MonkeyPatch) -> dict[str, list[int]]:
    """What the bracket scan does: the brackets it sums (`summed`, one entry a slice) and the
    bytes each regex pass reads (`passes`). Counted, not timed: a loaded machine moves neither."""
    work: dict[str, list[int]] = {"summed": [], "passes": []}
    real = jsonsafe.accumulate

    def counted(part: Any, initial: int) -> Any:
        work["summed"].append(len(part))
        return real(part, initial=initial)

    monkeypatch.setattr(jsonsafe, "accumulate", counted)
    for name in ("_ESCAPE", "_STRING"):
        monkeypatch.setattr(
            jsonsafe, name, _CountedPattern(getattr(jsonsafe, name), work["passes"])
        )
    return work


def test_the_depth_scan_is_linear(scan_work: dict[str, list[int]]) -> None:
    # the slow path: more brackets than the limit, strings and escapes to cut out
    unit = '{"role": "user", "content": "a [b] \\"c\\" {d}", "n": [1, 2]},'
    for n in (5_000, 50_000):
        text = "[" + unit * n + "{}]"
        scan_work["summed"].clear()
        scan_work["passes"].clear()
        check_depth(text)
        # each bracket outside a string summed once (a rescan of earlier slices sums more),
        # each regex pass reads the text at most once, and there are two passes at most
        assert 0 < sum(scan_work["summed"]) <= 4 * n + 4, (n, scan_work["summed"])
        assert len(scan_work["passes"]) == 2 and max(scan_work["passes"]) <= len(text)


def test_hostile_shapes_stop_at_the_first_slice_over_the_limit(
    scan_work: dict[str, list[int]],
) -> None:
    with pytest.raises(JSONLimitError):
        loads_bounded("[" * 4_000_000)
    assert sum(scan_work["summed"]) <= jsonsafe._SLICE, scan_work["summed"]
    # strings outnumber the brackets: parsed (json's C parser, linear) and refused as malformed,
    # an unterminated string of escaped quotes as much as a run of empty strings
    for text in ("[" * 300 + '"' + '\\"' * 1_000_000, "[" * 300 + '"' * 2_000_000):
        with pytest.raises(ValueError):
            loads_bounded(text)
    assert scan_work["passes"] == []
