"""LangChain's `filter_messages` and `merge_message_runs` over countbot Messages (seed
``001_…``, §8 and §9), kept for the seed's examples in tests/conversation/test_trim.py.

They left the package (issue 20 point 6) because nothing there needs them: the history sent to
a model never holds two messages of one role in a row to merge, as `context.sendable` leaves
out a failed question (its retry follows it) and a question interrupted before any answer, and
the bundled model's chat template (SmolLM2's ChatML, through llama-cpp-python) takes runs of
one role as they are (tests/conversation/test_trim.py checks both).
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import replace

from countbot_cli.conversation.trim import TypeSpec, _roles
from countbot_cli.messages import Message


def _as_set(values: str | Iterable[str] | None) -> frozenset[str] | None:
    if values is None:
        return None
    return frozenset([values] if isinstance(values, str) else values)


# ---- filter_messages ----


def filter_messages(
    messages: Sequence[Message],
    *,
    include_names: str | Sequence[str] | None = None,
    exclude_names: str | Sequence[str] | None = None,
    include_types: TypeSpec | None = None,
    exclude_types: TypeSpec | None = None,
    include_ids: str | Sequence[str] | None = None,
    exclude_ids: str | Sequence[str] | None = None,
    exclude_tool_calls: bool | Sequence[str] | None = None,
) -> list[Message]:
    """Messages matching the filters. Exclusions win; with no inclusion filter everything left
    is kept, otherwise a message matching any inclusion filter. ``exclude_tool_calls=True``
    drops assistant messages with tool calls and all tool messages; a list of tool-call ids
    drops those calls (an assistant message left with none is dropped) and their results."""
    inc_n, exc_n = _as_set(include_names), _as_set(exclude_names)
    inc_t, exc_t = _roles(include_types), _roles(exclude_types)
    inc_i, exc_i = _as_set(include_ids), _as_set(exclude_ids)
    drop_all = exclude_tool_calls is True
    drop_ids = None if isinstance(exclude_tool_calls, bool) else _as_set(exclude_tool_calls)
    out: list[Message] = []
    for msg in messages:
        if (
            (exc_n and msg.name in exc_n)
            or (exc_t and msg.role in exc_t)
            or (exc_i and msg.id in exc_i)
            or (drop_all and (msg.role == "tool" or (msg.role == "assistant" and msg.tool_calls)))
        ):
            continue
        if drop_ids and msg.role == "assistant" and msg.tool_calls:
            calls = [c for c in msg.tool_calls if c.id not in drop_ids]
            if not calls:
                continue
            if len(calls) < len(msg.tool_calls):
                msg = replace(msg, tool_calls=calls)
        elif drop_ids and msg.role == "tool" and msg.tool_call_id in drop_ids:
            continue
        if (
            not (inc_n or inc_t or inc_i)
            or (inc_n and msg.name in inc_n)
            or (inc_t and msg.role in inc_t)
            or (inc_i and msg.id in inc_i)
        ):
            out.append(msg)
    return out


# ---- merge_message_runs ----


def merge_message_runs(
    messages: Sequence[Message], *, chunk_separator: str = "\n"
) -> list[Message]:
    """Merge consecutive messages of the same role (never tool messages) into one: contents
    joined by ``chunk_separator`` (only between two non-empty contents), tool calls concatenated;
    the merged message keeps the first one's id, time and other fields."""
    merged: list[Message] = []
    for msg in messages:
        last = merged[-1] if merged else None
        if last is None or msg.role == "tool" or msg.role != last.role:
            merged.append(msg)
            continue
        sep = chunk_separator if last.content and msg.content else ""
        calls = [*(last.tool_calls or []), *(msg.tool_calls or [])]
        merged[-1] = replace(
            last, content=last.content + sep + msg.content, tool_calls=calls or None
        )
    return merged
