"""LangChain's `trim_messages` over countbot Messages (seed ``001_…``), what the history window
is trimmed by (conversation/budget.py).

Semantics follow ``langchain_core.messages.trim_messages``. Message types are countbot roles;
LangChain's names are accepted too (``human`` = ``user``, ``ai`` = ``assistant``). One countbot
rule is added: an assistant message with ``tool_calls`` and the ``tool`` results that follow it
form one unit that is kept or dropped whole, so a trimmed history never holds a call without its
results (or a result without its call). Inputs are never modified; changed messages are copies.
The seed's `filter_messages` and `merge_message_runs` live in tests/helpers/message_runs.py:
nothing here needs them (its docstring says why).
"""

from __future__ import annotations

import inspect
from collections.abc import Callable, Iterable, Sequence
from dataclasses import replace
from typing import Any, Literal

from countbot_cli.messages import Message

TypeSpec = str | Sequence[str]
ListCounter = Callable[[list[Message]], int]
# a list counter (``len`` counts messages), a per-message counter (first parameter annotated
# ``Message``), or an object with ``count_messages`` such as tokens.TokenCounter
TokenCounterArg = Any
Unit = list[Message]

_ALIASES = {
    "human": "user",
    "ai": "assistant",
    "user": "user",
    "assistant": "assistant",
    "system": "system",
    "tool": "tool",
}


def _roles(spec: TypeSpec | None) -> frozenset[str] | None:
    if spec is None:
        return None
    names = [spec] if isinstance(spec, str) else list(spec)
    unknown = [n for n in names if n not in _ALIASES]
    if unknown:
        raise ValueError(f"unknown message type {unknown[0]!r} (use system, user, assistant, tool)")
    return frozenset(_ALIASES[n] for n in names)


def _takes_one_message(fn: Callable[..., Any]) -> bool:
    try:
        first = next(iter(inspect.signature(fn).parameters.values()), None)
    except (TypeError, ValueError):
        return False
    ann = None if first is None else first.annotation
    if ann is Message:
        return True
    first_type = ann.replace(" ", "").split("|")[0] if isinstance(ann, str) else ""
    return "Message" in first_type and "[" not in first_type  # not list[Message]


def _list_counter(token_counter: TokenCounterArg) -> ListCounter:
    count_messages = getattr(token_counter, "count_messages", None)
    if callable(count_messages):
        return count_messages
    if not callable(token_counter):
        raise TypeError("token_counter must be callable or have count_messages()")
    if _takes_one_message(token_counter):
        return lambda msgs: sum(token_counter(m) for m in msgs)
    return token_counter


def default_text_splitter(text: str) -> list[str]:
    """Split on newlines, keeping each newline with the line before it (LangChain's default)."""
    parts = text.split("\n")
    return [p + "\n" for p in parts[:-1]] + parts[-1:]


def tool_units(messages: Sequence[Message]) -> list[Unit]:
    """Group messages: an assistant message with tool_calls and the tool messages right after it
    are one unit (a run of tool messages with no call before it is one unit too); every other
    message is a unit of its own."""
    units: list[Unit] = []
    i = 0
    while i < len(messages):
        j = i + 1
        if messages[i].role == "tool" or (
            messages[i].role == "assistant" and messages[i].tool_calls
        ):
            while j < len(messages) and messages[j].role == "tool":
                j += 1
        units.append(list(messages[i:j]))
        i = j
    return units


def _flat(units: Iterable[Unit]) -> list[Message]:
    return [m for unit in units for m in unit]


# ---- trim_messages ----


def trim_messages(
    messages: Sequence[Message],
    *,
    max_tokens: int,
    token_counter: TokenCounterArg,
    strategy: Literal["first", "last"] = "last",
    allow_partial: bool = False,
    end_on: TypeSpec | None = None,
    start_on: TypeSpec | None = None,
    include_system: bool = False,
    text_splitter: Callable[[str], list[str]] | None = None,
) -> list[Message]:
    """Keep the first or last messages that fit in ``max_tokens`` as counted by ``token_counter``.

    ``token_counter=len`` counts messages. ``strategy="last"`` keeps the newest; with
    ``include_system`` a leading system message is always kept (even over budget) and its count
    is taken off the budget first; ``start_on`` then drops the oldest kept units until one starts
    with that type. ``end_on`` first drops trailing units (from the input for "last", from the
    result for "first") until one ends with that type. ``allow_partial`` keeps part of the
    boundary message's text, cut by ``text_splitter`` (default: lines), the end of it for "last".
    Tool-call units (see ``tool_units``) are never split.
    """
    if strategy not in ("first", "last"):
        raise ValueError(f"unknown strategy {strategy!r} (use 'first' or 'last')")
    if strategy == "first" and start_on is not None:
        raise ValueError("start_on is only valid with strategy='last'")
    if strategy == "first" and include_system:
        raise ValueError("include_system is only valid with strategy='last'")
    trim = _Trim(_list_counter(token_counter), text_splitter or default_text_splitter)
    units = tool_units(messages)
    if strategy == "first":
        return _flat(
            trim.fit(units, max_tokens, allow_partial, _roles(end_on), edge=-1, tail=False)
        )
    stop_end = _roles(end_on)
    while stop_end and units and units[-1][-1].role not in stop_end:
        units.pop()
    system: Unit = []
    if include_system and units and units[0][0].role == "system":
        system = units.pop(0)
    budget = max(0, max_tokens - trim.count(system)) if system else max_tokens
    kept = trim.fit(units[::-1], budget, allow_partial, _roles(start_on), edge=0, tail=True)
    return system + _flat(kept[::-1])


class _Trim:
    def __init__(self, count: ListCounter, splitter: Callable[[str], list[str]]) -> None:
        self.count = count
        self.splitter = splitter

    def fit(
        self,
        units: list[Unit],
        budget: int,
        partial: bool,
        stop_on: frozenset[str] | None,
        *,
        edge: int,
        tail: bool,
    ) -> list[Unit]:
        """LangChain's ``_first_max_tokens`` over units: the longest prefix of ``units`` within
        ``budget``, then (``stop_on``) drop from its end until a unit whose ``edge`` message has
        that type. ``tail``: the units are reversed, so a partial message keeps its end."""
        if not units:
            return []
        kept = list(units)
        if self.count(_flat(kept)) > budget:
            lo, hi = 0, len(units)
            while lo < hi:
                mid = (lo + hi + 1) // 2
                if self.count(_flat(units[:mid])) <= budget:
                    lo = mid
                else:
                    hi = mid - 1
            kept = units[:lo]
            piece = self._partial(kept, units[lo], budget, tail) if partial else None
            if piece is not None:
                kept.append([piece])
        while stop_on and kept and kept[-1][edge].role not in stop_on:
            kept.pop()
        return kept

    def _partial(self, kept: list[Unit], unit: Unit, budget: int, tail: bool) -> Message | None:
        """The most of ``unit``'s text (its start, or its end when ``tail``) that still fits."""
        msg = unit[0]
        if len(unit) != 1 or msg.role == "tool" or msg.tool_calls or not msg.content:
            return None
        splits = self.splitter(msg.content)
        base = _flat(kept)

        def piece(n: int) -> Message:
            return replace(msg, content="".join(splits[len(splits) - n :] if tail else splits[:n]))

        lo, hi = 0, len(splits)
        while lo < hi:
            mid = (lo + hi + 1) // 2
            if self.count([*base, piece(mid)]) <= budget:
                lo = mid
            else:
                hi = mid - 1
        return piece(lo) if lo > 0 else None
