"""Tool calls a local model writes as text, made real tool calls.

llama-cpp-python's generic chat handler renders the offered tools into the prompt with the
model's own chat template, then hands back whatever the model writes as text. Many instruct
GGUFs write their calls in one of three shapes:

- `<tool_call>{"name": …, "arguments": {…}}</tool_call>` (Hermes, Qwen2.5/3), one tag a call
  (a list in one tag is several), anywhere in the answer;
- a fenced ```json block holding the call, as the whole answer;
- a bare JSON object holding the call (or a list of them), as the whole answer.

An answer that merely contains JSON is never taken for a call:

- a `<tool_call>` tag is a call when its body starts like JSON (`{`, `[` or a fence); that is
  what the tag says, so any name is one: an unknown tool is answered "unknown tool" by the
  registry, and broken JSON becomes a call whose arguments are the raw text, answered "arguments
  are not valid JSON" (the model's usual error results);
- a fenced block or bare JSON is a call only when it is the whole answer and has the call
  shape: objects with only `name`, `arguments` (or `parameters`), `type` and `id` keys (or
  OpenAI's `{"type": "function", "function": {…}}`), a `name` that is one of the offered tools
  and arguments that are an object. Broken JSON there is a call only when it starts
  `{"name": "<an offered tool>"`;
- a call whose text (whitespace aside) is in the request's own messages other than the model's
  answers (the user's words, an attachment, a tool result, the system prompt) was copied, not
  made: it stays text (`Copies`), so a small model echoing a pasted call runs nothing.

`calls_in_text` wraps a provider's event stream (the local provider's hook): while the answer
may still turn out to be a call, its text is held back rather than shown, and the last event,
`Finished`, carries the calls and only the text outside them. Any other answer streams as it
came; only a few characters that may begin a `<tool_call>` tag wait for the next piece.
"""

from __future__ import annotations

import json
import os
import re
from collections.abc import Generator, Iterable, Iterator, Mapping, Sequence
from dataclasses import replace
from typing import Any

from countbot_cli.jsonsafe import loads_bounded
from countbot_cli.messages import Finished, StreamEvent, TextDelta, ToolCall

TAG_OPEN = "<tool_call>"
TAG_CLOSE = "</tool_call>"
_TAG = re.compile(r"<tool_call>(.*?)(?:</tool_call>|\Z)", re.S)
_FENCE = re.compile(r"\A```[ \t]*(?:json|JSON|tool_call)?[ \t]*\n(.*?)\n?[ \t]*```\Z", re.S)
_FENCE_INFO = re.compile(r"\A```[ \t]*([^\n]*)\n")
_NAME = re.compile(r'"name"\s*:\s*"([^"\\]{1,200})"')
_BROKEN_START = re.compile(r'\A\{\s*"name"\s*:\s*"([^"\\]{1,200})"')
_CALL_KEYS = frozenset({"name", "arguments", "parameters", "type", "id"})
_JSON_INFO = ("", "json", "tool_call")


def offered_names(tools: Sequence[dict[str, Any]] | None) -> frozenset[str]:
    """The names of the function tools a request offers."""
    names = set()
    for tool in tools or ():
        fn = tool.get("function") if isinstance(tool, dict) else None
        if isinstance(fn, dict) and isinstance(fn.get("name"), str):
            names.add(fn["name"])
    return frozenset(names)


# ---- parsing a whole answer ----


def parse_text_calls(
    text: str, names: frozenset[str], copies: Copies | None = None
) -> tuple[str, list[ToolCall]] | None:
    """(the text outside the calls, the calls) when `text` holds tool calls, else None. A call
    whose text is in `copies` (what the request's messages hold) is text, not a call."""
    parsed = _parse(text, names, copies or Copies(()))
    return None if parsed is None else (parsed[0].strip(), parsed[1])


def _parse(text: str, names: frozenset[str], copies: Copies) -> tuple[str, list[ToolCall]] | None:
    """As parse_text_calls, with the outside text as it is (it starts as `text` does)."""
    if not names:
        return None
    if TAG_OPEN in text:
        return _tagged(text, copies)
    stripped = text.strip()
    fenced = _FENCE.match(stripped)
    body = fenced.group(1).strip() if fenced else stripped
    if not body.startswith(("{", "[")) or body in copies:
        return None
    try:
        value = loads_bounded(body)
    except ValueError:
        start = _BROKEN_START.match(body)
        if start and start.group(1) in names:  # a call whose JSON broke: the model is told
            return "", [_call(start.group(1), body)]
        return None
    items = value if isinstance(value, list) else [value]
    calls = [_shaped(item, names) for item in items]
    if not calls or any(c is None for c in calls):
        return None
    return "", [c for c in calls if c is not None]


def _tagged(text: str, copies: Copies) -> tuple[str, list[ToolCall]] | None:
    outside: list[str] = []
    calls: list[ToolCall] = []
    pos = 0
    for match in _TAG.finditer(text):
        body = match.group(1).strip()
        fenced = _FENCE.match(body)
        body = fenced.group(1).strip() if fenced else body
        if not body.startswith(("{", "[")):
            continue  # the tag named in prose, not a call: left as text
        if body in copies:
            continue  # copied from the user's text, an attachment or a tool result: text
        outside.append(text[pos : match.start()])
        pos = match.end()
        calls += _tag_calls(body)
    if not calls:
        return None
    outside.append(text[pos:])
    return "".join(outside), calls


def _tag_calls(body: str) -> list[ToolCall]:
    """The calls of one tag's JSON; broken JSON is one call with the raw text as arguments."""
    try:
        value = loads_bounded(body)
    except ValueError:
        named = _NAME.search(body)
        return [_call(named.group(1) if named else "", body)]
    out = []
    for item in value if isinstance(value, list) else [value]:
        if not isinstance(item, dict):
            out.append(_call("", json.dumps(item, ensure_ascii=False)))
            continue
        inner = item.get("function")
        fn: dict[str, Any] = inner if isinstance(inner, dict) else item
        name = fn.get("name")
        args = fn.get("arguments", fn.get("parameters", {}))
        out.append(_call(name if isinstance(name, str) else "", _arguments_text(args)))
    return out


def _shaped(item: Any, names: frozenset[str]) -> ToolCall | None:
    """A whole-answer object as a call, when it has the call shape and an offered name."""
    if not isinstance(item, dict):
        return None
    if item.get("type") == "function" and isinstance(item.get("function"), dict):
        if not set(item) <= {"type", "function", "id"}:
            return None
        item = item["function"]
    if not set(item) <= _CALL_KEYS or item.get("name") not in names:
        return None
    args = item.get("arguments", item.get("parameters", {}))
    if isinstance(args, str):
        try:
            args = loads_bounded(args) if args.strip() else {}
        except ValueError:
            return None
    if not isinstance(args, dict):
        return None
    return _call(str(item["name"]), json.dumps(args, ensure_ascii=False))


def _arguments_text(args: Any) -> str:
    """Arguments as the registry takes them: a string as the model wrote it, else JSON."""
    return args if isinstance(args, str) else json.dumps(args, ensure_ascii=False)


def _call(name: str, arguments: str) -> ToolCall:
    return ToolCall(id=f"call_{os.urandom(12).hex()}", name=name, arguments=arguments)


class Copies:
    """What a request's messages hold besides the model's own answers (the user's words and
    attachments, tool results, the system prompt), compared with whitespace left out: a call
    whose text is in it was copied, not made. Built on the first question."""

    def __init__(self, messages: Iterable[Mapping[str, Any]]) -> None:
        self._messages = messages
        self._text: str | None = None

    def __contains__(self, body: object) -> bool:
        if not isinstance(body, str) or not (squeezed := _squeeze(body)):
            return False
        if self._text is None:
            self._text = "\0".join(_squeeze(t) for t in _texts(self._messages))
        return squeezed in self._text


def _texts(messages: Iterable[Mapping[str, Any]]) -> Iterator[str]:
    for message in messages:
        if message.get("role") == "assistant":
            continue
        content = message.get("content")
        if isinstance(content, str):
            yield content
        elif isinstance(content, list):  # parts: the text, then images
            for part in content:
                if isinstance(part, dict) and isinstance(part.get("text"), str):
                    yield part["text"]


def _squeeze(text: str) -> str:
    return "".join(text.split())


# ---- the stream ----


class _Held:
    """How much of an answer's text may be shown while it arrives."""

    def __init__(self) -> None:
        self.text = ""
        self.shown = 0  # characters of `text` already passed on
        self.limit: int | None = None  # nothing beyond this is shown before the end
        self.opening = True  # the start may still be a whole-answer call

    def add(self, piece: str) -> str:
        self.text += piece
        end = self._visible_end()
        out = self.text[self.shown : end] if end > self.shown else ""
        self.shown = max(self.shown, end)
        return out

    def _visible_end(self) -> int:
        if self.limit is not None:
            return self.limit
        if self.opening:
            verdict = _opening(self.text.lstrip())
            if verdict is None:  # too early to tell
                return self.shown
            if verdict:
                self.limit = self.shown
                return self.shown
            self.opening = False
        tag = self.text.find(TAG_OPEN, self.shown)
        if tag >= 0:
            self.limit = tag
            return tag
        for k in range(min(len(TAG_OPEN) - 1, len(self.text) - self.shown), 0, -1):
            if self.text.endswith(TAG_OPEN[:k]):
                return len(self.text) - k
        return len(self.text)

    def finish(
        self, finished: Finished, names: frozenset[str], copies: Copies
    ) -> list[StreamEvent]:
        """The text still held (what is not a call) and the Finished, with the calls."""
        parsed = None if finished.tool_calls else _parse(self.text, names, copies)
        if parsed is None:
            rest = self.text[self.shown :]
            return [TextDelta(rest), finished] if rest else [finished]
        outside, calls = parsed
        before = self.text[: self.shown]  # shown already: it comes before the first call
        rest = outside[len(before) :].rstrip() if outside.startswith(before) else ""
        events: list[StreamEvent] = [TextDelta(rest)] if rest.strip() else []
        content = (before + rest).strip()
        events.append(
            replace(finished, content=content, tool_calls=calls, finish_reason="tool_calls")
        )
        return events


def _opening(lead: str) -> bool | None:
    """Whether an answer starting with `lead` may be a whole-answer call (True: hold it all),
    may not (False), or cannot be told yet (None)."""
    if not lead:
        return None
    if lead[0] in "{[":
        return True
    if not lead.startswith("```"):
        return None if "```".startswith(lead) else False
    info = _FENCE_INFO.match(lead)
    if info is None:
        return None  # the fence's first line has not ended
    if info.group(1).strip() not in _JSON_INFO:
        return False
    after = lead[info.end() :].lstrip()
    return None if not after else after[0] in "{["


def calls_in_text(
    events: Iterable[StreamEvent],
    tools: Sequence[dict[str, Any]] | None,
    messages: Iterable[Mapping[str, Any]] = (),
) -> Generator[StreamEvent, None, None]:
    """`events` with tool calls written as text turned into the Finished's tool calls (only
    when `tools` offers some, and not those copied from `messages`, the request's). Closing
    this generator closes `events` (stops generation)."""
    names = offered_names(tools)
    copies = Copies(messages)
    if not names:
        yield from events
        return
    held = _Held()
    try:
        for event in events:
            if isinstance(event, TextDelta):
                shown = held.add(event.text)
                if shown:
                    yield TextDelta(shown)
            elif isinstance(event, Finished):
                yield from held.finish(event, names, copies)
            else:
                yield event
    finally:
        close = getattr(events, "close", None)
        if callable(close):
            close()


def finished_with_text_calls(
    finished: Finished,
    tools: Sequence[dict[str, Any]] | None,
    messages: Iterable[Mapping[str, Any]] = (),
) -> Finished:
    """A non-streamed answer with its text-form tool calls made real ones (not those copied
    from `messages`, the request's)."""
    names = offered_names(tools)
    parsed = (
        None if finished.tool_calls else parse_text_calls(finished.content, names, Copies(messages))
    )
    if parsed is None:
        return finished
    outside, calls = parsed
    return replace(finished, content=outside, tool_calls=calls, finish_reason="tool_calls")
