"""The summary calls of memory upkeep, bounded: the user never waits long after an answer.

Upkeep runs after the answer was shown, and `ask` cannot exit before it ends. Through the chat
provider a hung summariser would cost 3 attempts of 120 s each, per call. So a summary call:

- goes to a dedicated provider made from the chat provider's settings with no retries and a read
  timeout of at most `SUMMARY_READ_TIMEOUT`; the local model's calls go through its upkeep
  view (`LocalProvider.for_upkeep`), which gives the chat its KV cache back after each call;
- is streamed, so a total deadline can be checked as events arrive, and a reasoning model's
  thinking keeps the connection alive;
- fails after `SUMMARY_READ_TIMEOUT` in all (silence or a slow trickle alike);
- belongs to a run (`Summariser.run()`): after `UPKEEP_SECONDS` no new call starts, and after a
  failed call no other call of the same run is made, so a hung summariser costs one timeout and
  a slow one about a minute at worst. What was not summarised waits, untouched, for a later
  turn;
- asks for at most the reply reserve (`max_tokens`, else min(4096, context window / 8)),
  so a small local model cannot ramble until its context is full;
- gives way to a turn: `preempt()` (a turn wants a model that answers one call at a time)
  stops the run before its next call or between two events of the current one, whose stream
  is closed; the local model's call is cancelled even before its first event (while it
  evaluates the prompt) and gives the chat's KV cache back; the run's rest waits for a later
  turn, untouched (a window step whose call turns keep stopping is then written without one:
  memory/keeper.py).

Ctrl-C during a call raises KeyboardInterrupt with nothing changed; `sigint_deferred` holds it
while a result is written (MEMORY.md line and archive move), so that pair is never half done.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import replace
from typing import TYPE_CHECKING, Any

from countbot_cli.config.providers import ProviderConfig
from countbot_cli.conversation.budget import reply_reserve
from countbot_cli.conversation.tokens import context_window_for
from countbot_cli.errors import CountbotError, ReadTimeoutError
from countbot_cli.messages import ChatRequest, Finished, TextDelta
from countbot_cli.provider import Provider, make_provider
from countbot_cli.provider.openai_compat import OpenAICompatProvider

if TYPE_CHECKING:
    from countbot_cli.config.settings import Settings

SUMMARY_TEMPERATURE = 0.3
SUMMARY_READ_TIMEOUT = 30.0  # a summary call fails after this long (in all, inside a run)
UPKEEP_SECONDS = 30.0  # no summary call starts later than this after the run began
# models that answer to show countbot runs, too small to summarise: their upkeep keeps what
# was said (memory/statements.py) and makes no call (the bundled SmolLM2-135M-Instruct)
SMOKE_TEST_MODELS = ("smollm2-135m",)


class SummaryError(CountbotError):
    """A memory summary call failed. `written` holds the lines the run wrote before it."""

    written: list[str] = []  # replaced per instance, never mutated


class Postponed(Exception):
    """The run is out of time or a turn wants the model: the rest waits for a later turn."""


class Preempted(Postponed):
    """A turn wants the model (`Summariser.preempt`)."""


class CallStopped(Preempted):
    """A turn stopped a call that had begun (not one about to begin)."""


class AfterFailure(Postponed):
    """An earlier call of this run failed: no other call is made in it."""


class Summariser:
    """Makes the summary calls of one MemoryKeeper."""

    def __init__(
        self,
        settings: Settings,
        provider: Provider,
        *,
        clock: Callable[[], float] = time.monotonic,
        read_timeout: float = SUMMARY_READ_TIMEOUT,
        run_seconds: float = UPKEEP_SECONDS,
    ) -> None:
        self.settings = settings
        self.provider = provider
        self.clock = clock
        self.read_timeout = read_timeout
        self.run_seconds = run_seconds
        self.calls = 0  # summary calls made (the keeper's upkeep: did this run call the model)
        self._deadline: float | None = None
        self._failed = False
        self._preempted = threading.Event()

    def preempt(self, on: bool = True) -> None:
        """A turn wants the model now (on) or is done waiting for it (off): see the module."""
        if on:
            self._preempted.set()
        else:
            self._preempted.clear()

    @property
    def writes_summaries(self) -> bool:
        """False for a smoke-test model (`SMOKE_TEST_MODELS`): its summaries are not asked for."""
        model = self.provider.model.casefold()
        return not any(name in model for name in SMOKE_TEST_MODELS)

    @property
    def failed(self) -> bool:
        """A call of the current run failed."""
        return self._failed

    @property
    def context_window(self) -> int:
        return context_window_for(self.provider.model, self.provider.context_window)

    @property
    def max_tokens(self) -> int:
        return reply_reserve(self.settings.max_tokens, self.context_window)

    @contextmanager
    def run(self) -> Iterator[None]:
        """One upkeep run: a deadline for starting calls, and no call after a failed one."""
        outer = self._deadline is not None
        if not outer:
            self._deadline = self.clock() + self.run_seconds
            self._failed = False
        try:
            yield
        finally:
            if not outer:
                self._deadline = None

    def summarise(self, prompt: str, what: str) -> str:
        """The model's one-line reply to `prompt`. Raises SummaryError (the call failed, timed
        out or returned nothing) or Postponed (inside a run: out of time, or already failed)."""
        total = self._time_for_call()
        self.calls += 1
        try:
            text = self._call(prompt, total)
        except _Stopped:
            raise CallStopped("a turn stopped the call") from None
        except ReadTimeoutError:
            self._failed = True
            raise SummaryError(f"{what} failed: no answer within {total:.0f} s") from None
        except CountbotError as exc:
            self._failed = True
            raise SummaryError(f"{what} failed: {exc.user_message()}") from exc
        text = " ".join(text.split())
        if not text:
            self._failed = True
            raise SummaryError(f"{what} failed: the model returned nothing")
        return text

    def _time_for_call(self) -> float:
        """Seconds this call may take in all: the read timeout (outside a run, twice that)."""
        if self._preempted.is_set():
            raise Preempted("a turn wants the model")
        if self._deadline is None:
            return 2 * self.read_timeout
        if self._failed:
            raise AfterFailure("an earlier summary call of this run failed")
        if self.clock() >= self._deadline:
            raise Postponed("memory upkeep is out of time for this turn")
        return self.read_timeout

    def _call(self, prompt: str, total: float) -> str:
        req = ChatRequest(
            model=self.provider.model,
            messages=[{"role": "user", "content": prompt}],
            tools=None,
            temperature=SUMMARY_TEMPERATURE,
            max_tokens=self.max_tokens,
            stream=True,
        )
        provider, own = self._provider(min(self.read_timeout, total))
        end = self.clock() + total
        try:
            return _collect(provider.stream(req), lambda: self.clock() > end, self._preempted)
        finally:
            if own:
                provider.close()

    def _provider(self, read_timeout: float) -> tuple[Provider, bool]:
        """A dedicated HTTP provider (no retries, short read timeout), the local model's
        upkeep view (it keeps the chat's KV cache), or the chat provider itself (test doubles)."""
        from countbot_cli.provider.local import LocalProvider  # not for a remote ask (start-up)

        if isinstance(self.provider, LocalProvider):
            return self.provider.for_upkeep(self._preempted), False
        if not isinstance(self.provider, OpenAICompatProvider):
            return self.provider, False
        cfg = self.provider.cfg
        if not isinstance(cfg, ProviderConfig) or cfg.type != "openai":  # settings made by hand
            return self.provider, False
        quick = replace(
            cfg,
            model=self.provider.model,
            read_timeout=min(cfg.read_timeout, read_timeout),
            max_retries=0,
        )
        return make_provider(quick), True


class _Stopped(Exception):
    """The call was stopped for a turn."""


def _collect(events: Iterator[Any], late: Callable[[], bool], stop: threading.Event) -> str:
    """The text of a streamed reply; ReadTimeoutError once `late()` turns true, _Stopped once
    `stop` is set (the stream is closed either way)."""
    parts: list[str] = []
    try:
        for ev in events:
            if stop.is_set():
                raise _Stopped
            if isinstance(ev, TextDelta):
                parts.append(ev.text)
            elif isinstance(ev, Finished):
                return ev.content or "".join(parts)
            if late():
                raise ReadTimeoutError("the answer took too long")
    finally:
        close = getattr(events, "close", None)
        if callable(close):
            close()
    if stop.is_set():  # the stream was stopped before its end (the local model's upkeep view)
        raise _Stopped
    return "".join(parts)
