"""A scripted provider for in-process tests: queued replies, every request recorded.

`enqueue` the answers the "model" will give, run the code under test, then read `requests`;
each `stream` or `complete` takes the next reply, and a call with nothing queued fails loudly.
A `Reply` streams its reasoning, its text, one `ToolCallDelta` a tool call, then one
`Finished`, or raises its `error` instead (`KeyboardInterrupt()` is a Ctrl-C mid-stream).

    provider = ScriptedProvider()
    provider.enqueue("Hello!", Reply(tool_calls=[tool_call("read_file", {"path": "a.txt"})]))

Stdlib and `countbot_cli.messages` only: no network, no httpx.
"""

from __future__ import annotations

import json
from collections import deque
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from countbot_cli.messages import (
    ChatRequest,
    Finished,
    ReasoningDelta,
    StreamEvent,
    TextDelta,
    ToolCall,
    ToolCallDelta,
    Usage,
)

if TYPE_CHECKING:
    from countbot_cli.provider.base import Provider, ProviderStats


def tool_call(name: str, arguments: Mapping[str, Any] | str, call_id: str = "") -> ToolCall:
    """A ToolCall as a model would send it; `arguments` as a dict (sent as JSON) or raw text."""
    raw = arguments if isinstance(arguments, str) else json.dumps(dict(arguments))
    return ToolCall(id=call_id or f"call_{name}", name=name, arguments=raw)


@dataclass(frozen=True)
class Reply:
    """One scripted answer of the model.

    `text` and `reasoning` are one delta per string (a plain string is one delta).
    `finish_reason` defaults to "tool_calls" when there are tool calls, else "stop".
    `error`, when set, is raised after the deltas instead of yielding `Finished` (and raised
    at once by `complete`): a provider error, a bug, or `KeyboardInterrupt()` for Ctrl-C.
    """

    text: str | Sequence[str] = ""
    reasoning: str | Sequence[str] = ""
    tool_calls: Sequence[ToolCall] = ()
    usage: Usage | None = None
    finish_reason: str | None = None
    error: BaseException | None = None
    model: str | None = None

    def deltas(self) -> list[StreamEvent]:
        """What a stream yields before it finishes (or fails)."""
        events: list[StreamEvent] = [ReasoningDelta(t) for t in _pieces(self.reasoning)]
        events += [TextDelta(t) for t in _pieces(self.text)]
        events += [ToolCallDelta(i, c.name) for i, c in enumerate(self.tool_calls)]
        return events

    def finished(self) -> Finished:
        """The one `Finished` event (the whole answer), as a non-streamed call returns it."""
        reason = self.finish_reason or ("tool_calls" if self.tool_calls else "stop")
        return Finished(
            content="".join(_pieces(self.text)),
            tool_calls=list(self.tool_calls),
            finish_reason=reason,
            usage=self.usage,
            reasoning="".join(_pieces(self.reasoning)),
            model=self.model,
        )


def _pieces(value: str | Sequence[str]) -> list[str]:
    if isinstance(value, str):
        return [value] if value else []
    return list(value)


@dataclass
class ScriptedProvider:
    """A `Provider` that answers from a queue of `Reply`s and records every request.

    `supports_tools` is what the engine reads to decide whether to offer tools; `models` is what
    `list_models` returns. `closed` tells whether `close` was called.
    """

    name: str = "fake"
    model: str = "fake-model"
    supports_tools: bool = True
    context_window: int | None = None
    last_stats: ProviderStats | None = None
    models: list[str] = field(default_factory=list)
    requests: list[ChatRequest] = field(default_factory=list)
    closed: bool = False
    _queue: deque[Reply] = field(default_factory=deque, repr=False)

    def enqueue(self, *replies: Reply | str) -> ScriptedProvider:
        """Queue replies in order; a plain string is a reply with that text. Returns self."""
        self._queue.extend(Reply(text=r) if isinstance(r, str) else r for r in replies)
        return self

    @property
    def pending(self) -> int:
        """How many queued replies are not used yet."""
        return len(self._queue)

    def stream(self, req: ChatRequest) -> Iterator[StreamEvent]:
        """The next reply's deltas, then its `Finished` (or its error)."""
        reply = self._next(req)
        return self._events(reply)

    def complete(self, req: ChatRequest) -> Finished:
        """The next reply as one non-streamed answer (its error raised instead, if it has one)."""
        reply = self._next(req)
        if reply.error is not None:
            raise reply.error
        return reply.finished()

    def list_models(self) -> list[str]:
        return list(self.models) if self.models else [self.model]

    def close(self) -> None:
        self.closed = True

    def _next(self, req: ChatRequest) -> Reply:
        self.requests.append(req)
        if not self._queue:
            raise AssertionError(
                f"ScriptedProvider: request {len(self.requests)} came but no reply is queued"
            )
        return self._queue.popleft()

    @staticmethod
    def _events(reply: Reply) -> Iterator[StreamEvent]:
        yield from reply.deltas()
        if reply.error is not None:
            raise reply.error
        yield reply.finished()


if TYPE_CHECKING:  # mypy checks that the fake keeps up with the Provider interface
    _IS_A_PROVIDER: Provider = ScriptedProvider()
