"""Chat-completion chunks -> stream events and one Finished, tolerant of many servers' quirks.

- chunks with empty, null or missing `choices` (usage chunks, Azure's filter chunk) are fine;
  `usage` is read from the top level or from the choice (Moonshot), with its cached prompt
  tokens (messages.Usage.from_api; llama.cpp's `timings.cache_n` when usage has none);
- `reasoning_content` (DeepSeek, llama.cpp) and `reasoning` (Ollama, OpenRouter, vLLM) deltas;
- tool calls keyed by `index`: `id` and `name` are assigned (llama-cpp-python's server and Qwen
  repeat them), `arguments` appended; a chunk on an index whose call is already whole, with a new
  id and a name, starts a new call (Ollama sends parallel calls all with index 0); missing ids
  are synthesised. Arguments are not validated here.
"""

from __future__ import annotations

import json
import secrets
from collections.abc import Iterable, Iterator
from dataclasses import dataclass, field
from typing import Any

from countbot_cli.errors import ProviderError
from countbot_cli.jsonsafe import JSONLimitError, loads_bounded
from countbot_cli.messages import (
    Finished,
    ReasoningDelta,
    StreamEvent,
    TextDelta,
    ToolCall,
    ToolCallDelta,
    Usage,
)
from countbot_cli.provider.http_errors import clean, payload_error, stream_error
from countbot_cli.provider.sse import SSEDecoder

CUT = "the stream ended before the answer finished"
EMPTY = "the provider ended the stream without an answer"
EMPTY_HINT = "if this happens when tools are offered, set stream_tools: false for this provider"
_REASONING_KEYS = ("reasoning_content", "reasoning")
_TEXT_KEYS = ("content", "refusal")


@dataclass
class _Slot:
    id: str = ""
    name: str = ""
    args: list[str] = field(default_factory=list)


def _error_object(obj: dict[str, Any]) -> Any:
    return obj.get("error") or (obj if obj.get("object") == "error" else None)


@dataclass
class Assembler:
    """Feed it each SSE data payload with `add`; `finish` gives the Finished event."""

    api_key: str | None = None
    text: list[str] = field(default_factory=list)
    reasoning: list[str] = field(default_factory=list)
    slots: list[_Slot] = field(default_factory=list)
    by_index: dict[int, int] = field(default_factory=dict)
    finish_reason: str | None = None
    usage: Usage | None = None
    model: str | None = None

    @property
    def partial(self) -> str:
        return "".join(self.text)

    def add(self, data: str) -> list[StreamEvent]:
        """Take one SSE data payload; return the events it carries."""
        try:
            obj = loads_bounded(data)
        except JSONLimitError as e:
            raise stream_error(
                f"the provider sent a chunk that cannot be read: {e}", self.partial
            ) from None
        except ValueError:
            if data.lstrip().startswith(":"):
                return []  # a proxy re-emitted a comment as data
            chunk = clean(data, self.api_key, 80)
            raise stream_error(
                f"the provider sent a malformed chunk: {chunk}", self.partial
            ) from None
        if not isinstance(obj, dict):
            return []
        return self.add_object(obj)

    def add_object(self, obj: dict[str, Any]) -> list[StreamEvent]:
        if obj.get("error") or obj.get("object") == "error":
            raise payload_error(_error_object(obj), self.partial, self.api_key)
        model = obj.get("model")
        if model and isinstance(model, str):
            self.model = model
        if (usage := obj.get("usage")) is not None:
            self.usage = Usage.from_api(usage) or self.usage
        if (timings := obj.get("timings")) is not None:
            self._cache_timings(timings)
        choices = obj.get("choices")
        events: list[StreamEvent] = []
        for choice in choices if isinstance(choices, list) else []:
            if isinstance(choice, dict) and choice.get("index", 0) == 0:
                events += self._choice(choice)
        return events

    def _cache_timings(self, timings: Any) -> None:
        """llama.cpp's server without `prompt_tokens_details`: `timings.cache_n` is the
        prompt tokens it took from its KV cache."""
        if self.usage is None or self.usage.cached_tokens is not None:
            return
        n = timings.get("cache_n") if isinstance(timings, dict) else None
        if isinstance(n, int) and not isinstance(n, bool) and n >= 0:
            self.usage.cached_tokens = min(n, self.usage.prompt_tokens)

    def _choice(self, choice: dict[str, Any]) -> list[StreamEvent]:
        if (usage := choice.get("usage")) is not None:
            self.usage = Usage.from_api(usage) or self.usage
        reason = choice.get("finish_reason")
        if isinstance(reason, str):
            self.finish_reason = reason
        delta = choice.get("delta")
        if not isinstance(delta, dict):
            message = choice.get("message")
            delta = message if isinstance(message, dict) else {}
        events: list[StreamEvent] = []
        for key in _REASONING_KEYS:
            if (piece := delta.get(key)) and isinstance(piece, str):
                self.reasoning.append(piece)
                events.append(ReasoningDelta(piece))
        for key in _TEXT_KEYS:
            if (piece := delta.get(key)) and isinstance(piece, str):
                self.text.append(piece)
                events.append(TextDelta(piece))
        calls = delta.get("tool_calls")
        for call in calls if isinstance(calls, list) else []:
            if isinstance(call, dict):
                events.append(self._tool(call))
        return events

    def _tool(self, call: dict[str, Any]) -> ToolCallDelta:
        fn = call.get("function")
        fn = fn if isinstance(fn, dict) else {}
        index = call.get("index")
        key = index if isinstance(index, int) and not isinstance(index, bool) else 0
        call_id = str(call.get("id") or "")
        name = fn.get("name")
        name = name if isinstance(name, str) else ""
        pos = self.by_index.get(key)
        if pos is None or self._is_new_call(self.slots[pos], call_id, name):
            self.slots.append(_Slot())
            pos = self.by_index[key] = len(self.slots) - 1
        slot = self.slots[pos]
        slot.id = call_id or slot.id  # assigned, never concatenated
        slot.name = name or slot.name
        args = fn.get("arguments")
        if isinstance(args, str):
            slot.args.append(args)
        elif args is not None:  # some servers send the arguments as an object
            slot.args.append(json.dumps(args, ensure_ascii=False))
        return ToolCallDelta(index=pos, name=slot.name or None)

    @staticmethod
    def _is_new_call(slot: _Slot, call_id: str, name: str) -> bool:
        whole = bool(slot.name) and any(slot.args)
        return bool(call_id and name and slot.id and call_id != slot.id and whole)

    def tool_calls(self) -> list[ToolCall]:
        """The assembled calls (nameless fragments dropped; empty arguments become "{}")."""
        return [
            ToolCall(
                id=s.id or "call_" + secrets.token_hex(12),
                name=s.name,
                arguments="".join(s.args) or "{}",
            )
            for s in self.slots
            if s.name
        ]

    def finish(self, done: bool) -> Finished:
        """The final event; `done`: the stream ended with [DONE] rather than at EOF."""
        text, calls = self.partial, self.tool_calls()
        if self.finish_reason == "error":
            raise stream_error("the provider reported an error during the answer", text)
        if self.finish_reason is None:
            if not (text or calls or (self.reasoning and not done)):
                raise stream_error(EMPTY, text, hint=EMPTY_HINT)
            if not done:
                raise stream_error(CUT, text)
        return Finished(
            content=text,
            tool_calls=calls,
            finish_reason=self.finish_reason,
            usage=self.usage,
            reasoning="".join(self.reasoning),
            model=self.model,
        )


def completion_events(body: bytes, api_key: str | None = None) -> list[StreamEvent]:
    """The events equivalent to a complete (non-streamed) JSON answer, Finished last."""
    try:
        obj = loads_bounded(body)
    except JSONLimitError as e:
        raise ProviderError(f"the provider sent an answer that cannot be read: {e}") from None
    except ValueError:
        obj = None
    if not isinstance(obj, dict):
        text = clean(body.decode("utf-8", "replace"), api_key, 120)
        raise ProviderError(f"the provider sent an answer that is not JSON: {text}")
    err = _error_object(obj)
    if err:
        raise payload_error(err, "", api_key)
    choices = obj.get("choices")
    if not isinstance(choices, list) or not choices or not isinstance(choices[0], dict):
        raise stream_error("the provider returned no answer", "")
    message = choices[0].get("message")
    message = message if isinstance(message, dict) else {}
    calls = message.get("tool_calls")
    # whole calls: each gets its own slot, even when ids are missing
    indexed = [{**c, "index": i} for i, c in enumerate(calls or []) if isinstance(c, dict)]
    choice = {**choices[0], "index": 0, "message": {**message, "tool_calls": indexed}}
    acc = Assembler(api_key=api_key)
    acc.add_object({**obj, "choices": [choice]})
    text, reasoning = acc.partial, "".join(acc.reasoning)
    events: list[StreamEvent] = [ReasoningDelta(reasoning)] if reasoning else []
    events += [TextDelta(text)] if text else []
    events += [ToolCallDelta(index=i, name=s.name or None) for i, s in enumerate(acc.slots)]
    finished = Finished(
        content=text,
        tool_calls=acc.tool_calls(),
        finish_reason=acc.finish_reason,
        usage=acc.usage,
        reasoning=reasoning,
        model=acc.model,
    )
    return [*events, finished]


def sse_reads(chunks: Iterable[bytes]) -> Iterator[list[str]]:
    """The data payloads of the SSE events in a byte stream, one list for each chunk that
    completed any (the events one read brought), and one for a last event at EOF."""
    decoder = SSEDecoder()
    for chunk in chunks:
        if events := decoder.feed(chunk):
            yield [event.data for event in events]
    if events := decoder.close():
        yield [event.data for event in events]


def merged(events: list[StreamEvent]) -> list[StreamEvent]:
    """`events` with each run of text deltas (or of reasoning deltas) joined into one.

    The events of one read go on as one delta per run: the engine and the view then handle a
    read's text once, not once per token."""
    if len(events) < 2:
        return events
    out: list[StreamEvent] = []
    for ev in events:
        last = out[-1] if out else None
        if isinstance(ev, TextDelta) and isinstance(last, TextDelta):
            out[-1] = TextDelta(last.text + ev.text)
        elif isinstance(ev, ReasoningDelta) and isinstance(last, ReasoningDelta):
            out[-1] = ReasoningDelta(last.text + ev.text)
        else:
            out.append(ev)
    return out
