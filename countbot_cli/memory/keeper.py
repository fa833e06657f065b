"""Memory upkeep: overflow summaries, automatic memory, /compact and recall.

SPEC §5, seed `000_…`, with CountBot's bugs fixed (research/countbot_digest.md §2, §3, §9):

- **Overflow.** Messages older than the next request's history window are *overflow*: the window
  (`context.history_window`) holds at most `max_history_messages` sendable messages, its start
  moving in steps of `context.window_step` (half the window), starting on a user message, and
  trimmed further by the token budget in the same blocks (overflow_region.py, without tool
  definitions, pinned lines or recalled memory, so it is never smaller than the window the
  engine sends: nothing still sent is archived). The block a step leaves behind is summarised
  and archived at once — the same call updates the session's rolling summary (rolling.py) — so
  a full window costs one call every window / 4 turns, and between two steps each request
  extends the previous. A batch is summarised oldest first within a character budget and, on a
  small context window, a token budget (longer batches become several calls). On success one
  MEMORY.md line (`auto-overflow`) is written — nothing when the reply is exactly the sentinel
  — and the batch moves from `messages` to `archived` (kept, no longer sent) inside one
  `store.update`: a message is never summarised twice. A failed, timed-out or empty call
  changes nothing and raises `SummaryError`; the batch is tried again after a later turn.
- **Automatic memory.** First when the session has `auto_messages` sendable messages or
  `auto_chars` characters, then every `auto_messages` new ones: the messages after the cursor
  of what MEMORY.md holds (memory/coverage.py, shared with the steps: a step's call also
  distils the newer messages, so a message is distilled once and a session whose window steps
  needs no automatic-memory calls), newest kept within 4,000 characters, with the
  conversation-to-memory prompt (`auto-memory`). The cursor moves only on success or sentinel.
- **Bounded.** Summary calls go through `summariser.Summariser` (no retries, a short timeout,
  one deadline per upkeep run, no second call after a failure).
"""

from __future__ import annotations

from collections.abc import Callable
from datetime import date
from functools import cached_property
from typing import TYPE_CHECKING

from countbot_cli.conversation.context import sendable, window_step
from countbot_cli.conversation.tokens import TokenCounter
from countbot_cli.errors import UsageError
from countbot_cli.interrupts import sigint_deferred
from countbot_cli.memory import coverage
from countbot_cli.memory import marks as memory_marks
from countbot_cli.memory.coverage import (
    CURSOR_AUTO,
    NEWER_CHARS,
    Share,
)
from countbot_cli.memory.digest import (
    AUTO_CHARS,
    OVERFLOW_CHARS,
    TextCost,
    format_newest,
    message_key,
    overflow_batches,
    summary_line,
)
from countbot_cli.memory.recall import Budget, Recall, label, line_tokens, newest
from countbot_cli.memory.summariser import Postponed, Summariser, SummaryError
from countbot_cli.messages import Message
from countbot_cli.prompts import (
    conversation_memory_prompt,
    overflow_summary_prompt,
)

if TYPE_CHECKING:
    from countbot_cli.config.settings import Settings
    from countbot_cli.conversation.sessions.session import Session
    from countbot_cli.conversation.sessions.store import SessionStore
    from countbot_cli.memory.overflow_region import OverflowRegion
    from countbot_cli.memory.quality import ReplyFilter
    from countbot_cli.memory.search import Entry
    from countbot_cli.memory.store import MemoryStore
    from countbot_cli.provider import Provider

SOURCE_OVERFLOW = "auto-overflow"
SOURCE_AUTO = "auto-memory"
CURSOR_OVERFLOW = "overflow"  # key of the last archived message (archiving is the real cursor)
CURSOR_FAILURES = "summary_failures"  # consecutive upkeep runs whose summary call failed
CURSOR_RETRY_AT = "summary_retry_at"  # no summary call before this many turns (user messages)
MAX_BACKOFF_TURNS = 16
NOTHING_NOTE = "memory: nothing worth keeping in the older messages"
MIN_BATCH = 4


class _Stale(Exception):
    """The session changed under us (another process archived the batch first)."""


class Compacted(list[str]):
    """What /compact wrote to MEMORY.md (one line a batch; a sentinel reply writes none), and in
    `archived` how many messages it moved out of the window."""

    archived: int = 0


def batch_threshold(max_history: int) -> int:
    """Overflow messages needed before a summary call (hysteresis): one step of the window
    (`context.window_step`), which is what leaves the window at once."""
    return max(MIN_BATCH, window_step(max_history))


class MemoryKeeper:
    def __init__(
        self,
        settings: Settings,
        provider: Provider,
        store: SessionStore | None,
        memory: MemoryStore,
        *,
        counter: TokenCounter | None = None,
        today: Callable[[], date] = date.today,
        summariser: Summariser | None = None,
    ) -> None:
        self.settings = settings
        self.provider = provider
        self.store = store
        self.memory = memory
        self._counter = counter
        self.today = today
        self.summariser = summariser or Summariser(settings, provider)
        # memory.inject: relevant (memory/recall.py)
        self.recaller = Recall(memory, wait=settings.memory.recall_wait)

    # the upkeep's parts are made (and their modules loaded) when an upkeep first needs them:
    # a plain `ask` never does (tests/helpers/start_up.py)

    @cached_property
    def overflow_region(self) -> OverflowRegion:
        from countbot_cli.memory.overflow_region import OverflowRegion

        return OverflowRegion(self.settings, lambda: self.counter, lambda: self.today())

    @cached_property
    def reply_filter(self) -> ReplyFilter:
        """Junk replies are not stored (memory/quality.py)."""
        from countbot_cli.memory.quality import ReplyFilter

        return ReplyFilter()

    @property
    def counter(self) -> TokenCounter:
        if self._counter is None:
            self._counter = TokenCounter(self.provider.model)
        return self._counter

    def _language(self) -> str:
        return self.settings.persona.language

    def _max_history(self) -> int:
        return self.settings.persona.max_history_messages

    # ---- overflow ----

    def overflow(self, session_id: str) -> list[str]:
        """Summarise pending overflow once a batch has accumulated; returns the lines written."""
        return self._overflow(session_id, force=False)

    def compact(self, session_id: str) -> Compacted:
        """`/compact`: summarise and archive all but the last exchange now, so the next
        request is smaller by what was summarised. Raises SummaryError."""
        if self.store is None:
            raise UsageError("this conversation is not saved: there is nothing to compact")
        return self._overflow(session_id, force=True)

    def _overflow(self, session_id: str, *, force: bool) -> Compacted:
        written = Compacted()
        if self.store is None:
            return written
        session = self.store.load(session_id)
        region = self.overflow_region.messages(session, everything=force)
        if not region or (not force and len(region) < batch_threshold(self._max_history())):
            return written
        from countbot_cli.memory.rolling import Rolling

        roll = Rolling.start(self.settings, session, self.summariser.context_window)  # same calls
        cost, max_tokens = self._input_budget(roll.prompt(Share()))
        everything = session.all_messages()
        at, mem = len(session.archived), self.settings.memory
        cursor = coverage.start(session, everything, steps_distil=mem.overflow_summary)
        batches = overflow_batches(region, OVERFLOW_CHARS, cost=cost, max_tokens=max_tokens)
        for i, batch in enumerate(batches):
            end = at + len(batch.messages)
            newer = mem.auto_memory and roll.memory and i == len(batches) - 1
            part = coverage.share(
                batch.messages,
                at,
                cursor,
                everything[end:] if newer else [],
                NEWER_CHARS,
                cost=cost,
                max_tokens=max_tokens,
            )
            reply = summary = None
            if roll.wants_call(part):
                try:
                    reply = self.summariser.summarise(roll.prompt(part), "overflow summary")
                except SummaryError as exc:
                    exc.written = written
                    raise
                except Postponed:
                    break
                reply, summary = roll.read(reply)
            try:
                line = self._commit_overflow(
                    session_id, batch.messages, reply, roll.commit(summary, batch.messages), part
                )
            except _Stale:
                break
            at, cursor = end, part.upto
            roll.written(summary, batch.messages)
            written.archived += len(batch.messages)
            if line is not None:
                written.append(line)
        self.reply_filter.report(written)
        return written

    def _input_budget(self, template: str) -> tuple[TextCost | None, int | None]:
        """How many tokens of conversation one summary call may carry on this model: None when
        any batch of OVERFLOW_CHARS surely fits (3 UTF-8 bytes a character at most, and a token
        is at least a byte), so no encoding is loaded for it."""
        s = self.summariser
        scale = max(1.0, self.counter.ratio)
        room = int(s.context_window * 0.9) - s.max_tokens - int(len(template.encode()) * scale)
        if OVERFLOW_CHARS * 3 * scale <= room:
            return None, None
        return self.counter.count_text, max(200, room)

    def _commit_overflow(
        self,
        session_id: str,
        batch: list[Message],
        reply: str | None,
        also: Callable[..., None],
        part: Share,
    ) -> str | None:
        assert self.store is not None
        ids = [m.id for m in batch]
        box: list[str] = []

        def apply(s: Session) -> None:
            if [m.id for m in s.messages[: len(ids)]] != ids:
                raise _Stale
            instructions = overflow_summary_prompt("", self._language())
            if reply is not None and self.reply_filter.keep(reply, instructions, self._stored()):
                origin = {"session": session_id, "messages": [m.id for m in part.distilled]}
                entry = self.memory.add(reply, SOURCE_OVERFLOW, date=self.today(), origin=origin)
                if entry is not None:
                    box.append(entry.line)
            s.archived.extend(s.messages[: len(ids)])
            del s.messages[: len(ids)]
            s.cursors[CURSOR_OVERFLOW] = message_key(ids[-1])
            if self.settings.memory.overflow_summary:  # distilled once (memory/coverage.py)
                done = part.distilled if reply is not None else []  # no memory part: newer wait
                coverage.mark(s, (done or batch)[-1])
            also(s)  # the rolling summary (memory/rolling.py)

        with sigint_deferred():
            self.store.update(session_id, apply, touch=False)
        return box[0] if box else None

    # ---- automatic memory ----

    def auto_memory(self, session_id: str) -> list[str]:
        """Summarise the messages since the cursor when a threshold is reached."""
        if self.store is None:
            return []
        session = self.store.load(session_id)
        everything = session.all_messages()
        mem = self.settings.memory
        start = coverage.start(session, everything, steps_distil=mem.overflow_summary)
        new = sendable(everything[start:])
        if CURSOR_AUTO in session.cursors:
            due = len(new) >= mem.auto_messages
        else:
            due = (
                len(new) >= mem.auto_messages or sum(len(m.content) for m in new) >= mem.auto_chars
            )
        if not due or not everything:
            return []
        cost, max_tokens = self._input_budget(conversation_memory_prompt("", self._language()))
        text = format_newest(new, AUTO_CHARS, cost=cost, max_tokens=max_tokens)
        reply = None
        if text:
            prompt = conversation_memory_prompt(text, self._language())
            try:
                reply = self.summariser.summarise(prompt, "automatic memory")
            except Postponed:
                return []
        used = [m.id for m in new if (line := summary_line(m)) is not None and line in text]
        lines = self._commit_auto(session_id, everything[-1], reply, used)
        self.reply_filter.report(lines)
        return lines

    def _stored(self) -> list[str]:
        return [e.content for e in self.memory.entries()]

    def _commit_auto(
        self, session_id: str, last: Message, reply: str | None, ids: list[str]
    ) -> list[str]:
        assert self.store is not None
        box: list[str] = []

        def apply(s: Session) -> None:
            if not coverage.mark(s, last):
                raise _Stale  # the message is gone, or another process got there first
            instructions = conversation_memory_prompt("", self._language())
            if reply is not None and self.reply_filter.keep(reply, instructions, self._stored()):
                origin = {"session": session_id, "messages": ids}
                entry = self.memory.add(reply, SOURCE_AUTO, date=self.today(), origin=origin)
                if entry is not None:
                    box.append(entry.line)

        try:
            with sigint_deferred():
                self.store.update(session_id, apply, touch=False)
        except _Stale:
            return []
        return box

    # ---- the hook for the conversation (conversation.chat runs it after each saved turn) ----

    def upkeep_hooks(self) -> list[Callable[[str], str | None]]:
        m = self.settings.memory
        return [self.upkeep] if m.overflow_summary or m.session_summary or m.auto_memory else []

    def upkeep(self, session_id: str) -> str | None:
        """After a saved turn: overflow, then automatic memory, as one bounded run. A failed
        overflow call is reported after automatic memory had its chance (which makes no call
        in the same run: the summariser just failed). After failures in a row the next tries
        wait longer: the next turn, then 2, 4 ... turns (at most 16), so a summariser that is
        down does not cost every turn a timeout; /compact always tries. Returns a note when a
        summary said there was nothing worth keeping (a normal outcome)."""
        if self.store is None:
            return None
        mem = self.settings.memory
        session = self.store.load(session_id)
        if session.cursors.get(CURSOR_RETRY_AT, 0) > _turns(session):
            return None
        failure: SummaryError | None = None
        self.reply_filter.nothing = 0
        calls = self.summariser.calls
        with self.summariser.run():
            if mem.overflow_summary or mem.session_summary:
                try:
                    self.overflow(session_id)
                except SummaryError as exc:
                    failure = exc
            if mem.auto_memory:
                try:
                    self.auto_memory(session_id)
                except SummaryError as exc:
                    failure = failure or exc
        if self.summariser.calls > calls and (failure or CURSOR_FAILURES in session.cursors):
            self._note_outcome(session_id, failed=failure is not None)
        if failure is not None:
            raise failure
        return NOTHING_NOTE if self.reply_filter.nothing else None

    def _note_outcome(self, session_id: str, *, failed: bool) -> None:
        """Count failed runs in a row in the session; a success clears the count."""
        assert self.store is not None

        def apply(s: Session) -> None:
            if not failed:
                s.cursors.pop(CURSOR_FAILURES, None)
                s.cursors.pop(CURSOR_RETRY_AT, None)
                return
            n = s.cursors.get(CURSOR_FAILURES, 0) + 1
            s.cursors[CURSOR_FAILURES] = n
            s.cursors[CURSOR_RETRY_AT] = _turns(s) + min(2 ** (n - 1), MAX_BACKOFF_TURNS)

        with sigint_deferred():
            self.store.update(session_id, apply, touch=False)

    # ---- recall (memory.inject) ----

    def pinned(self) -> list[str]:
        """The pinned MEMORY.md lines (`memory pin`), for the system prompt's stable head."""
        return [f"{e.date}: {e.content}" for e in memory_marks.pinned_entries(self.memory)]

    def recall(self, user_text: str) -> list[str]:
        """MEMORY.md lines for the current message (`relevant`, `recent` or `off`), at most
        `memory.recall_lines` within `memory.recall_tokens`, oldest first, each with its date
        (memory/recall.py). Muted lines are never recalled, pinned ones are in the system
        prompt already."""
        mode = self.settings.memory.inject
        if mode == "off":
            return []
        marks = memory_marks.load(self.memory.path)

        def skip(e: Entry) -> bool:
            return marks.is_pinned(e) or marks.is_muted(e)

        budget = Budget(self.settings.memory.recall_lines, self.settings.memory.recall_tokens)
        if mode == "recent":
            picked = newest(self.memory.snapshot(), budget, line_tokens, skip)
        else:
            picked = self.recaller.relevant(user_text, budget, line_tokens, skip)
        return [label(e, older) for e, older in picked]


def _turns(session: Session) -> int:
    """User messages so far (archived ones too): one a turn, failed turns included."""
    return sum(m.role == "user" for m in session.archived) + sum(
        m.role == "user" for m in session.messages
    )
