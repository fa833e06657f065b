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
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Sequence

from countbot_cli.conversation.view import ConversationView, SilentView
from countbot_cli.errors import CountbotError

UPKEEP_INTERRUPTED = "memory upkeep interrupted; it runs again after the next turn"


class UpkeepFailed(CountbotError):
    """A hook's call failed but the hook did what it could: the message says what happened
    (shown as it is, as a failure), `notes` the normal outcomes of the same run."""

    def __init__(self, message: str, *, notes: Sequence[str] = ()) -> None:
        super().__init__(message)
        self.notes = list(notes)


def run_upkeep(
    hooks: Sequence[Callable[[str], str | None]], session_id: str, view: ConversationView
) -> bool:
    """Run each hook for `session_id`, its notes to the view; False when there is none."""
    if not hooks:
        return False
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
    return True


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
