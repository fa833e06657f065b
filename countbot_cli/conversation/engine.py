"""One turn: context -> stream -> tool rounds -> approval -> save.

The engine never prints: everything the user sees goes through the narrow `TurnView` sink.
What is saved (SPEC §4): the user message and the final answer. The question is saved before
the model starts, marked interrupted until the answer replaces it, so that a SIGKILL or a native
crash at any moment leaves it in the session. A failed turn saves the user
message marked failed (and any partial text marked failed), never an error string as the answer;
so does any unexpected exception (a bug: it becomes an UnexpectedError, exit 1). An interrupted
turn (Ctrl-C, SIGTERM, or `ask`'s reader closing the pipe) saves what arrived, marked
interrupted. Tool calls are recorded in the
session's `tool_conversations`, not replayed in later turns. What happens around a turn (the
session's "new or saved" rule, the system override, memory upkeep after it) is the
`Conversation`'s (chat.py); the engine's attributes are set once, by its constructor.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, field, replace
from datetime import date
from typing import TYPE_CHECKING, Any

from countbot_cli.config.prices import charge, day_cost, day_saved
from countbot_cli.conversation.budget import TokenBudget
from countbot_cli.conversation.cache_report import KEEP_RECALL, CacheReport, probe
from countbot_cli.conversation.context import (
    TurnContext,
    build_context,
    history_window,
    without_failed,
)
from countbot_cli.conversation.sessions.session import Session, new_session, title_from
from countbot_cli.conversation.tool_round import RepeatedCalls, ToolRunner
from countbot_cli.conversation.view import TurnView
from countbot_cli.errors import (
    CountbotError,
    Interrupted,
    OutputClosed,
    StorageError,
    Terminated,
    UnexpectedError,
)
from countbot_cli.interrupts import sigint_deferred
from countbot_cli.messages import (
    STATUS_FAILED,
    STATUS_INTERRUPTED,
    ChatRequest,
    Finished,
    Message,
    ReasoningDelta,
    StreamEvent,
    TextDelta,
    ToolCallDelta,
    Usage,
    utc_now,
)
from countbot_cli.prompts import (
    MAX_ITERATIONS_NOTICE,
    REPEATED_CALL_NOTICE,
    PromptFacts,
    recall_block,
)
from countbot_cli.tools.approval import ApprovalPolicy

if TYPE_CHECKING:
    from countbot_cli.config.settings import Settings
    from countbot_cli.conversation.input.attachments import Attached
    from countbot_cli.conversation.sessions.store import SessionStore
    from countbot_cli.provider import Provider
    from countbot_cli.tools import ToolRegistry


@dataclass
class TurnResult:
    session_id: str | None
    answer: str
    status: str  # "ok" | "interrupted" | "failed"
    model: str
    finish_reason: str | None = None
    usage: Usage = field(default_factory=Usage)
    usage_reported: bool = False  # some call of the turn reported usage (else --json: null)
    tool_calls: list[dict[str, Any]] = field(default_factory=list)
    reasoning: str = ""
    error: CountbotError | None = None
    context: TurnContext | None = None
    notices: list[str] = field(default_factory=list)  # for after the answer (e.g. a fork)
    cost_today: float | None = None  # all priced calls of the day, all sessions (prices set)
    memory: dict[str, Any] = field(default_factory=dict)  # ask's memory_used/_written (--json)
    saved_today: float | None = None  # what the cache saved on them (prices set)
    fallback: dict[str, str] | None = None  # answered by a fallback link: from, to, reason
    cache: CacheReport = field(default_factory=CacheReport)  # why the prompt cache missed


@dataclass
class _Round:
    text: str = ""
    reasoning: str = ""


class Engine:
    def __init__(
        self,
        *,
        settings: Settings,
        provider: Provider,
        store: SessionStore | None,
        tools: ToolRegistry | None = None,
        policy: ApprovalPolicy | None = None,
        budget: TokenBudget | None = None,
        recall: Callable[[str], list[str]] | None = None,
        pinned: Callable[[], list[str]] | None = None,
        instructions: tuple[str, str] | None = None,
        skills: Sequence[tuple[str, str, str]] = (),
        today: Callable[[], date] = date.today,
        streaming: bool = True,
    ) -> None:
        """`recall`: memory lines for the current message (the volatile tail); `pinned`: the
        pinned memory lines and `instructions` (file name, text): the stable head."""
        self.settings = settings
        self.provider = provider
        self.store = store
        self.tools = tools
        self.policy = policy or ApprovalPolicy()
        self.budget = budget
        self.recall = recall
        self.pinned = pinned
        self.instructions = instructions
        self.skills = skills  # (name, description, file) in the stable head (config/skills.py)
        self.today = today
        self._current = _Round()
        self._cache_key: str | None = None  # the session of the turn running (prompt_cache_key)
        self.streaming = streaming
        self._provider_tools: bool | None = None  # can the provider's model take tools?
        # said once, when history is first trimmed to fit a context window only assumed
        self.context_window_notice: str | None = None

    # ---- building the request ----

    def prompt_facts(
        self, session: Session | None = None, *, system: str | None = None
    ) -> PromptFacts:
        """The system prompt's facts; a session's own instructions (/system) win over `system`
        (--system, as the conversation holds it)."""
        p = self.settings.persona
        return PromptFacts(
            ai_name=p.ai_name,
            user_name=p.user_name,
            personality=p.personality,
            language=p.language,
            workspace=str(self.settings.tools.workspace),
            today=self.today(),
            tools_enabled=bool(self.tool_schemas()),
            extra_system=(session.system if session and session.system else system),
        )

    def tool_schemas(self) -> list[dict[str, Any]]:
        """The tools offered to the model, sorted by name (a stable prefix whatever order MCP
        servers answered in): none when the provider's model cannot take them (the embedded
        SmolLM2's template has no tools; offering them only costs context)."""
        if self.tools is None:
            return []
        if self._provider_tools is None:
            self._provider_tools = self.provider.supports_tools
        if not self._provider_tools:
            return []
        return sorted(self.tools.schemas(), key=_tool_name)

    def context_for(
        self, session: Session, user: Message, *, system: str | None = None
    ) -> TurnContext:
        memory = _nicety(self.recall, user.content) if self.recall is not None else []
        pinned = _nicety(self.pinned) if self.pinned is not None else []
        return build_context(
            facts=self.prompt_facts(session, system=system),
            summary=session.context_summary(),
            history=session.messages,
            user=user,
            max_history=self.settings.persona.max_history_messages,
            memory_entries=memory,
            pinned=pinned,
            instructions=self.instructions,
            skills=self.skills,
            tools=self.tool_schemas(),
            budget=self.budget,
            keep_recall=self.settings.provider.preset in KEEP_RECALL,
        )

    def _say_assumed_window(self, ctx: TurnContext, session: Session, view: TurnView) -> None:
        """Once: the token budget left history out against a context window only assumed."""
        if self.context_window_notice is None or not ctx.omitted:
            return
        if self.budget is not None and self.budget.reported:  # the server told, late
            return
        capped = history_window(session.messages, self.settings.persona.max_history_messages)
        if len(ctx.window) < len(capped):
            view.notice(self.context_window_notice)
            self.context_window_notice = None

    # ---- one turn ----

    def run_turn(
        self,
        session: Session,
        user_text: str,
        view: TurnView,
        *,
        save: bool = True,
        is_new: bool = False,
        replaces: str | None = None,
        system: str | None = None,
        attached: Attached | None = None,
    ) -> TurnResult:
        """Run one turn and save it. Never raises for provider errors or Ctrl-C: the result says.
        `system`: extra instructions when the session has none of its own (--system).
        `attached`: what -a attached (images sent, records saved with the message)."""
        user = _user_message(user_text, attached)
        history = session
        if replaces:  # the failed attempt being retried is not sent again
            history = replace(session, messages=without_failed(session.messages, replaces))
        ctx = self.context_for(history, user, system=system)
        self._say_assumed_window(ctx, history, view)
        result = TurnResult(
            session_id=session.id if save else None,
            answer="",
            status="ok",
            model=self.provider.model,
            context=ctx,
        )
        self._cache_key = session.id
        p = self.provider  # what changed since the session's previous request (cache_report)
        result.cache = probe(session, ctx, p.name, p.model, self.settings.provider.preset)
        convo = ctx.api_messages()
        if ctx.keep_recall:  # the lines sent with the question stay with it (context.py)
            user.kept = recall_block(ctx.memory_entries, ctx.language) or None
        records: list[dict[str, Any]] = []
        self._current = rnd = _Round()
        stop: BaseException | None = None  # re-raised once the turn is saved
        try:
            if save and self.store is not None:  # the question first: a crash keeps it
                pending = replace(user, status=STATUS_INTERRUPTED)  # until the answer replaces it
                with sigint_deferred():  # a signal held here is raised with is_new settled
                    self._save(session, [pending], [], result, is_new=is_new, replaces=replaces)
                    is_new = False
            rnd = self._run_rounds(convo, view, result, records)
        except (KeyboardInterrupt, OutputClosed) as exc:
            stop = exc if isinstance(exc, (Terminated, OutputClosed)) else None
            rnd = self._interrupted(exc, result)
        except Exception as exc:  # a provider error, or anything else: the turn is still saved
            rnd = self._failed(exc, result)
        self._settle(result, rnd, records)
        new_messages = self._messages_to_save(user, result, records)
        if save and self.store is not None:
            with sigint_deferred():
                self._save(session, new_messages, records, result, is_new=is_new, replaces=replaces)
            for note in result.notices:
                view.notice(note)
        if stop is not None:  # saved; now stop the program (SIGTERM, terminal or pipe closed)
            raise stop
        return result

    def _interrupted(self, exc: BaseException, result: TurnResult) -> _Round:
        """Settle a turn stopped by Ctrl-C (or SIGTERM, or its output closed)."""
        result.status = "interrupted"
        why = "the output was closed" if isinstance(exc, OutputClosed) else "the user"
        result.error = Interrupted(f"interrupted by {why}")
        return self._current

    def _settle(self, result: TurnResult, rnd: _Round, records: list[dict[str, Any]]) -> None:
        """Fill in the result from the last round: answer, cache, the day's tallies, tool calls."""
        result.answer = rnd.text
        result.reasoning = rnd.reasoning
        if result.status == "ok":
            result.cache.observe(result.usage)
        if result.usage.cost is not None:
            result.cost_today = day_cost(self.settings.data_dir, self.today())
        if result.usage.saved is not None:
            result.saved_today = day_saved(self.settings.data_dir, self.today())
        result.tool_calls = [
            {"name": r["tool"], "arguments": r["arguments"], "outcome": r["outcome"]}
            for r in records
        ]

    def _failed(self, exc: Exception, result: TurnResult) -> _Round:
        """Settle a failed turn: a CountbotError as it is, anything else as UnexpectedError."""
        err = exc if isinstance(exc, CountbotError) else UnexpectedError.wrap(exc)
        result.status = "failed"
        result.error = err
        rnd = self._current
        if err.partial_text and not rnd.text:
            rnd.text = err.partial_text
        return rnd

    def _run_rounds(
        self,
        convo: list[dict[str, Any]],
        view: TurnView,
        result: TurnResult,
        records: list[dict[str, Any]],
    ) -> _Round:
        max_rounds = max(1, self.settings.max_iterations)  # tool rounds allowed in one turn
        tools = self.tool_schemas() or None
        repeats = RepeatedCalls()
        for n in range(max_rounds + 1):
            self._current = rnd = _Round()
            fin = self._stream_round(convo, tools, view, rnd)
            if self.budget is not None and fin.usage is not None:  # calibrate the token budget
                self.budget.observe(convo, tools, fin.usage.prompt_tokens)
            if fin.usage is not None and self.settings.prices:  # the user set prices
                models = (self.provider.model, fin.model)
                damaged = charge(
                    self.settings.prices, fin.usage, models, self.settings.data_dir, self.today()
                )
                result.notices += damaged  # a tally moved aside: said after the answer
            result.usage.add(fin.usage)
            result.usage_reported |= fin.usage is not None
            result.finish_reason = fin.finish_reason
            if fin.model:
                result.model = fin.model
            if fin.finish_reason == "length":
                view.notice("the answer was cut off at max_tokens")
            if not fin.tool_calls or self.tools is None:
                return rnd
            if n == max_rounds:
                view.notice(MAX_ITERATIONS_NOTICE.format(n=max_rounds))
                result.finish_reason = "max_iterations"
                return rnd
            if (looping := repeats.looping(fin.tool_calls)) is not None:
                view.notice(REPEATED_CALL_NOTICE.format(name=looping.name, n=repeats.limit))
                result.finish_reason = "repeated_tool_call"
                return rnd
            convo.append(
                Message(role="assistant", content=rnd.text, tool_calls=fin.tool_calls).to_api()
            )
            ToolRunner(self.tools, self.policy, self.settings.tools).run_calls(
                fin.tool_calls, convo, view, records
            )
        return self._current

    def _stream_round(
        self,
        convo: list[dict[str, Any]],
        tools: list[dict[str, Any]] | None,
        view: TurnView,
        rnd: _Round,
    ) -> Finished:
        s = self.settings
        req = ChatRequest(
            model=self.provider.model,
            messages=convo,
            tools=tools,
            temperature=s.temperature,
            max_tokens=s.max_tokens,
            stream=self.streaming,
            cache_key=self._cache_key,
        )
        events: Iterable[StreamEvent] = (
            self.provider.stream(req) if self.streaming else [self.provider.complete(req)]
        )
        with _closing(events):
            finished = self._consume(events, view, rnd)
        if finished is None:  # providers always end with Finished; be defensive
            finished = Finished(content=rnd.text, tool_calls=[], finish_reason=None)
        if finished.content and not rnd.text:
            rnd.text = finished.content
            view.text(finished.content)
        return finished

    def _consume(
        self, events: Iterable[StreamEvent], view: TurnView, rnd: _Round
    ) -> Finished | None:
        finished: Finished | None = None
        for ev in events:
            if isinstance(ev, TextDelta):
                rnd.text += ev.text
                view.text(ev.text)
            elif isinstance(ev, ReasoningDelta):
                rnd.reasoning += ev.text
                view.reasoning(ev.text)
            elif isinstance(ev, ToolCallDelta):
                continue
            elif isinstance(ev, Finished):
                finished = ev
                if ev.reasoning and not rnd.reasoning:
                    rnd.reasoning = ev.reasoning
                    view.reasoning(ev.reasoning)
        return finished

    # ---- tools ----

    # ---- saving ----

    def _messages_to_save(
        self, user: Message, result: TurnResult, records: list[dict[str, Any]]
    ) -> list[Message]:
        """The question, and the answer (what arrived of it) unless there was none to an
        interrupted or failed turn; the answer names its model (a fallback link's) and each
        tool record the answer it led to."""
        if result.status == "failed":
            user.status = STATUS_FAILED
        elif result.status == "interrupted" and not result.answer:
            user.status = STATUS_INTERRUPTED
        new = [user]
        if result.status == "ok" or result.answer:
            status = {"ok": None, "interrupted": STATUS_INTERRUPTED}.get(
                result.status, STATUS_FAILED
            )
            new.append(Message(role="assistant", content=result.answer, status=status))
            new[-1].model = result.model
        for r in records:
            r["message_id"] = new[-1].id if len(new) > 1 else None
        return new

    def _save(
        self,
        session: Session,
        new_messages: list[Message],
        records: list[dict[str, Any]],
        result: TurnResult,
        *,
        is_new: bool,
        replaces: str | None,
    ) -> None:
        assert self.store is not None

        def apply(s: Session) -> None:
            if replaces:
                s.messages = without_failed(s.messages, replaces)
            _put(s.messages, new_messages)
            s.tool_conversations.extend(records)
            s.usage.add(result.usage)
            s.model = result.model or s.model
            if "prompt_tokens" in result.cache.stored:  # answered: the next turn compares
                s.last_request = result.cache.stored
            s.updated_at = utc_now()
            if not s.title:
                s.title = title_from(new_messages[0].content)

        if is_new:
            apply(session)
            self.store.create(session)
            return
        try:
            self.store.update(session.id, apply)
        except StorageError as exc:
            # the file was deleted, damaged or stays locked elsewhere: never lose the turn;
            # what this process knows of the conversation goes on in a new session file
            old = session.id
            session.id = new_session(provider=session.provider, model=session.model).id
            apply(session)
            self.store.create(session)
            result.session_id = session.id
            result.notices.append(
                f"could not save to session {old} ({exc.message}); "
                f"this conversation continues as session {session.id}"
            )
            return
        apply(session)


def _nicety(fn: Callable[..., list[str]], *args: str) -> list[str]:
    """Recalled and pinned memory are niceties: a broken MEMORY.md never blocks a turn."""
    try:
        return fn(*args)
    except Exception:
        return []


def _tool_name(schema: dict[str, Any]) -> str:
    fn = schema.get("function")
    return str(fn.get("name", "")) if isinstance(fn, dict) else ""


def _put(messages: list[Message], new: list[Message]) -> None:
    """Append a turn's messages, in place of its question saved before the model started."""
    for i in range(len(messages) - 1, -1, -1):
        if messages[i].id == new[0].id:
            messages[i : i + 1] = new
            return
    messages.extend(new)


def _user_message(text: str, attached: Attached | None) -> Message:
    """The question, with what -a attached (images sent, records saved with the message)."""
    user = Message(role="user", content=text)
    if attached:
        user.images, user.attachments = attached.images or None, attached.records
    return user


@contextmanager
def _closing(events: Iterable[StreamEvent]) -> Iterator[None]:
    """Close a provider's generator at once when the turn stops early (Ctrl-C, error)."""
    try:
        yield
    finally:
        close = getattr(events, "close", None)
        if callable(close):
            close()
