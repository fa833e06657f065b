"""jsonsafe.loads_bounded: depth and integer limits, checked without recursion, in linear time."""

from __future__ import annotations

import json
import sys
import time

import pytest

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


def _best_of(fn: object, runs: int = 3) -> float:
    best = float("inf")
    for _ in range(runs):
        t0 = time.perf_counter()
        fn()  # type: ignore[operator]
        best = min(best, time.perf_counter() - t0)
    return best


def test_the_depth_scan_is_linear() -> None:
    # the slow path: more brackets than the limit, strings and escapes to cut out
    unit = '{"role": "user", "content": "a [b] \\"c\\" {d}", "n": [1, 2]},'

    def doc(n: int) -> str:
        return "[" + unit * n + "{}]"

    small, big = doc(5_000), doc(50_000)
    t_small = _best_of(lambda: check_depth(small))
    t_big = _best_of(lambda: check_depth(big))
    assert t_big < 10 * t_small * 3  # 10x the input: well under the 100x of a quadratic scan
    # and hostile shapes stay cheap: an unterminated string of escaped quotes, pure brackets
    t0 = time.perf_counter()
    for text in ("[" * 300 + '"' + '\\"' * 1_000_000, "[" * 4_000_000, "[" * 300 + '"' * 2_000_000):
        with pytest.raises(ValueError):
            loads_bounded(text)
    assert time.perf_counter() - t0 < 5
