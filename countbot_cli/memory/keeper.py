"""`MemoryKeeper`: the memory upkeep after a turn, /compact, and recall for the engine.

The upkeep is one bounded run (memory/summariser.py) after a saved turn: the window's steps
first — each block of messages leaving the request's window (memory/overflow_region.py) is
archived in the same session write that stores what it leaves in MEMORY.md (the model's line,
or what was said: memory/distilled.py) and brings the rolling summary up to date
(memory/rolling.py), one call a step — then automatic memory (memory/auto.py). A message is
distilled once (memory/coverage.py) and never lost: a failed or kept-back summary keeps what
was said, an interrupted or out-of-time run leaves the rest for a later turn. Failures in a
row space the next tries out (1, 2, 4 … 16 turns); /compact always tries. A step whose call
turns stopped `STEP_STOPS` times (a model slower than the user types) is written the way a
failed call's is, from what was said, with no call: the window steps and memory keeps up.
"""

from __future__ import annotations

from collections.abc import Callable
from datetime import date
from functools import cached_property
from typing import TYPE_CHECKING

from countbot_cli.conversation.context import window_step
from countbot_cli.conversation.sessions.session import plural
from countbot_cli.conversation.tokens import TokenCounter
from countbot_cli.conversation.upkeep import UpkeepFailed
from countbot_cli.errors import UsageError
from countbot_cli.interrupts import sigint_deferred
from countbot_cli.memory import coverage
from countbot_cli.memory import marks as memory_marks
from countbot_cli.memory.coverage import (
    NEWER_CHARS,
    Share,
)
from countbot_cli.memory.dates import said_on
from countbot_cli.memory.digest import (
    OVERFLOW_CHARS,
    Batch,
    TextCost,
    message_key,
    overflow_batches,
)
from countbot_cli.memory.recall import Budget, Recall, label, line_tokens, newest
from countbot_cli.memory.summariser import CallStopped, Postponed, Summariser, SummaryError
from countbot_cli.memory.summary_prompts import (
    overflow_summary_prompt,
    written_on,
)
from countbot_cli.messages import Message

if TYPE_CHECKING:
    from countbot_cli.config.settings import Settings
    from countbot_cli.conversation.sessions.session import Session
    from countbot_cli.conversation.sessions.store import SessionStore
    from countbot_cli.memory.auto import AutoMemory
    from countbot_cli.memory.distilled import Distilled, Distiller
    from countbot_cli.memory.overflow_region import OverflowRegion
    from countbot_cli.memory.quality import ReplyFilter
    from countbot_cli.memory.rolling import Rolling
    from countbot_cli.memory.search import Entry
    from countbot_cli.memory.store import MemoryStore
    from countbot_cli.provider import Provider

SOURCE_OVERFLOW = "auto-overflow"
KEPT_NONE = "nothing said in those messages to keep without it"
CURSOR_OVERFLOW = "overflow"  # key of the last archived message (archiving is the real cursor)
CURSOR_FAILURES = "summary_failures"  # consecutive upkeep runs whose summary call failed
CURSOR_RETRY_AT = "summary_retry_at"  # no summary call before this many turns (user messages)
MAX_BACKOFF_TURNS = 16
MIN_BATCH = 4
# a step's call stopped this many times by turns is not made again: once may be a question
# typed during one call, twice in a row means the summary takes longer than the user takes to
# type, and every further try would be stopped too, leaving the window unstepped
STEP_STOPS = 2
STOPPED = "turns stopped the summary call {} times"


def _kept(lines: int) -> str:
    """What a step written without the model's summary kept of what was said."""
    return f"kept what was said instead ({plural(lines, 'line')})" if lines else KEPT_NONE


class _Stale(Exception):
    """The session changed under us (another process archived the batch first)."""


class Compacted(list[str]):
    """What /compact wrote to MEMORY.md (a line a batch, or what was said when its summary was
    kept back; a sentinel reply writes none), in `archived` how many messages it moved out of
    the window, in `notes` what the filter had to say."""

    archived: int = 0
    notes: list[str] = []  # replaced per instance, never mutated


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
        m = settings.memory
        self.recaller = Recall(memory, wait=m.recall_wait, keep=m.recall_keep)
        self._stops = ("", 0)  # the first message of the step whose call turns stopped, times
        self._unasked: list[int] = []  # lines of each step of this run written without a call

    # the upkeep's parts are made (and their modules loaded) when an upkeep first needs them:
    # a plain `ask` never does (tests/helpers/start_up.py)

    @cached_property
    def overflow_region(self) -> OverflowRegion:
        from countbot_cli.memory.overflow_region import OverflowRegion  # upkeep only (start-up)

        return OverflowRegion(self.settings, lambda: self.counter, lambda: self.today())

    @cached_property
    def reply_filter(self) -> ReplyFilter:
        """Junk replies are not stored (memory/quality.py)."""
        from countbot_cli.memory.quality import ReplyFilter  # upkeep only (start-up)

        return ReplyFilter()

    @cached_property
    def distiller(self) -> Distiller:
        """The summary calls and what they leave (memory/distilled.py)."""
        from countbot_cli.memory.distilled import Distiller  # upkeep only (start-up)

        return Distiller(
            self.summariser, self.memory, self.reply_filter, self._language(), self.today
        )

    @cached_property
    def auto(self) -> AutoMemory:
        from countbot_cli.memory.auto import AutoMemory  # upkeep only (start-up)

        return AutoMemory(self.settings, self.store, self.distiller, self._input_budget)

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
        self.reply_filter.reset()
        done = self._overflow(session_id, force=True)
        done.notes = self.reply_filter.notes()
        return done

    def _overflow(self, session_id: str, *, force: bool) -> Compacted:
        written = Compacted()
        if self.store is None:
            return written
        session = self.store.load(session_id)
        region = self.overflow_region.messages(session, everything=force)
        if not region or (not force and len(region) < batch_threshold(self._max_history())):
            return written
        from countbot_cli.memory.rolling import Rolling  # upkeep only (start-up)

        roll = Rolling.start(self.settings, session, self.summariser.context_window)  # same calls
        cost, max_tokens = self._input_budget(roll.template())
        everything = session.all_messages()
        at, mem = len(session.archived), self.settings.memory
        cursor = coverage.start(session, everything, steps_distil=mem.overflow_summary)
        batches = overflow_batches(region, OVERFLOW_CHARS, cost=cost, max_tokens=max_tokens)
        failures: list[SummaryError] = []
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
            try:
                lines = self._step(
                    session_id, roll, batch, part, everything[:end], failures, force=force
                )
            except SummaryError as exc:  # /compact: the user asked for a summary now
                exc.written = written
                raise
            except CallStopped:
                first = batch.messages[0].id
                self._stops = (first, self._stops[1] + 1 if self._stops[0] == first else 1)
                break
            except (Postponed, _Stale):
                break
            at, cursor = end, part.upto
            written.archived += len(batch.messages)
            written.extend(lines)
        if failures:
            failures[0].written = written
            raise failures[0]
        return written

    def _step(
        self,
        session_id: str,
        roll: Rolling,
        batch: Batch,
        part: Share,
        upto: list[Message],
        failures: list[SummaryError],
        *,
        force: bool,
    ) -> list[str]:
        """One batch: its call (a failed one is added to `failures`, unless /compact's, which
        raises), its memory lines, the summary and the archiving. Raises Postponed (out of
        time: the batch waits) and _Stale."""
        job, summary = self.distiller.job([]), None
        stopped = self._stops[1] if self._stops[0] == batch.messages[0].id else 0
        unasked = STOPPED.format(stopped) if stopped >= STEP_STOPS and not force else None
        asked = roll.wants_call(part)
        if asked:
            days = batch_days(batch, part)
            prompt = roll.prompt(part, written_on(days, self._language()))
            if roll.asked:
                job = self.distiller.job(part.distilled)
            try:
                reply = self.distiller.call(prompt, "overflow summary", job, unasked=unasked)
            except SummaryError as exc:
                if force:
                    raise
                failures.append(exc)
                reply = None
            job.reply, summary = roll.read(reply)
            job.grounds = roll.grounds(part, self._language(), days)
            summary = roll.usable(summary, job.grounds)
        said = None
        if summary is None and roll.said_instead(self.summariser.writes_summaries):
            said = roll.recap(upto)
        recap = said is not None
        change = roll.commit(summary or said, batch.messages, said=recap)
        lines = self._commit_overflow(session_id, batch.messages, job, change, part)
        roll.written(summary or said, batch.messages, said=recap)
        if asked and unasked is not None:
            self._unasked.append(len(lines))
        return lines

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
        job: Distilled,
        also: Callable[..., None],
        part: Share,
    ) -> list[str]:
        assert self.store is not None
        ids = [m.id for m in batch]
        box: list[str] = []
        wrote = job.reply is not None or job.why_not is not None

        def apply(s: Session) -> None:
            if [m.id for m in s.messages[: len(ids)]] != ids:
                raise _Stale
            instructions = overflow_summary_prompt("", self._language())
            box.extend(self.distiller.write(job, SOURCE_OVERFLOW, session_id, instructions))
            s.archived.extend(s.messages[: len(ids)])
            del s.messages[: len(ids)]
            s.cursors[CURSOR_OVERFLOW] = message_key(ids[-1])
            if self.settings.memory.overflow_summary:  # distilled once (memory/coverage.py)
                done = part.distilled if wrote else []  # no memory part: newer wait
                coverage.mark(s, (done or batch)[-1])
            also(s)  # the rolling summary (memory/rolling.py)

        with sigint_deferred():
            self.store.update(session_id, apply, touch=False)
        return box

    # ---- automatic memory (memory/auto.py) ----

    def auto_memory(self, session_id: str) -> list[str]:
        """Distil the messages since the cursor when a threshold is reached."""
        return self.auto.run(session_id)

    def remember(self, session_id: str | None, messages: list[Message]) -> list[str]:
        """`--remember`: `messages` distilled into MEMORY.md now; the notes."""
        return self.auto.remember(session_id, messages)

    # ---- the hook for the conversation (conversation.chat runs it after each saved turn) ----

    def upkeep_hooks(self) -> list[Callable[[str], str | None]]:
        m = self.settings.memory
        return [self.upkeep] if m.overflow_summary or m.session_summary or m.auto_memory else []

    def preempt(self, on: bool = True) -> None:
        """A turn wants the model: the running upkeep stops at its next safe point (on), or
        the turn has it (off)."""
        self.summariser.preempt(on)

    def upkeep_due(self, session_id: str) -> bool:
        """Whether the upkeep after this turn would summarise something now (a step of the
        window, or automatic memory), with nothing held back by failures."""
        if self.store is None:
            return False
        mem, session = self.settings.memory, self.store.load(session_id)
        if session.cursors.get(CURSOR_RETRY_AT, 0) > _turns(session):
            return False
        if mem.overflow_summary or mem.session_summary:
            region = self.overflow_region.messages(session)
            if len(region) >= batch_threshold(self._max_history()):
                return True
        return mem.auto_memory and self.auto.due(session)[0]

    def upkeep(self, session_id: str) -> str | None:
        """After a saved turn: overflow, then automatic memory, as one bounded run. A failed
        call keeps what its messages said instead (memory/distilled.py) and is reported after
        automatic memory had its chance (which makes no call in the same run: the summariser
        just failed). After failures in a row the next tries wait longer: the next turn, then
        2, 4 ... turns (at most 16), so a summariser that is down does not cost every turn a
        timeout; /compact always tries. Returns the notes of normal outcomes (nothing worth
        keeping, a summary kept back); raises UpkeepFailed for a failed call."""
        if self.store is None:
            return None
        mem = self.settings.memory
        session = self.store.load(session_id)
        if session.cursors.get(CURSOR_RETRY_AT, 0) > _turns(session):
            return None
        failure: SummaryError | None = None
        self.reply_filter.reset()
        self._unasked = []
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
        own = self.reply_filter.own_words
        notes = self._unasked_notes() + self.reply_filter.notes()
        if failure is not None:
            raise UpkeepFailed(f"memory: {failure.message}; {_kept(own)}", notes=notes)
        return "\n".join(notes) or None

    def _unasked_notes(self) -> list[str]:
        """What the run's steps written without a call (`STEP_STOPS`) kept."""
        if not self._unasked:
            return []
        kept = _kept(sum(self._unasked))
        steps = plural(len(self._unasked), "step")
        why = STOPPED.format(STEP_STOPS)
        return [f"memory: the window moved on {steps} without the model's summary ({why}); {kept}"]

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


def batch_days(batch: Batch, part: Share) -> list[date]:
    """The days a step's call shows messages of: the batch and the newer ones it distils."""
    return [d for m in [*batch.messages, *part.distilled] if (d := said_on(m.created_at))]


def _turns(session: Session) -> int:
    """User messages so far (archived ones too): one a turn, failed turns included."""
    return sum(m.role == "user" for m in session.archived) + sum(
        m.role == "user" for m in session.messages
    )
