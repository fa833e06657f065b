"""Why a turn missed the prompt cache.

A fingerprint of each request (`fingerprint`: short hashes of the head parts, the window's
first message and its ids, the model, the time) is kept in the session; the next turn compares
its own with it (`explain`) and names the changes: `window`, `history`, `head` (which part),
`model` or `idle` (past the provider's documented cache lifetime; tests set `clock`). With the
provider's cached tokens a turn `missed` when less than half of the shared part came from the
cache. docs/design/window.md says more.
"""

from __future__ import annotations

import hashlib
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from countbot_cli.conversation.context import sendable
from countbot_cli.conversation.sessions.session import plural

if TYPE_CHECKING:
    from countbot_cli.conversation.context import TurnContext
    from countbot_cli.conversation.sessions.session import Session
    from countbot_cli.messages import Message, Usage

clock: Callable[[], float] = time.time  # seconds; the tests' fake clock goes here

# Documented idle lifetimes of a prompt cache, by preset (OpenAI's prompt-caching guide): OpenAI
# clears its in-memory cache after 5-10 minutes without use (the lower bound is taken).
# DeepSeek's disk cache, Qwen's implicit cache and local servers document none: no idle reason.
LIFETIME: dict[str, float] = {"openai": 300.0}
# Prompts below this many tokens are never cached (OpenAI: 1,024); others: no minimum known.
MINIMUM: dict[str, int] = {"openai": 1024}
MISS_SHARE = 0.5  # less than this share of the shared prefix read from the cache: a miss
# presets whose cache hits only whole persisted units: recalled lines stay with their question
# (context.py's `keep` layout; bench/bench_cache_rules.py measured it against the others)
KEEP_RECALL = frozenset({"deepseek"})


def _h(text: str) -> str:
    return hashlib.sha256(text.encode("utf-8")).hexdigest()[:16]


def fingerprint(ctx: TurnContext, provider: str, model: str) -> dict[str, Any]:
    """What the next turn compares with: the request this turn sends (no text, only hashes)."""
    ids = [m.id for m in ctx.window]
    return {
        "at": round(clock(), 3),
        "provider": provider,
        "model": model,
        "head": {part: _h(text) for part, text in ctx.head.items()},
        "first": ids[0] if ids else None,
        "count": len(ids),
        "ids": _h(",".join(ids)),
    }


@dataclass
class CacheReport:
    """What changed since the session's previous request, and whether the cache missed."""

    changes: list[tuple[str, str]] = field(default_factory=list)  # (reason, detail)
    previous: bool = False  # the session had an earlier request to compare with
    stored: dict[str, Any] = field(default_factory=dict)  # this request's fingerprint
    prev_prompt: int = 0  # prompt tokens of the previous request
    minimum: int = 0
    cached: int | None = None
    prompt: int = 0

    def observe(self, usage: Usage) -> None:
        """The provider's figures for this turn; the fingerprint keeps the prompt size."""
        self.cached, self.prompt = usage.cached_tokens, usage.prompt_tokens
        self.stored["prompt_tokens"] = usage.prompt_tokens

    @property
    def missed(self) -> bool:
        """A previous request, a cache figure, and less than half the shared part cached."""
        shared = min(self.prev_prompt, self.prompt)
        if not self.previous or self.cached is None or shared < max(1, self.minimum):
            return False
        return self.cached < MISS_SHARE * shared

    def details(self) -> str:
        return "; ".join(d for _r, d in self.changes)

    def short(self) -> str:
        """The usage line's note for a miss."""
        return "cache miss: " + (self.details() or "nothing changed on countbot's side")

    def to_json(self) -> dict[str, Any]:
        return {
            "previous_request": self.previous,
            "changes": [{"reason": r, "detail": d} for r, d in self.changes],
            "missed": self.missed,
        }


def probe(
    session: Session, ctx: TurnContext, provider: str, model: str, preset: str | None
) -> CacheReport:
    """This turn's report: its request against the session's previous one."""
    now = fingerprint(ctx, provider, model)
    return explain(session.last_request, now, sendable(session.all_messages()), preset)


def explain(
    prev: dict[str, Any] | None,
    now: dict[str, Any],
    messages: Sequence[Message],
    preset: str | None,
) -> CacheReport:
    """Compare this request's fingerprint with the previous one (see the module)."""
    report = CacheReport(stored=now, minimum=MINIMUM.get(preset or "", 0))
    if not prev:
        return report
    report.previous = True
    report.prev_prompt = _int(prev.get("prompt_tokens"))
    if (prev.get("provider"), prev.get("model")) != (now["provider"], now["model"]):
        was = f"{prev.get('provider')}/{prev.get('model')}"
        report.changes.append(
            ("model", f"model changed ({was} → {now['provider']}/{now['model']})")
        )
    stored_head = prev.get("head")
    old_head: dict[str, Any] = stored_head if isinstance(stored_head, dict) else {}
    for part, digest in now["head"].items():
        if old_head.get(part, digest) != digest:
            report.changes.append(("head", f"{part} changed"))
    report.changes += _window_changes(prev, now, messages)
    gap, life = clock() - _float(prev.get("at")), LIFETIME.get(preset or "")
    if life is not None and gap > life:
        said = f"idle {_duration(gap)} > the provider's {_duration(life)} cache lifetime"
        report.changes.append(("idle", said))
    return report


def _window_changes(
    prev: dict[str, Any], now: dict[str, Any], messages: Sequence[Message]
) -> list[tuple[str, str]]:
    first, count = prev.get("first"), _int(prev.get("count"))
    if not first or not count:
        return []
    ids = [m.id for m in messages]
    if first not in ids:
        return [("history", "the history sent before changed (undo, edit or retry)")]
    if now["first"] != first:
        start = ids.index(first)
        gone = ids.index(now["first"]) - start if now["first"] in ids else count
        return [("window", f"window stepped ({plural(gone, 'message')} archived)")]
    sent_before = ids[ids.index(first) : ids.index(first) + count]
    if now["count"] < count or _h(",".join(sent_before)) != prev.get("ids"):
        return [("history", "the history sent before changed (undo, edit or retry)")]
    return []


def _duration(seconds: float) -> str:
    return f"{seconds / 60:.0f} min" if seconds >= 90 else f"{seconds:.0f} s"


def _int(value: Any) -> int:
    return value if isinstance(value, int) and not isinstance(value, bool) else 0


def _float(value: Any) -> float:
    ok = isinstance(value, (int, float)) and not isinstance(value, bool)
    return float(value) if ok else 0.0
