"""The small JSON-schema checker used for tool arguments."""

from __future__ import annotations

from typing import Any

from countbot_cli.tools.schema import coerce, validate

SCHEMA: dict[str, Any] = {
    "type": "object",
    "properties": {
        "path": {"type": "string"},
        "mode": {"type": "string", "enum": ["overwrite", "append"]},
        "start_line": {"type": "integer", "minimum": 1},
        "timeout": {"type": "integer", "minimum": 1, "maximum": 3600},
        "ratio": {"type": "number"},
        "flag": {"type": "boolean"},
        "paths": {"type": "array", "items": {"type": "string"}},
        "opts": {
            "type": "object",
            "properties": {"depth": {"type": "integer"}},
            "required": ["depth"],
        },
    },
    "required": ["path"],
    "additionalProperties": False,
}


def test_conforming_arguments_have_no_errors() -> None:
    args = {
        "path": "a",
        "mode": "append",
        "start_line": 3,
        "ratio": 0.5,
        "flag": False,
        "paths": ["x", "y"],
        "opts": {"depth": 2},
    }
    assert validate(SCHEMA, args) == []


def test_required() -> None:
    assert validate(SCHEMA, {}) == ["argument 'path' is required"]


def test_enum() -> None:
    assert validate(SCHEMA, {"path": "a", "mode": "replace"}) == [
        "'mode' must be one of overwrite, append"
    ]


def test_types() -> None:
    assert validate(SCHEMA, {"path": 3}) == ["'path' must be a string"]
    assert validate(SCHEMA, {"path": "a", "start_line": "x"}) == ["'start_line' must be an integer"]
    assert validate(SCHEMA, {"path": "a", "start_line": 1.5}) == ["'start_line' must be an integer"]
    assert validate(SCHEMA, {"path": "a", "start_line": True}) == [
        "'start_line' must be an integer"
    ]
    assert validate(SCHEMA, {"path": "a", "flag": 1}) == ["'flag' must be true or false"]
    assert validate(SCHEMA, {"path": "a", "ratio": "fast"}) == ["'ratio' must be a number"]
    assert validate(SCHEMA, {"path": "a", "paths": "x"}) == ["'paths' must be an array"]
    assert validate(SCHEMA, []) == ["arguments must be an object"]


def test_array_items_and_nested_objects() -> None:
    assert validate(SCHEMA, {"path": "a", "paths": ["x", 2]}) == ["'paths[1]' must be a string"]
    assert validate(SCHEMA, {"path": "a", "opts": {}}) == ["argument 'opts.depth' is required"]


def test_minimum_and_maximum() -> None:
    assert validate(SCHEMA, {"path": "a", "start_line": 0}) == ["'start_line' must be >= 1"]
    assert validate(SCHEMA, {"path": "a", "timeout": 9999}) == ["'timeout' must be <= 3600"]


def test_additional_properties_false_names_the_allowed_ones() -> None:
    (msg,) = validate(SCHEMA, {"path": "a", "colour": "red"})
    assert msg.startswith("unknown argument 'colour'; allowed: path, mode, start_line")


def test_several_errors_are_all_reported() -> None:
    assert len(validate(SCHEMA, {"mode": "x", "start_line": 0})) == 3


def test_coerce_mends_unambiguous_scalars_only() -> None:
    got = coerce(
        SCHEMA,
        {
            "path": "a",
            "start_line": "12",
            "flag": "True",
            "ratio": "0.5",
            "timeout": 30.0,
            "mode": "append",
        },
    )
    assert got == {
        "path": "a",
        "start_line": 12,
        "flag": True,
        "ratio": 0.5,
        "timeout": 30,
        "mode": "append",
    }
    assert coerce(SCHEMA, {"start_line": "twelve", "flag": "yes"}) == {
        "start_line": "twelve",
        "flag": "yes",
    }
    assert validate(SCHEMA, coerce(SCHEMA, {"path": "a", "start_line": "twelve"})) == [
        "'start_line' must be an integer"
    ]
