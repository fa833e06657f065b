"""Plain data shared by every layer: messages, tool calls, usage, requests and stream events.

No I/O and no third-party imports here. A `Message` is what a session stores; `to_api()` gives
the dict sent to an OpenAI-compatible endpoint.
"""

from __future__ import annotations

import secrets
from dataclasses import dataclass, field
from datetime import datetime, timezone
from typing import Any, Literal

Role = Literal["system", "user", "assistant", "tool"]

# Message.status values (SPEC §4): a normal message has status None.
MessageStatus = Literal["failed", "interrupted"]
STATUS_FAILED: MessageStatus = (
    "failed"  # a user message whose turn failed: kept, not sent again, /retry re-runs it
)
STATUS_INTERRUPTED: MessageStatus = (
    "interrupted"  # an answer cut short by Ctrl-C: what arrived is kept
)


def utc_now() -> str:
    """UTC ISO-8601 with seconds, e.g. 2026-11-29T19:30:00Z."""
    return datetime.now(timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ")


def new_id(prefix: str = "") -> str:
    return prefix + secrets.token_hex(6)


@dataclass
class ToolCall:
    id: str
    name: str
    arguments: str  # raw JSON text as the model sent it; validated by the tool registry

    def to_api(self) -> dict[str, Any]:
        return {
            "id": self.id,
            "type": "function",
            "function": {"name": self.name, "arguments": self.arguments},
        }

    @classmethod
    def from_api(cls, d: dict[str, Any]) -> ToolCall:
        fn = d.get("function") or {}
        return cls(
            id=str(d.get("id") or ""),
            name=str(fn.get("name") or ""),
            arguments=str(fn.get("arguments") or ""),
        )


@dataclass
class Message:
    role: Role
    content: str
    tool_calls: list[ToolCall] | None = None
    tool_call_id: str | None = None
    name: str | None = None  # tool name on role=tool messages
    status: MessageStatus | None = None  # None: a normal message
    created_at: str = field(default_factory=utc_now)
    id: str = field(default_factory=lambda: new_id("m_"))
    # what -a attached: one record each (kind, source, sha256, ...), stored with the message
    attachments: list[dict[str, Any]] | None = None
    # attached images as data URLs: sent with this turn only, never stored
    images: list[str] | None = field(default=None, repr=False, compare=False)
    model: str | None = None  # an answer: the model that gave it (a fallback link's, say)
    # a question: the recalled memory block it was sent with, kept and sent again with it
    # (the `keep` cache layout, conversation/context.py); None: sent as typed
    kept: str | None = None

    def to_api(self) -> dict[str, Any]:
        """The dict sent to the provider. Assistant tool-call messages carry content "" (not null).
        With images, `content` is a list of parts: the text, then one `image_url` each."""
        sent = (self.kept or "") + (self.content or "")
        d: dict[str, Any] = {"role": self.role, "content": sent}
        if self.images:
            text = [{"type": "text", "text": sent}] if sent else []
            d["content"] = text + [
                {"type": "image_url", "image_url": {"url": url}} for url in self.images
            ]
        if self.tool_calls:
            d["tool_calls"] = [tc.to_api() for tc in self.tool_calls]
        if self.role == "tool":
            d["tool_call_id"] = self.tool_call_id or ""
            if self.name:
                d["name"] = self.name
        return d

    def to_dict(self) -> dict[str, Any]:
        """The dict stored in a session file."""
        d: dict[str, Any] = {
            "id": self.id,
            "role": self.role,
            "content": self.content,
            "created_at": self.created_at,
        }
        if self.tool_calls:
            d["tool_calls"] = [tc.to_api() for tc in self.tool_calls]
        if self.tool_call_id is not None:
            d["tool_call_id"] = self.tool_call_id
        if self.name is not None:
            d["name"] = self.name
        if self.status is not None:
            d["status"] = self.status
        if self.attachments:
            d["attachments"] = self.attachments
        if self.model:
            d["model"] = self.model
        if self.kept:
            d["kept"] = self.kept
        return d

    @classmethod
    def from_dict(cls, d: dict[str, Any]) -> Message:
        role = d.get("role")
        if role not in ("system", "user", "assistant", "tool"):
            raise ValueError(f"bad message role: {role!r}")
        content = d.get("content")
        tcs = d.get("tool_calls")
        return cls(
            role=role,
            content="" if content is None else str(content),
            tool_calls=[ToolCall.from_api(t) for t in tcs] if tcs else None,
            tool_call_id=d.get("tool_call_id"),
            name=d.get("name"),
            status=d.get("status"),
            created_at=str(d.get("created_at") or utc_now()),
            id=str(d.get("id") or new_id("m_")),
            attachments=_records(d.get("attachments")),
            model=d["model"] if isinstance(d.get("model"), str) else None,
            kept=d["kept"] if isinstance(d.get("kept"), str) else None,
        )


def _records(items: Any) -> list[dict[str, Any]] | None:
    """Stored attachment records: a list of objects, anything else dropped."""
    if not isinstance(items, list):
        return None
    return [dict(r) for r in items if isinstance(r, dict)] or None


@dataclass
class Usage:
    """Tokens of one call or a running total. `cached_tokens`: the part of the prompt the
    provider answered from its prompt cache (or KV cache); None when the provider reports none
    (then nothing is shown), 0 when it reports that nothing was cached."""

    prompt_tokens: int = 0
    completion_tokens: int = 0
    total_tokens: int = 0
    cached_tokens: int | None = None
    cost: float | None = None  # in the currency of the configured prices; None: no prices
    saved: float | None = None  # what the cached tokens saved at the prices (None: unknown)

    def add(self, other: Usage | None) -> None:
        if other is None:
            return
        self.prompt_tokens += other.prompt_tokens
        self.completion_tokens += other.completion_tokens
        self.total_tokens += other.total_tokens
        if other.cached_tokens is not None:
            self.cached_tokens = (self.cached_tokens or 0) + other.cached_tokens
        if other.cost is not None:
            self.cost = (self.cost or 0.0) + other.cost
        if other.saved is not None:
            self.saved = (self.saved or 0.0) + other.saved

    def to_dict(self) -> dict[str, int | float]:
        d: dict[str, int | float] = {
            "prompt_tokens": self.prompt_tokens,
            "completion_tokens": self.completion_tokens,
            "total_tokens": self.total_tokens,
        }
        if self.cached_tokens is not None:
            d["cached_tokens"] = self.cached_tokens
        if self.cost is not None:
            d["cost"] = round(self.cost, 6)
        if self.saved is not None:
            d["saved"] = round(self.saved, 6)
        return d

    @classmethod
    def from_api(cls, d: Any) -> Usage | None:
        """A provider's `usage` object. Cached prompt tokens from
        `prompt_tokens_details.cached_tokens` (OpenAI, vLLM, llama.cpp server) or
        `prompt_cache_hit_tokens` (DeepSeek, whose prompt is hit + miss)."""
        if not isinstance(d, dict):
            return None

        def num(obj: dict[str, Any], k: str) -> int | None:
            v = obj.get(k)
            if isinstance(v, (int, float)) and not isinstance(v, bool) and v >= 0:
                return int(v)
            return None

        details = d.get("prompt_tokens_details")
        cached = num(details, "cached_tokens") if isinstance(details, dict) else None
        hit, miss = num(d, "prompt_cache_hit_tokens"), num(d, "prompt_cache_miss_tokens")
        if cached is None:
            cached = hit
        p = num(d, "prompt_tokens") or (hit or 0) + (miss or 0)
        c = num(d, "completion_tokens") or 0
        if cached is not None:
            cached = min(cached, p)
        total = num(d, "total_tokens") or p + c
        return cls(prompt_tokens=p, completion_tokens=c, total_tokens=total, cached_tokens=cached)


@dataclass
class ChatRequest:
    """Everything needed for one call to the model. `messages` are API dicts (Message.to_api())."""

    model: str
    messages: list[dict[str, Any]]
    tools: list[dict[str, Any]] | None = None  # OpenAI tool specs; None or [] means none are sent
    temperature: float | None = None
    max_tokens: int | None = None
    stream: bool = True
    tool_choice: Any = None
    cache_key: str | None = None  # the session id: `prompt_cache_key` where the provider takes it


# ---- stream events: what a provider yields while an answer arrives ----


@dataclass
class TextDelta:
    text: str


@dataclass
class ReasoningDelta:
    text: str


@dataclass
class ToolCallDelta:
    """A tool call is being streamed (for progress display); the assembled calls are in Finished."""

    index: int
    name: str | None = None


@dataclass
class Finished:
    """The last event of every successful stream (and the result of a non-streamed call)."""

    content: str
    tool_calls: list[ToolCall]
    finish_reason: str | None
    usage: Usage | None = None
    reasoning: str = ""
    model: str | None = None


StreamEvent = TextDelta | ReasoningDelta | ToolCallDelta | Finished
