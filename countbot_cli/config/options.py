"""Per-call model options: `-o KEY VALUE` on `ask` and the chat, and a role's front matter.

Known keys are checked (a number in range, a whole number, one of a few words); any other key is
passed through as an extra field of the request body (a JSON value when the text parses as one,
else the text), unless it is one edit away from a checked key (`temprature`: refused with
"did you mean"; `top_k` and `top_a`, other APIs' fields, pass). The fields countbot itself builds (model, messages, stream, tools, …) cannot be
replaced. `apply_options` puts temperature and max_tokens where the config file's keys go
(`Settings.temperature`, `Settings.max_tokens`) and the rest into the provider's `extra_body`,
which provider/openai_compat.py adds to the request.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Mapping
from dataclasses import replace
from types import MappingProxyType
from typing import TYPE_CHECKING, Any

from countbot_cli.config.file import did_you_mean
from countbot_cli.errors import UsageError
from countbot_cli.jsonsafe import loads_bounded

if TYPE_CHECKING:
    from countbot_cli.config.settings import Settings

EFFORTS = ("minimal", "low", "medium", "high")
# key: (kind, minimum, maximum); kind "number" | "integer" | "choice"
KNOWN: dict[str, tuple[str, float | None, float | None]] = {
    "temperature": ("number", 0.0, 2.0),
    "top_p": ("number", 0.0, 1.0),
    "max_tokens": ("integer", 1, None),
    "seed": ("integer", None, None),
    "reasoning_effort": ("choice", None, None),
    "frequency_penalty": ("number", -2.0, 2.0),
    "presence_penalty": ("number", -2.0, 2.0),
}
RESERVED = ("model", "messages", "stream", "stream_options", "tools", "tool_choice")
# request fields of other APIs one edit away from a checked key: passed through, not typos
NEIGHBOURS = ("top_k", "top_a")
MAX_VALUE_CHARS = 10_000


class OptionError(ValueError):
    """A bad option: the message names the key (callers add where it came from)."""


def parse_text(key: str, text: str) -> Any:
    """The value of `-o KEY TEXT`, typed: numbers for known numeric keys, JSON for others."""
    _check_key(key)
    kind = KNOWN.get(key, ("extra", None, None))[0]
    if kind in ("number", "integer"):
        try:
            value: Any = int(text) if kind == "integer" else float(text)
        except ValueError:
            raise OptionError(f"{key} takes {_expected(key)}, not {text!r}") from None
        return check(key, value)
    if kind == "choice":
        return check(key, text)
    if len(text) > MAX_VALUE_CHARS:
        raise OptionError(f"{key}: the value is over {MAX_VALUE_CHARS:,} characters")
    try:
        return loads_bounded(text)
    except ValueError:
        return text


def check(key: str, value: Any) -> Any:
    """`value` (already typed, e.g. from YAML) for `key`, or OptionError naming the key."""
    _check_key(key)
    kind, low, high = KNOWN.get(key, ("extra", None, None))
    if kind == "choice":
        if value not in EFFORTS:
            raise OptionError(f"{key} takes one of {', '.join(EFFORTS)}, not {value!r}")
        return value
    if kind == "extra":
        return value
    ok = isinstance(value, int | float) and not isinstance(value, bool)
    if kind == "integer":
        ok = isinstance(value, int) and not isinstance(value, bool)
    if not ok or not math.isfinite(value):
        raise OptionError(f"{key} takes {_expected(key)}, not {value!r}")
    if (low is not None and value < low) or (high is not None and value > high):
        raise OptionError(f"{key} takes {_expected(key)}, not {value!r}")
    return float(value) if kind == "number" else value


def parse_pairs(pairs: Iterable[tuple[str, str]]) -> dict[str, Any]:
    """The `-o KEY VALUE` pairs of a command line; UsageError (exit 2) naming the key."""
    found: dict[str, Any] = {}
    for key, text in pairs:
        try:
            found[key] = parse_text(key, text)
        except OptionError as e:
            raise UsageError(f"-o {e}") from None
    return found


def apply_options(settings: Settings, options: Mapping[str, Any]) -> Settings:
    """The settings with these per-call options on top of the config file's."""
    if not options:
        return settings
    rest = {k: v for k, v in options.items() if k not in ("temperature", "max_tokens")}
    extra = MappingProxyType({**settings.provider.extra_body, **rest})
    return replace(
        settings,
        temperature=options.get("temperature", settings.temperature),
        max_tokens=options.get("max_tokens", settings.max_tokens),
        provider=replace(settings.provider, extra_body=extra),
    )


def _check_key(key: str) -> None:
    if key in RESERVED:
        raise OptionError(f"{key} is set by countbot itself and cannot be changed with an option")
    if not key or not key.replace("_", "").replace("-", "").replace(".", "").isalnum():
        raise OptionError(f"{key!r} is not an option name (letters, digits and _ only)")
    if key not in KNOWN and key not in NEIGHBOURS:
        hint = did_you_mean(key, [k for k in KNOWN if _one_edit(key, k)])
        if hint:  # a typo of a checked key would be sent as a field the provider refuses
            raise OptionError(f"{key}: unknown option ({hint})")


def _one_edit(a: str, b: str) -> bool:
    """`a` and `b` differ by one character inserted, removed, replaced, or two swapped."""
    if a == b or abs(len(a) - len(b)) > 1:
        return False
    i = 0
    while i < min(len(a), len(b)) and a[i] == b[i]:
        i += 1
    if len(a) != len(b):
        short, long = sorted((a, b), key=len)
        return long[i + 1 :] == short[i:]
    swapped = a[i : i + 2] == b[i : i + 2][::-1] and a[i + 2 :] == b[i + 2 :]
    return a[i + 1 :] == b[i + 1 :] or swapped


def _expected(key: str) -> str:
    kind, low, high = KNOWN[key]
    what = "a whole number" if kind == "integer" else "a number"
    if low is not None and high is not None:
        return f"{what} from {low:g} to {high:g}"
    if low is not None:
        return f"{what} of at least {low:g}"
    return what
