"""`Conversation`: one conversation as the user has it, and every operation on it.

The REPL and `ask` each hold one; the slash commands call its operations instead of reaching
into the engine, the store or the session. It owns the session and its "new or saved" rule (a
new conversation is written by its first turn), the store, a turn around the engine (saved,
charged, then the memory upkeep; a fallback link answering what the provider could not), the
approval policy, the `--system` text, and the engine and memory keeper on the current model.
The invariant: the engine only returns a record; saving and charging happen here, once. How a
turn goes: docs/design/turn.md.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import replace
from datetime import date
from functools import partial
from typing import TYPE_CHECKING, Any, NamedTuple, Protocol

from countbot_cli.config.prices import charge, day_cost, day_saved
from countbot_cli.config.settings import APPROVAL_MODES
from countbot_cli.conversation import fallback as fb
from countbot_cli.conversation.context import without_failed
from countbot_cli.conversation.saving import TurnSaver
from countbot_cli.conversation.sessions.fork import fork_session
from countbot_cli.conversation.sessions.session import (
    Session,
    last_user_at,
    new_session,
    title_from,
)
from countbot_cli.conversation.tuning import Tuning
from countbot_cli.conversation.turn_record import TurnResult
from countbot_cli.conversation.upkeep import UpkeepWorker, run_upkeep, warm_head
from countbot_cli.conversation.view import ConversationView
from countbot_cli.errors import Terminated, UsageError
from countbot_cli.textsafe import sanitize_line
from countbot_cli.tools.approval import ApprovalPolicy

if TYPE_CHECKING:
    from countbot_cli.config.roles import Role
    from countbot_cli.config.settings import Settings
    from countbot_cli.conversation.engine import Engine
    from countbot_cli.conversation.input.attachments import Attached
    from countbot_cli.conversation.sessions.store import SessionStore
    from countbot_cli.messages import Message
    from countbot_cli.provider import Provider

# provider types whose model answers one call at a time: a turn waits for the upkeep on them
SERIAL_PROVIDERS = ("local",)


class MemoryKeeping(Protocol):
    """What a conversation uses of the memory keeper (memory/keeper.py, a higher layer)."""

    # each hook takes a session id; a string it returns is a normal note (shown dimmed)
    def upkeep_hooks(self) -> list[Callable[[str], str | None]]: ...
    def upkeep_due(self, session_id: str) -> bool: ...
    def preempt(self, on: bool = True) -> None: ...  # a turn wants the model: stop, or go on
    def compact(self, session_id: str) -> list[str]: ...


class ModelPair(NamedTuple):
    """The engine and the memory keeper on one provider; `/model` makes a new pair."""

    engine: Engine
    keeper: MemoryKeeping | None = None


# (a model, None for the configured one; the conversation's approval policy; per-call options
# on top of the settings', from /set and /role) -> its ModelPair
PairFactory = Callable[[str | None, ApprovalPolicy, Mapping[str, Any]], ModelPair]


def open_session(
    store: SessionStore, settings: Settings, *, ref: str | None, cont: bool
) -> tuple[Session, bool]:
    """The session to continue (-s/-c) or a new one. Returns (session, is_new)."""
    if ref or (cont and store.list()):  # -c with nothing saved yet starts a new one
        return store.load(store.resolve(ref or "latest")), False
    return new_session(provider=settings.provider.name, model=settings.provider.model), True


class Conversation:
    def __init__(
        self,
        *,
        settings: Settings,
        store: SessionStore,
        pairs: PairFactory,
        policy: ApprovalPolicy | None = None,
        session: Session | None = None,
        is_new: bool = True,
        save: bool = True,
        today: Callable[[], date] = date.today,
    ) -> None:
        self.settings = settings
        self.store = store
        self.policy = policy or ApprovalPolicy()
        self._pairs = pairs
        self._model: str | None = None  # /model's or the role's; None: the configured one
        self.tuning = Tuning()  # /set options and /role, for the rest of the chat
        self.pair = pairs(None, self.policy, {})
        self.system_override: str | None = settings.system
        self.session = session or self._blank("")
        self.is_new = is_new or session is None
        self.save = save  # False: `ask --no-save`, nothing is written
        self.today = today  # the day a call's cost is added to
        # the REPL's: the upkeep runs in a worker thread and the prompt comes back at once
        self.worker: UpkeepWorker | None = None
        self._runs_seen = 0
        self._waited = 0.0  # seconds the coming turn waited for the upkeep (give_way)
        self.fallback = fb.Fallback(())  # where a failed turn moves on to (app.py sets it)

    @property
    def engine(self) -> Engine:
        return self.pair.engine

    @property
    def provider(self) -> Provider:
        return self.pair.engine.provider

    # ---- turns ----

    def send(
        self,
        text: str,
        view: ConversationView,
        *,
        replaces: str | None = None,
        attached: Attached | None = None,
    ) -> TurnResult:
        """One turn, saved; then the view settles it; then the memory upkeep. Ctrl-C held
        during the save arrives after it (KeyboardInterrupt): the conversation is saved then."""
        self._before_turn()
        waited, self._waited = self._waited, 0.0
        run = partial(self._attempt, text=text, view=view, attached=attached)
        try:
            # on the chosen provider, or the chain's next when it cannot answer (fallback.py)
            result = self.fallback.answer(self, run, self.engine, view, replaces=replaces)
        except KeyboardInterrupt as exc:
            if self.save and not self.is_new and not isinstance(exc, Terminated):
                self.reload()
            raise
        result.upkeep_wait = waited
        view.turn_ended(result)
        sid = None if fb.postponed(result, view, self.pair.keeper) else result.session_id
        if sid is not None and self.worker is not None:
            self.worker.request(sid)
        elif sid is not None and self._upkeep(sid, view):
            self.reload()  # upkeep may have archived messages in the file
        return result

    def _attempt(
        self,
        engine: Engine,
        *,
        replaces: str | None,
        text: str,
        view: ConversationView,
        attached: Attached | None,
    ) -> TurnResult:
        """One attempt at the turn on `engine`: run, charged, saved (its question before the
        model starts: `TurnSaver`), its notices shown; a termination or a closed output that
        stopped it is raised once it is saved. `replaces`: the failed attempt it replaces."""
        history = self.session
        if replaces:  # the failed attempt being retried is not sent again
            history = replace(history, messages=without_failed(history.messages, replaces))
        saver = None
        if self.save:
            saver = TurnSaver(
                self.store,
                self.session,
                is_new=self.is_new,
                replaces=replaces,
                model=engine.provider.model,
            )
        try:
            record = engine.run_turn(
                history,
                text,
                view,
                system=self.tuning.system(self.system_override),
                attached=attached,
                started=saver.question if saver is not None else None,
            )
            result = TurnResult.of(record, session_id=None)
            self._charge(result, engine)
            if saver is not None:
                saver.turn(result)
                result.session_id = self.session.id  # a new one when the file was lost
                result.notices += saver.notices
        finally:
            if saver is not None and not saver.is_new:
                self.is_new = False
        for note in result.notices:
            view.notice(note)
        if result.stopped_by is not None:  # saved; now stop (SIGTERM, terminal or pipe closed)
            raise result.stopped_by
        return result

    def _charge(self, result: TurnResult, engine: Engine) -> None:
        """With prices set: each model call's cost, added to the day's tally (a damaged tally
        is a notice), and the day's totals for the usage line."""
        prices, data_dir = self.settings.prices, self.settings.data_dir
        if not prices:
            return
        day = self.today()
        for call in result.calls:
            if call.usage is not None:
                models = (engine.provider.model, call.model)
                result.notices += charge(prices, call.usage, models, data_dir, day)
        usage = result.usage
        if usage.cost is not None:
            result.cost_today = day_cost(data_dir, day)
        if usage.saved is not None:
            result.saved_today = day_saved(data_dir, day)

    # ---- the upkeep in the background (the REPL) ----

    def upkeep_in_background(self, on_change: Callable[[], None] | None = None) -> None:
        """From now on the upkeep after a turn runs in a worker thread (upkeep.py says
        why the session file stays consistent); `on_change` when a run starts or ends."""
        self.worker = UpkeepWorker(lambda sid, view: self._upkeep(sid, view), on_change)

    @property
    def upkeep_running(self) -> bool:
        return self.worker is not None and self.worker.running

    def settle(self) -> list[tuple[str, bool]]:
        """On the main thread, before an operation or a prompt: take the session as saved if
        an upkeep run ended since, and return the notes (text, failed) to show."""
        if self.worker is None:
            return []
        self.settle_session()
        return self.worker.view.take()

    def wait_upkeep(self, timeout: float | None = None) -> bool:
        """Wait for a running upkeep (before /compact, /fork, quitting); False on timeout."""
        if self.worker is None:
            return True
        done = self.worker.wait(timeout)
        self.settle_session()
        return done

    def settle_session(self) -> None:
        """Reload once after upkeep runs ended (never while one runs: a turn's own copy is
        good enough for its request, and the file takes both writes)."""
        w = self.worker
        if w is not None and not w.running and w.runs != self._runs_seen:
            self._runs_seen = w.runs
            self.reload()

    @property
    def turn_waits_for_upkeep(self) -> bool:
        """The next turn will wait for the upkeep running now (the REPL's spinner says so)."""
        return self.upkeep_running and self.settings.provider.type in SERIAL_PROVIDERS

    def _before_turn(self) -> None:
        """A turn may start while the upkeep runs (their writes merge in the file), except on
        the embedded model, which cannot answer two calls at once: its upkeep gives way."""
        if self.worker is None:
            return
        if self.settings.provider.type in SERIAL_PROVIDERS:
            self.give_way()
        elif not self.worker.running:
            self.settle_session()

    def give_way(self) -> float:
        """A turn wants the serial model: its upkeep stops at its next safe point; seconds waited."""
        if self.worker is None:
            return 0.0
        keeper = self.pair.keeper
        waited = self.worker.give_way(keeper.preempt if keeper is not None else None)
        self._waited += waited
        self.settle_session()
        return waited

    def _upkeep(self, session_id: str, view: ConversationView) -> bool:
        """The memory upkeep after a saved turn (`run_upkeep`); False when there is none. On a
        serial model in the worker, the next request's head is evaluated after (`warm_head`)."""
        keeper = self.pair.keeper
        hooks = keeper.upkeep_hooks() if keeper is not None else []
        if self.worker is None or self.settings.provider.type not in SERIAL_PROVIDERS:
            return run_upkeep(hooks, session_id, view)
        system = self.tuning.system(self.system_override)
        warm = partial(warm_head, self.engine, system=system)
        return run_upkeep(hooks, session_id, view, warm=(self.store, warm))

    def last_question(self) -> tuple[Message, bool] | None:
        """What /retry would ask again: (the last user message, True when its attempt failed
        or was interrupted), or None when there is nothing to retry."""
        msgs = self.session.messages
        idx = last_user_at(msgs)
        if self.is_new or idx is None:
            return None
        user, after = msgs[idx], msgs[idx + 1 :]
        return user, user.status is not None or any(m.status is not None for m in after)

    def retry(self, view: ConversationView) -> TurnResult | None:
        """Ask the last question again (`edit` with its own text)."""
        last = self.last_question()
        return None if last is None else self.edit(last[0].content, view)

    def edit(self, text: str, view: ConversationView) -> TurnResult | None:
        """Ask `text` in place of the last question (/edit, /retry). A failed or interrupted
        attempt is replaced by the engine (`replaces=`) and left out of the request; a good
        answer is removed first (`undo`, which gives the title back if it came from it)."""
        last = self.last_question()
        if last is None:
            return None
        user, failed = last
        if failed:
            return self.send(text, view, replaces=user.id)
        self.undo()
        return self.send(text, view)

    def undo(self) -> list[Message]:
        """Remove the last exchange (the last user message and all after it) from the file."""
        if self.is_new or last_user_at(self.session.messages) is None:
            return []

        def apply(s: Session) -> list[Message]:
            idx = last_user_at(s.messages)
            if idx is None:
                return []
            removed, s.messages = s.messages[idx:], s.messages[:idx]
            first = not any(m.role == "user" for m in s.all_messages())
            if first and s.title == title_from(removed[0].content):
                s.title = ""  # the title came from the question undone: the next one names it
            gone = {m.id for m in removed}
            s.tool_conversations = [
                r for r in s.tool_conversations if r.get("message_id") not in gone
            ]
            return removed

        removed: list[Message] = self.store.update(self.session.id, apply)
        self.reload()
        return removed

    # ---- which session ----

    def new(self, title: str = "") -> list[str]:
        """Start a new conversation (saved by its first turn); the revoked session grants."""
        self.session = self._blank(title)
        self.is_new = True
        return self._reset()

    def resume(self, ref: str) -> list[str]:
        """Switch to a saved conversation (an id prefix or 'latest'); the revoked grants."""
        self.session = self.store.load(self.store.resolve(ref))
        self.is_new = False
        return self._reset()

    def fork(self, upto: int | None = None, title: str = "") -> Session:
        """Copy this conversation up to its message `upto` (all of it when None) into a new
        saved session (`fork_session`), and go on in it."""
        self.wait_upkeep()
        src = self.session if self.is_new else self.store.load(self.session.id)
        fork = fork_session(self.store, src, upto, title)
        self.session = fork
        self.is_new = False
        return fork

    def reload(self) -> None:
        """The session as saved (after something else changed the file)."""
        if not self.is_new:
            self.session = self.store.load(self.session.id)

    def delete(self, sid: str) -> bool:
        """Delete a saved session; True when it was this one (then a new one starts)."""
        self.wait_upkeep()  # its upkeep must not write to a file that is gone
        self.store.delete(sid)
        if sid == self.session.id and not self.is_new:
            self.new("")
            return True
        return False

    def _blank(self, title: str) -> Session:
        return new_session(
            provider=self.settings.provider.name,
            model=self.provider.model,
            title=" ".join(title.split()),
        )

    def _reset(self) -> list[str]:
        """What belongs to one conversation only: the system override and the grants."""
        self.system_override = self.settings.system
        return self.policy.revoke_session()  # [a]lways approvals last for one conversation

    # ---- what the session says ----

    def rename(self, title: str) -> str:
        """A new title (spaces collapsed), saved at once or with the first turn."""
        title = " ".join(title.split())

        def apply(s: Session) -> None:
            s.title = title

        self._change(apply, save=lambda: self.store.rename(self.session.id, title))
        return title

    def set_system(self, text: str) -> None:
        """The conversation's own extra instructions (kept in its file); "" removes them, and
        the --system text too for the rest of this conversation."""

        def apply(s: Session) -> None:
            s.system = text

        self._change(apply, save=lambda: self.store.update(self.session.id, apply))
        if not text:
            self.system_override = None

    @property
    def system(self) -> str | None:
        """The extra instructions the next request carries."""
        return self.session.system or self.system_override

    def set_summary(self, text: str) -> None:
        """The session summary the system prompt carries; "" clears it."""

        def apply(s: Session) -> None:
            s.summary = text

        self._change(apply, save=lambda: self.store.set_summary(self.session.id, text))

    def _change(self, apply: Callable[[Session], None], *, save: Callable[[], object]) -> None:
        """Change the session: in memory while it is new (its first turn saves it), else in
        its file (`save`) and then reloaded."""
        if self.is_new:
            apply(self.session)
            return
        save()
        self.reload()

    def compact(self) -> list[str] | None:
        """Summarise the messages outside the history window now (/compact): the lines
        written, or None when there is nothing to compact with (no keeper, or not saved)."""
        keeper = self.pair.keeper
        if keeper is None or self.is_new:
            return None
        self.wait_upkeep()  # one summariser run at a time
        lines = keeper.compact(self.session.id)
        self.reload()
        return lines

    # ---- model and tools ----

    def switch_model(self, name: str) -> None:
        """Go on with another model of the same provider: a new engine and keeper, the same
        policy, session, system override and options."""
        self._model = name
        self._rebuild()

    def set_option(self, key: str, value: Any | None) -> None:
        """A per-call option for the rest of the chat (`/set`; checked by the caller); None
        removes it."""
        if value is None:
            self.tuning.options.pop(key, None)
        else:
            self.tuning.options[key] = value
        self._rebuild()

    def set_role(self, role: Role | None) -> None:
        """The chat's role (`/role`): its text leads the extra instructions, its model (when
        it names one) and options apply from the next request on."""
        self.tuning.role = role
        if role is not None and role.model:
            self._model = role.model
        self._rebuild()

    def _rebuild(self) -> None:
        old = self.pair
        self.pair = self._pairs(self._model, self.policy, self.tuning.merged())
        try:
            old.engine.provider.close()
        except Exception:  # closing an idle client must not stop the switch
            pass

    def set_tool_mode(self, mode: str) -> tuple[str, list[str]]:
        """ask | auto | off (any case): (the mode set, the session grants revoked: ask and off
        revoke them)."""
        name = next((known for known in APPROVAL_MODES if known == mode.lower()), None)
        if name is None:
            raise UsageError(
                f"unknown tool mode '{sanitize_line(mode)}'", hint="use ask, auto or off"
            )
        self.policy.mode = name
        return name, (self.policy.revoke_session() if name != "auto" else [])

    def close(self) -> None:
        """The end of the command: the provider's connections and the tools' servers."""
        try:
            self.provider.close()
        except Exception:
            pass
        self.fallback.close()
        tools = self.engine.tools
        if tools is not None:
            tools.close()
