"""The fallback chain: a turn the provider could not answer runs on the next one (issue 24).

When a turn fails after the provider's own retries for a reason another provider can fix —
no connection, a timeout, a 5xx, a stream that broke before any text, 429 after retries, no
quota or credit (`TransientError`, `RateLimitError` in errors.py) — and nothing of an answer
was shown and no tool ran, the turn runs again on the next link of the chain (`fallback:` in
the config, `ask --fallback NAME`), with one line saying so. A link replaces the failed attempt
in the session exactly as /retry does (`replaces=`), so the session holds one exchange whose
answer records the model that gave it (`Message.model`). Authentication (401/403), a rejected
request (400, 404, context length) and anything else never fall back: another provider would
not fix them, or would hide a problem the user must see.

A link that cannot be used (no key, the embedded model not installed) is skipped with a notice;
links are built once, on first use, and kept (the embedded model stays loaded: the next
fallback is warm). In the REPL with no chain configured, the embedded model is offered once
(`offer`, a y/N question) when it is installed; a yes holds for the rest of the chat.

The memory upkeep after a turn the provider could not answer is postponed, not run against a
provider that just failed: what it would summarise stays where it is (the overflow batch in the
live messages, automatic memory's cursor unmoved), so the first upkeep after a later turn does
it (`postpones_upkeep`).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING, Protocol

from countbot_cli.conversation.sessions.session import last_user_at
from countbot_cli.errors import (
    CountbotError,
    ProviderError,
    QuotaExceededError,
    RateLimitError,
    StreamError,
    TransientError,
    UsageError,
)
from countbot_cli.provider.http_errors import short_reason

if TYPE_CHECKING:
    from countbot_cli.config.providers import ProviderConfig
    from countbot_cli.config.settings import Settings
    from countbot_cli.conversation.engine import Engine
    from countbot_cli.conversation.sessions.session import Session
    from countbot_cli.conversation.turn_record import TurnResult
    from countbot_cli.conversation.view import TurnView
    from countbot_cli.messages import Message

LOCAL = "local"
UPKEEP_POSTPONED = (
    "memory upkeep postponed (the provider could not answer); it runs after a later turn"
)
OFFER = "provider unreachable — answer with the embedded model?"
FALLS_BACK = (TransientError, RateLimitError)  # network, timeout, 5xx, 408/409, 429, quota


def can_fall_back(result: TurnResult) -> bool:
    """The turn failed for a reason another provider can fix, before anything was shown."""
    return (
        result.status == "failed"
        and isinstance(result.error, FALLS_BACK)
        and not result.answer
        and not result.tool_calls
    )


class UpkeepNotes(Protocol):
    def upkeep_note(self, text: str, *, failed: bool) -> None: ...


class Upkeep(Protocol):  # chat.MemoryKeeping
    def upkeep_hooks(self) -> list[Callable[[str], str | None]]: ...


def postponed(result: TurnResult, view: UpkeepNotes, keeper: Upkeep | None) -> bool:
    """The provider could not answer this saved turn: its memory upkeep, when there is any,
    waits for a later turn (the view says so)."""
    if result.session_id is None or (result.fallback is None and not can_fall_back(result)):
        return False
    if keeper is None or not keeper.upkeep_hooks():  # no upkeep configured: nothing waits
        return False
    view.upkeep_note(UPKEEP_POSTPONED, failed=False)
    return True


class Held(Protocol):
    """What the chain reads of the conversation (chat.Conversation)."""

    session: Session
    save: bool
    settings: Settings


def failed_attempt(messages: Sequence[Message]) -> str | None:
    """The id of the last user message when its attempt failed (what a link replaces)."""
    idx = last_user_at(messages)
    user = messages[idx] if idx is not None else None
    return user.id if user is not None and user.status is not None else None


def reason_of(err: CountbotError | None) -> str:
    """A few words: "could not connect", "server error (503)", "out of quota"."""
    if isinstance(err, QuotaExceededError):
        return "out of quota"
    if isinstance(err, StreamError):
        return "the stream broke"
    if isinstance(err, ProviderError):
        return short_reason(err)
    return "failed"


class Fallback:
    """The chain of one conversation and the links built so far."""

    def __init__(
        self,
        chain: Sequence[str],
        link: Callable[[str], Engine] | None = None,
        *,
        local_available: Callable[[], bool] = lambda: False,
    ) -> None:
        self.chain = tuple(chain)
        self._link = link or _no_link
        self._local_available = local_available
        self._built: dict[str, Engine | None] = {}
        self.offer: Callable[[str], bool] | None = None  # the REPL's y/N question
        self._offered = False

    def links(self, current: ProviderConfig) -> tuple[str, ...]:
        """The links to try after `current`; with no chain, the one-time offer (see module)."""
        if self.chain:
            return tuple(n for n in self.chain if n != current.name)
        if self.offer is None or self._offered or current.type == LOCAL:
            return ()
        if not self._local_available():
            return ()
        self._offered = True
        if self.offer(OFFER):
            self.chain = (LOCAL,)
        return self.chain

    def rescue(
        self,
        failed: TurnResult,
        held: Held,
        run: Callable[..., TurnResult],
        view: TurnView,
    ) -> TurnResult:
        """Run the turn on each link in turn while it fails for a reason that falls back, each
        attempt in place of the failed one; `run(engine, replaces=ID)` runs the turn."""
        current = held.settings.provider
        result, origin, first = failed, current.name, reason_of(failed.error)
        for name in self.links(current):
            if not can_fall_back(result):
                break
            engine = self._engine(name, view)
            if engine is None:
                continue
            reason = reason_of(result.error)
            model = engine.provider.model
            view.notice(f"{origin} failed ({reason}): answering with {name} ({model})")
            replaces = failed_attempt(held.session.messages) if held.save else None
            result = run(engine, replaces=replaces)
            result.fallback = {"from": current.name, "to": name, "reason": first}
            origin = name
        return result

    def _engine(self, name: str, view: TurnView) -> Engine | None:
        if name not in self._built:
            try:
                self._built[name] = self._link(name)
            except CountbotError as exc:
                self._built[name] = None
                view.notice(f"fallback {name} skipped: {exc.user_message()}")
        return self._built[name]

    def close(self) -> None:
        """The links' providers (connections, the embedded model)."""
        for engine in self._built.values():
            if engine is not None:
                try:
                    engine.provider.close()
                except Exception:  # closing an idle link must not stop the exit
                    pass


def _no_link(name: str) -> Engine:
    raise UsageError(f"no fallback provider '{name}' is set up")
