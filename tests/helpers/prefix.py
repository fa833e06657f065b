"""How much of each chat request repeats the previous one (issue 11; used by
tests/conversation/test_prefix.py and bench/bench_prefix.py).

A request is read as a provider lays it out for its prompt cache: the system message, the tool
definitions, then the other messages. `extends(prev, cur)`: everything of `prev` but its last
message (the volatile tail: the current user message, with any recalled memory) is a prefix of
`cur`, tools included. `shared_share(prev, cur)`: the share of `cur`'s text (in tokens of a
fixed encoding, or characters) that is a common prefix with `prev`.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Sequence
from typing import Any


def _msg(m: dict[str, Any]) -> str:
    return json.dumps(m, ensure_ascii=False, sort_keys=True)


def layout(body: dict[str, Any]) -> list[str]:
    """The request as cached pieces, in the order a provider renders them."""
    msgs = body["messages"]
    head = [_msg(m) for m in msgs[:1]]
    tools = [json.dumps(t, ensure_ascii=False, sort_keys=True) for t in body.get("tools") or []]
    return head + tools + [_msg(m) for m in msgs[1:]]


def extends(prev: dict[str, Any], cur: dict[str, Any]) -> bool:
    a, b = layout(prev), layout(cur)
    stable = a[:-1]
    return len(b) >= len(a) and b[: len(stable)] == stable


def _common(a: str, b: str) -> int:
    n = min(len(a), len(b))
    i = 0
    while i < n and a[i] == b[i]:
        i += 1
    return i


def shared_share(
    prev: dict[str, Any], cur: dict[str, Any], count: Callable[[str], int] = len
) -> float:
    a, b = "".join(layout(prev)), "".join(layout(cur))
    total = count(b)
    return count(b[: _common(a, b)]) / total if total else 1.0


def chat_bodies(bodies: Sequence[dict[str, Any]]) -> list[dict[str, Any]]:
    """The conversation's own requests (summary calls have no system message)."""
    return [b for b in bodies if b["messages"] and b["messages"][0]["role"] == "system"]


def stats(
    bodies: Sequence[dict[str, Any]], count: Callable[[str], int] = len
) -> tuple[int, int, float]:
    """(requests that extend the previous, pairs compared, mean shared share)."""
    pairs = list(zip(bodies, bodies[1:], strict=False))
    if not pairs:
        return 0, 0, 1.0
    ext = sum(extends(p, c) for p, c in pairs)
    share = sum(shared_share(p, c, count) for p, c in pairs) / len(pairs)
    return ext, len(pairs), share
