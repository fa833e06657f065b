"""A small JSON-schema checker for the subset tool schemas and `ask --schema` use.

Supported: `type` (object, string, integer, number, boolean, array, null, or a list of them),
`properties`, `required`, `additionalProperties: false`, `enum`, `const`, `minimum`, `maximum`,
`minLength`, `maxLength`, `items`, `minItems`, `maxItems`; other keywords are not checked.
Messages name the argument (or, for `ask --schema`, the property) and say what to send, e.g.
"argument 'path' is required" or "'mode' must be one of overwrite, append". `coerce` first
mends what small models often get wrong: "12" for an integer, "true" for a boolean.
"""

from __future__ import annotations

from typing import Any

_TYPE_WORDS = {
    "object": "an object",
    "string": "a string",
    "integer": "an integer",
    "number": "a number",
    "boolean": "true or false",
    "array": "an array",
    "null": "null",
}


def validate(
    schema: dict[str, Any], value: Any, name: str = "", *, noun: str = "argument"
) -> list[str]:
    """Every violation of `schema` by `value`, as one-line messages ([] if it conforms).
    `noun` names an object's members in the messages ("argument", "property")."""
    expected = schema.get("type")
    kinds = [expected] if isinstance(expected, str) else expected
    if isinstance(kinds, list) and kinds and not any(_has_type(value, str(k)) for k in kinds):
        label = f"'{name}'" if name else ("arguments" if noun == "argument" else "the answer")
        words = " or ".join(_TYPE_WORDS.get(str(k), str(k)) for k in kinds)
        return [f"{label} must be {words}"]
    errors: list[str] = []
    label = f"'{name}'" if name else "the value"
    if "enum" in schema and value not in schema["enum"]:
        choices = ", ".join(str(c) for c in schema["enum"])
        errors.append(f"{label} must be one of {choices}")
    if "const" in schema and value != schema["const"]:
        errors.append(f"{label} must be {schema['const']!r}")
    if _is_number(value):
        errors.extend(_check_bounds(schema, value, name))
    if isinstance(value, str | list):
        errors.extend(_check_length(schema, value, label))
    if isinstance(value, dict):
        errors.extend(_check_object(schema, value, name, noun))
    if isinstance(value, list) and isinstance(schema.get("items"), dict):
        for i, item in enumerate(value):
            errors.extend(validate(schema["items"], item, f"{name}[{i}]", noun=noun))
    return errors


def _check_object(schema: dict[str, Any], value: dict[str, Any], name: str, noun: str) -> list[str]:
    props: dict[str, Any] = schema.get("properties") or {}
    prefix = f"{name}." if name else ""
    errors = [
        f"{noun} '{prefix}{key}' is required"
        for key in schema.get("required") or ()
        if key not in value
    ]
    if schema.get("additionalProperties") is False:
        for key in value:
            if key not in props:
                allowed = ", ".join(props) or "none"
                errors.append(f"unknown {noun} '{prefix}{key}'; allowed: {allowed}")
    for key, sub in props.items():
        if key in value and isinstance(sub, dict):
            errors.extend(validate(sub, value[key], prefix + key, noun=noun))
    return errors


def _check_length(schema: dict[str, Any], value: str | list[Any], label: str) -> list[str]:
    unit = "characters" if isinstance(value, str) else "items"
    low_key, high_key = (
        ("minLength", "maxLength") if isinstance(value, str) else ("minItems", "maxItems")
    )
    low, high = schema.get(low_key), schema.get(high_key)
    errors = []
    if isinstance(low, int) and len(value) < low:
        errors.append(f"{label} must have at least {low} {unit}")
    if isinstance(high, int) and len(value) > high:
        errors.append(f"{label} must have at most {high} {unit}")
    return errors


def _check_bounds(schema: dict[str, Any], value: float, name: str) -> list[str]:
    errors = []
    low, high = schema.get("minimum"), schema.get("maximum")
    if low is not None and value < low:
        errors.append(f"'{name}' must be >= {low}")
    if high is not None and value > high:
        errors.append(f"'{name}' must be <= {high}")
    return errors


def _is_number(value: Any) -> bool:
    return isinstance(value, (int, float)) and not isinstance(value, bool)


def _has_type(value: Any, expected: str) -> bool:
    if expected == "integer":
        return _is_number(value) and float(value).is_integer()
    if expected == "number":
        return _is_number(value)
    if expected == "null":
        return value is None
    checks: dict[str, type | tuple[type, ...]] = {
        "object": dict,
        "string": str,
        "boolean": bool,
        "array": list,
    }
    wanted = checks.get(expected)
    return True if wanted is None else isinstance(value, wanted)


def coerce(schema: dict[str, Any], args: dict[str, Any]) -> dict[str, Any]:
    """A copy of `args` with top-level scalars of the wrong JSON type mended where unambiguous:
    "12" -> 12 for integers, "1.5" -> 1.5 for numbers, "true"/"false" for booleans, 3.0 -> 3."""
    props: dict[str, Any] = schema.get("properties") or {}
    out = dict(args)
    for key, value in args.items():
        sub = props.get(key)
        if isinstance(sub, dict):
            out[key] = _coerce_scalar(sub.get("type"), value)
    return out


def _coerce_scalar(expected: Any, value: Any) -> Any:
    if expected == "integer":
        if isinstance(value, float) and value.is_integer():
            return int(value)
        if isinstance(value, str) and value.strip().lstrip("+-").isdigit():
            return int(value.strip())
    elif expected == "number" and isinstance(value, str):
        try:
            return float(value) if "." in value else int(value)
        except ValueError:
            return value
    elif expected == "boolean" and isinstance(value, str) and value.lower() in ("true", "false"):
        return value.lower() == "true"
    return value
