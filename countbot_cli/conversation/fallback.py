"""The fallback chain: a turn the provider could not answer runs on the next one.

When a turn fails after the provider's retries for a reason another provider can fix (no
connection, a timeout, a 5xx, 429, no quota) and nothing of an answer was shown and no tool
ran, it runs again on the next link (`fallback:`, `ask --fallback NAME`), replacing the failed
attempt as /retry does; a 401/403 or a rejected request never falls back. A provider that could
not answer is passed over for DOWN_FOR seconds; links are built once and kept; the upkeep of a
failed turn is postponed, not lost (said only when it had something to do). The rules and why: docs/design/turn.md.
"""

from __future__ import annotations

import time
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
DOWN_FOR = 300.0  # seconds a provider that could not answer is passed over for a link


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
    def upkeep_due(self, session_id: str) -> bool: ...


def postponed(result: TurnResult, view: UpkeepNotes, keeper: Upkeep | None) -> bool:
    """The provider could not answer this saved turn: its memory upkeep, when there is any,
    waits for a later turn (the view says so when it had something to do now)."""
    if result.session_id is None or (result.fallback is None and not can_fall_back(result)):
        return False
    if keeper is None or not keeper.upkeep_hooks():  # no upkeep configured: nothing waits
        return False
    if keeper.upkeep_due(result.session_id):
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
    """The chain of one conversation, the links built so far, and the providers that could not
    answer lately (passed over for DOWN_FOR seconds while a link can answer instead)."""

    def __init__(
        self,
        chain: Sequence[str],
        link: Callable[[str], Engine] | None = None,
        *,
        local_available: Callable[[], bool] = lambda: False,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self.chain = tuple(chain)
        self._link = link or _no_link
        self._local_available = local_available
        self._built: dict[str, Engine | None] = {}
        self.offer: Callable[[str], bool] | None = None  # the REPL's y/N question
        self._offered = False
        self._clock = clock
        self._down: dict[str, tuple[float, str]] = {}  # provider -> (when it failed, why)
        self._said: set[str] = set()  # the providers whose passing over was said

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

    def failed_lately(self, name: str) -> str | None:
        """Why provider `name` could not answer when it did within DOWN_FOR seconds, else None
        (it is tried again)."""
        got = self._down.get(name)
        if got is not None and self._clock() - got[0] < DOWN_FOR:
            return got[1]
        self._down.pop(name, None)
        self._said.discard(name)
        return None

    def standing_in(self, name: str) -> Engine | None:
        """The link the next turn goes to while provider `name` is passed over (the first built
        one that has not failed lately, as `answer` picks it), else None."""
        if self.failed_lately(name) is None:
            return None
        for link in self.chain:
            engine = self._built.get(link) if link != name else None
            if engine is not None and self.failed_lately(link) is None:
                return engine
        return None

    def link(self, name: str) -> Engine | None:
        """The engine built for link `name` (None: not built, or it could not be)."""
        return self._built.get(name)

    def answer(
        self,
        held: Held,
        run: Callable[..., TurnResult],
        engine: Engine,
        view: TurnView,
        *,
        replaces: str | None,
    ) -> TurnResult:
        """The turn: on `engine` (the chosen provider's) unless that provider could not answer
        lately and a link can (said once), then down the chain while an attempt fails for a
        reason that falls back; `run(engine, replaces=ID)` runs one attempt."""
        name = held.settings.provider.name
        result: TurnResult | None = None
        why = self.failed_lately(name)
        if why is None:
            result = run(engine, replaces=replaces)
            if not can_fall_back(result):
                return result
            self._failed(name, result)
        result = self._down_the_chain(held, run, view, result, replaces=replaces, why=why)
        if result is None:  # no link could take it: the chosen provider after all
            result = run(engine, replaces=replaces)
            if can_fall_back(result):
                self._failed(name, result)
        return result

    def _down_the_chain(
        self,
        held: Held,
        run: Callable[..., TurnResult],
        view: TurnView,
        failed: TurnResult | None,
        *,
        replaces: str | None,
        why: str | None,
    ) -> TurnResult | None:
        """Each link in turn while the attempt fails for a reason that falls back (`failed`:
        the chosen provider's attempt; None when it was passed over, `why` it failed lately),
        each in place of the failed attempt; None when no link could be tried."""
        current = held.settings.provider
        result, origin = failed, current.name
        first = reason_of(failed.error) if failed is not None else why or "failed"
        for name in self.links(current):
            if result is not None and not can_fall_back(result):
                break
            engine = self._engine(name, view) if self.failed_lately(name) is None else None
            if engine is None:
                continue
            model = engine.provider.model
            if result is None:
                self._say_passed_over(current.name, first, f"{name} ({model})", view)
            else:
                view.notice(
                    f"{origin} failed ({reason_of(result.error)}): answering with {name} ({model})"
                )
                replaces = failed_attempt(held.session.messages) if held.save else None
            result = run(engine, replaces=replaces)
            result.fallback = {"from": current.name, "to": name, "reason": first}
            if can_fall_back(result):
                self._failed(name, result)
            _name_the_link(result, name)
            origin = name
        return result

    def _failed(self, name: str, result: TurnResult) -> None:
        self._down[name] = (self._clock(), reason_of(result.error))

    def _say_passed_over(self, name: str, why: str, link: str, view: TurnView) -> None:
        """The first turn that passes `name` over says so; the next ones go to the link quietly."""
        if name not in self._said:
            self._said.add(name)
            minutes = max(1, round(DOWN_FOR / 60))
            view.notice(
                f"{name} failed lately ({why}): answering with {link}; "
                f"{name} is tried again {minutes} min after it failed"
            )

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


def _name_the_link(result: TurnResult, name: str) -> None:
    """A link's failure names the link (its key refused, a bad request, or down too, the last
    of the chain): the user's chosen provider is not the one to fix."""
    err = result.error
    if result.status == "failed" and err is not None and not err.message.startswith("fallback "):
        err.message = f"fallback {name}: {err.message}"
