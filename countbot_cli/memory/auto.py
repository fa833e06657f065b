"""Automatic memory and `--remember`: the messages since the cursor distilled into one line.

Automatic memory is due first when the session has `auto_messages` sendable messages or
`auto_chars` characters after the cursor of what MEMORY.md holds (memory/coverage.py, shared
with the window's steps), then every `auto_messages` new ones; the newest of them within
AUTO_CHARS go to the conversation-to-memory prompt (`auto-memory`). What the call leaves is
written by memory/distilled.py (the model's line, or what was said when the call failed, its
line was kept back, or the summariser is a smoke-test model) inside the session update that
moves the cursor; the cursor never moves when the run is out of time. `--remember` distils the
turn's exchange now, the same way, whatever the thresholds say.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING

from countbot_cli.conversation.context import sendable
from countbot_cli.conversation.sessions.session import plural
from countbot_cli.interrupts import sigint_deferred
from countbot_cli.memory import coverage
from countbot_cli.memory.coverage import CURSOR_AUTO
from countbot_cli.memory.digest import AUTO_CHARS, TextCost, format_newest, summary_line
from countbot_cli.memory.distilled import Distilled, Distiller, message_days
from countbot_cli.memory.grounding import Grounds
from countbot_cli.memory.quality import NOTHING_NOTE
from countbot_cli.memory.summariser import Postponed, SummaryError
from countbot_cli.memory.summary_prompts import conversation_memory_prompt, written_on
from countbot_cli.messages import Message

if TYPE_CHECKING:
    from countbot_cli.config.settings import Settings
    from countbot_cli.conversation.sessions.session import Session
    from countbot_cli.conversation.sessions.store import SessionStore

SOURCE_AUTO = "auto-memory"
Budget = Callable[[str], tuple[TextCost | None, int | None]]  # the keeper's input budget


class _Gone(Exception):
    """The cursor's message is gone, or another process moved the cursor first."""


class AutoMemory:
    def __init__(
        self, settings: Settings, store: SessionStore | None, distiller: Distiller, budget: Budget
    ) -> None:
        self.settings = settings
        self.store = store
        self.distiller = distiller
        self.budget = budget
        self.language = settings.persona.language

    def due(self, session: Session) -> tuple[bool, list[Message]]:
        """Whether automatic memory is due, and the messages it would distil."""
        everything = session.all_messages()
        mem = self.settings.memory
        start = coverage.start(session, everything, steps_distil=mem.overflow_summary)
        new = sendable(everything[start:])
        due = len(new) >= mem.auto_messages
        if CURSOR_AUTO not in session.cursors:
            due = due or sum(len(m.content) for m in new) >= mem.auto_chars
        return due and bool(everything), new

    def run(self, session_id: str) -> list[str]:
        """Distil the messages since the cursor when it is due; the lines written. Raises
        SummaryError after writing what was said when the call failed."""
        if self.store is None:
            return []
        session = self.store.load(session_id)
        due, new = self.due(session)
        if not due:
            return []
        cost, max_tokens = self.budget(conversation_memory_prompt("", self.language))
        text = format_newest(new, AUTO_CHARS, cost=cost, max_tokens=max_tokens)
        try:
            job, failure = self._job(new, text, "automatic memory")
        except Postponed:
            return []
        lines = self._commit(session_id, session.all_messages()[-1], job)
        if failure is not None:
            failure.written = lines
            raise failure
        return lines

    def remember(self, session_id: str | None, messages: list[Message]) -> list[str]:
        """`--remember`: `messages` distilled into MEMORY.md now; the notes to show."""
        text = format_newest(messages, AUTO_CHARS)
        if not text:
            return [NOTHING_NOTE]
        d = self.distiller
        d.reply_filter.reset()
        with d.summariser.run():
            job, failure = self._job(messages, text, "--remember")
        lines = d.write(job, SOURCE_AUTO, session_id, conversation_memory_prompt("", self.language))
        own = d.reply_filter.own_words
        notes = d.reply_filter.notes()
        if failure is not None:
            said = f"kept what was said instead ({plural(own, 'line')})" if own else "nothing kept"
            notes.append(f"--remember: {failure.message}; {said}")
        elif not lines and not notes:
            notes.append("--remember: already in memory")
        return notes

    def _job(
        self, messages: list[Message], text: str, what: str
    ) -> tuple[Distilled, SummaryError | None]:
        """The call for `text` (the lines of `messages` that fit): the Distilled to write, and
        the call's failure. Raises Postponed (out of time)."""
        lang = self.language
        used = [m for m in messages if (line := summary_line(m)) is not None and line in text]
        job, failure = self.distiller.job(used), None
        if text:
            days = message_days(used)
            prompt = conversation_memory_prompt(text, lang, written_on(days, lang))
            try:
                job.reply = self.distiller.call(prompt, what, job)
            except SummaryError as exc:
                failure = exc
            job.grounds = Grounds([text], days, conversation_memory_prompt("", lang))
        return job, failure

    def _commit(self, session_id: str, last: Message, job: Distilled) -> list[str]:
        assert self.store is not None
        box: list[str] = []
        instructions = conversation_memory_prompt("", self.language)

        def apply(s: Session) -> None:
            if not coverage.mark(s, last):
                raise _Gone
            box.extend(self.distiller.write(job, SOURCE_AUTO, session_id, instructions))

        try:
            with sigint_deferred():
                self.store.update(session_id, apply, touch=False)
        except _Gone:
            return []
        return box
