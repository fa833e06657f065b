"""The memory upkeep after a saved turn: the one runner, and the REPL's worker thread for it.

`run_upkeep` runs the memory keeper's hooks for a session (overflow summaries, automatic
memory; a hook may ask the model): after every saved turn of the REPL, of `ask` and of the
tests (`Conversation` calls it). It never breaks the turn: Ctrl-C skips it until the next turn,
a failure is a note.

`UpkeepWorker` runs it off the REPL's critical path, in a daemon thread. One run at a time: a
turn saved while a run is going asks for another, which starts when the first ends (the latest
request wins: the upkeep reads the session file afresh, so one run covers every turn before it).

Why the session file stays consistent while the user goes on: every write of the upkeep (the
archived messages, the cursors, the failure count) and of a turn (the new messages, the usage,
the title) is a `SessionStore.update`, which takes the session's sidecar lock (`flock`, which
excludes threads of one process too), reads the file afresh and applies only its own change.
The upkeep's changes check what they change (the batch archived must still be the first live
messages; automatic memory's last message must still be there), so a turn appended or an
exchange undone meanwhile makes them stale, never wrong. MEMORY.md and its sources sidecar
are written under MEMORY.md's lock. The conversation reloads its copy of the session on the
main thread only (`Conversation.settle`).

Notes of a run (a failure, a rejected summary) are kept for the REPL to show before its next
prompt; Ctrl-C does not reach the thread (quitting waits for a running save, see `wait`).

On a model that answers one call at a time (the embedded one) a turn never waits for a whole
run: the run gives way (`Conversation.give_way`), and after a run that moved the window on,
`warm_head` has the model evaluate the next request's head, so the next turn's first token
costs what any turn's does.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING

from countbot_cli.conversation.view import ConversationView, SilentView
from countbot_cli.errors import CountbotError
from countbot_cli.messages import ChatRequest, Message

if TYPE_CHECKING:
    from countbot_cli.conversation.engine import Engine
    from countbot_cli.conversation.sessions.session import Session
    from countbot_cli.conversation.sessions.store import SessionStore

UPKEEP_INTERRUPTED = "memory upkeep interrupted; it runs again after the next turn"


class UpkeepFailed(CountbotError):
    """A hook's call failed but the hook did what it could: the message says what happened
    (shown as it is, as a failure), `notes` the normal outcomes of the same run."""

    def __init__(self, message: str, *, notes: Sequence[str] = ()) -> None:
        super().__init__(message)
        self.notes = list(notes)


Warm = tuple["SessionStore", Callable[["Session"], None]]  # where the session is, and how


def run_upkeep(
    hooks: Sequence[Callable[[str], str | None]],
    session_id: str,
    view: ConversationView,
    *,
    warm: Warm | None = None,
) -> bool:
    """Run each hook for `session_id`, its notes to the view; False when there is none. With
    `warm`, a run that moved the window on (`head_of`) is followed by the warm-up."""
    if not hooks:
        return False
    before = head_of(warm[0].load(session_id)) if warm is not None else None
    view.upkeep_started()
    try:
        for hook in hooks:
            try:
                for note in (hook(session_id) or "").splitlines():
                    view.upkeep_note(note, failed=False)
            except KeyboardInterrupt:
                view.upkeep_note(UPKEEP_INTERRUPTED, failed=False)
                break
            except UpkeepFailed as exc:
                for note in exc.notes:
                    view.upkeep_note(note, failed=False)
                view.upkeep_note(exc.user_message(), failed=True)
            except CountbotError as exc:
                view.upkeep_note(f"memory upkeep failed: {exc.user_message()}", failed=True)
            except Exception as exc:  # upkeep never ends the conversation
                why = f"{type(exc).__name__}: {exc}"
                view.upkeep_note(f"memory upkeep failed: {why}", failed=True)
    finally:
        view.upkeep_ended()
    if warm is not None:
        session = warm[0].load(session_id)
        if head_of(session) != before:
            warm[1](session)
    return True


def head_of(session: Session) -> tuple[int, str]:
    """What the head of the session's next request depends on that the upkeep changes: how
    many messages left the window, and the rolling summary."""
    return len(session.archived), session.rolling_summary


def warm_head(engine: Engine, session: Session, *, system: str | None) -> None:
    """Have the model evaluate the head of the next request of `session` (system prompt,
    summary and history window, without the coming question): one call for one token, so a
    model that keeps its KV cache between calls starts the next turn from there. Best effort:
    a failure here is the next turn's to meet."""
    ctx = engine.context_for(session, Message(role="user", content=""), system=system)
    head = ctx.api_messages()[:-1]
    req = ChatRequest(
        model=engine.provider.model,
        messages=head,
        tools=engine.tool_schemas() or None,
        temperature=engine.settings.temperature,
        max_tokens=1,
        stream=False,
    )
    try:
        engine.provider.complete(req)
    except CountbotError:
        pass


class NoteKeeper(SilentView):
    """The upkeep's view in the worker: draws nothing, keeps the notes for later."""

    def __init__(self) -> None:
        self.notes: list[tuple[str, bool]] = []
        self._lock = threading.Lock()

    def upkeep_note(self, text: str, *, failed: bool) -> None:
        with self._lock:
            self.notes.append((text, failed))

    def notice(self, text: str) -> None:
        self.upkeep_note(text, failed=False)

    def take(self) -> list[tuple[str, bool]]:
        with self._lock:
            notes, self.notes = self.notes, []
        return notes


class UpkeepWorker:
    """Runs `run(session_id, view)` in a daemon thread, one run at a time."""

    def __init__(
        self,
        run: Callable[[str, NoteKeeper], object],
        on_change: Callable[[], None] | None = None,
    ) -> None:
        self._run = run
        self.on_change = on_change or (lambda: None)  # started or ended (the toolbar's mark)
        self.view = NoteKeeper()
        self._lock = threading.Lock()
        self._idle = threading.Event()
        self._idle.set()
        self._pending: str | None = None
        self.runs = 0  # runs started so far (the conversation reloads when it changed)

    @property
    def running(self) -> bool:
        return not self._idle.is_set()

    def request(self, session_id: str) -> None:
        """Run the upkeep for `session_id` now, or after the run in progress."""
        with self._lock:
            self._pending = session_id
            if self._idle.is_set():
                self._idle.clear()
                threading.Thread(target=self._loop, name="countbot-upkeep", daemon=True).start()
        self.on_change()

    def wait(self, timeout: float | None = None) -> bool:
        """Wait for the runs asked for so far to end; False on timeout."""
        return self._idle.wait(timeout)

    def give_way(self, preempt: Callable[[bool], None] | None) -> float:
        """A turn wants the model: a running run is told to stop at its next safe point
        (`preempt(True)`), waited for, then `preempt(False)`; the seconds waited."""
        if not self.running:
            return 0.0
        start = time.monotonic()
        if preempt is not None:
            preempt(True)
        try:
            self.wait()
        finally:
            if preempt is not None:
                preempt(False)
        return time.monotonic() - start

    def _loop(self) -> None:
        while True:
            with self._lock:
                sid, self._pending = self._pending, None
                if sid is None:
                    self._idle.set()
                    break
                self.runs += 1
            try:
                self._run(sid, self.view)
            except BaseException as exc:  # never let the thread die silently
                self.view.upkeep_note(f"memory upkeep failed: {type(exc).__name__}", failed=True)
        self.on_change()
