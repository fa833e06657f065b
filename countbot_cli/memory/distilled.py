"""What one summary call's messages leave in MEMORY.md: the model's line, or what was said.

The model's line is stored when it passes the quality filter (memory/quality.py) and names only
what its messages said (memory/grounding.py). When the call failed, the line was kept back, or
the summariser is a smoke-test model, the durable statements of those messages are stored
instead, close to verbatim and marked as the speaker's (memory/statements.py); "nothing to keep"
and a repeat of a stored line write nothing. Each line is dated with the day its messages were
said, relative dates in it resolved (memory/dates.py), and linked to its messages in the
sources sidecar, with the reason the model's line was kept back when it was (`memory why`).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from datetime import date
from typing import TYPE_CHECKING, Any

from countbot_cli.memory.dates import annotate, said_on
from countbot_cli.memory.digest import separators
from countbot_cli.memory.quality import NOTHING, REPEATED, ReplyFilter
from countbot_cli.memory.statements import statements
from countbot_cli.memory.store import NewLine
from countbot_cli.memory.summariser import AfterFailure, Summariser, SummaryError
from countbot_cli.messages import Message

if TYPE_CHECKING:
    from countbot_cli.memory.grounding import Grounds
    from countbot_cli.memory.store import MemoryStore

KEPT_BACK = "kept_back"  # the sources record's key: why the model's line was not stored
SMOKE_TEST = "{} is a smoke-test model: its summaries are not asked for"


def message_days(messages: Sequence[Message]) -> list[date]:
    """The days `messages` were said on."""
    return [d for m in messages if (d := said_on(m.created_at)) is not None]


def last_day(messages: Sequence[Message]) -> date | None:
    """The day the newest of `messages` was said."""
    days = message_days(messages)
    return max(days) if days else None


class Distiller:
    """The summary calls of one keeper and what they leave: `job` for the messages a call
    stands for, `call` to ask the model (or not), `write` to store the outcome."""

    def __init__(
        self,
        summariser: Summariser,
        memory: MemoryStore,
        reply_filter: ReplyFilter,
        language: str,
        today: Callable[[], date],
    ) -> None:
        self.summariser = summariser
        self.memory = memory
        self.reply_filter = reply_filter
        self.language = language
        self.today = today

    def job(self, messages: list[Message]) -> Distilled:
        model = self.summariser.provider.model
        why = None if self.summariser.writes_summaries else SMOKE_TEST.format(model)
        return Distilled(messages, self.language, why_not=why)

    def call(
        self, prompt: str, what: str, job: Distilled, *, unasked: str | None = None
    ) -> str | None:
        """The model's reply to `prompt` (None when there is no call to make: a smoke-test
        model, an earlier failure of the run, or the caller's reason `unasked`; `job.why_not`
        says why). Raises SummaryError (the call failed; `job.why_not` is its message) and
        Postponed (out of time)."""
        if not self.summariser.writes_summaries:
            return None
        if unasked is not None:
            job.why_not = unasked
            return None
        try:
            return self.summariser.summarise(prompt, what)
        except SummaryError as exc:
            job.why_not = exc.user_message()
            raise
        except AfterFailure as exc:
            job.why_not = str(exc)
            return None

    def write(self, job: Distilled, source: str, sid: str | None, instructions: str) -> list[str]:
        """Store what `job` leaves (inside the session update that moves its messages on)."""
        return job.commit(self.memory, source, sid, self.reply_filter, instructions, self.today())


@dataclass
class Distilled:
    """The messages one call distils and what came of the call."""

    messages: list[Message]  # what the line stands for (oldest first)
    language: str
    reply: str | None = None  # the model's memory line; None: no call, or it failed
    why_not: str | None = None  # why no model line can be used (the call failed, a smoke test)
    grounds: Grounds | None = None  # what the model's line may name

    def commit(
        self,
        memory: MemoryStore,
        source: str,
        session_id: str | None,
        reply_filter: ReplyFilter,
        instructions: str,
        today: date,
    ) -> list[str]:
        """Write the line(s) (inside the session update that moves the messages on)."""
        kept_back = self.why_not
        if self.reply is not None:
            stored = [e.content for e in memory.entries()]
            why = reply_filter.check(self.reply, instructions, stored, self.grounds)
            if why is None:
                return self._model_line(memory, source, session_id, today)
            if why in (NOTHING, REPEATED):
                return []
            kept_back = why
        if kept_back is None:
            return []
        items = [
            NewLine(s.text, s.day or today, self._origin(session_id, [s.message], kept_back))
            for s in statements(self.messages, self.language)
        ]
        added = memory.add_lines(items, source) if items else []
        reply_filter.own_words += len(added)
        return [e.line for e in added]

    def _model_line(
        self, memory: MemoryStore, source: str, sid: str | None, today: date
    ) -> list[str]:
        assert self.reply is not None
        day = last_day(self.messages) or today
        line = separators(annotate(self.reply, day, self._said))
        entry = memory.add(line, source, date=day, origin=self._origin(sid, self.messages))
        return [entry.line] if entry is not None else []

    @staticmethod
    def _origin(
        sid: str | None, messages: Sequence[Message], kept_back: str | None = None
    ) -> dict[str, Any] | None:
        """The sources record (none without a saved session)."""
        if sid is None:
            return None
        origin: dict[str, Any] = {"session": sid, "messages": [m.id for m in messages]}
        if kept_back is not None:
            origin[KEPT_BACK] = kept_back
        return origin

    def _said(self, words: str) -> date | None:
        """The day the newest message holding `words` was said."""
        folded = words.casefold()
        return last_day([m for m in self.messages if folded in m.content.casefold()])
