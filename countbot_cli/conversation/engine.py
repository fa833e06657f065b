"""One turn: context -> stream -> tool rounds -> approval, returned as a `TurnRecord`.

The engine never prints (everything goes through the `TurnView` sink), never saves and never
charges: `run_turn` returns a record and `Conversation` (chat.py) does the rest. The one moment
the conversation needs from inside the turn, the question asked and nothing run for it yet, is
the `started` callback. The invariant: `run_turn` never raises for a provider error, a bug or
Ctrl-C; a failed or interrupted turn is a record with its status, error and partial text.
docs/design/turn.md says more.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Iterator, Sequence
from contextlib import contextmanager
from datetime import date
from typing import TYPE_CHECKING, Any

from countbot_cli.conversation.budget import TokenBudget
from countbot_cli.conversation.cache_report import KEEP_RECALL, probe
from countbot_cli.conversation.context import (
    TurnContext,
    build_context,
    history_window,
    prompt_facts,
)
from countbot_cli.conversation.turn_record import ModelCall, TurnRecord
from countbot_cli.conversation.view import TurnView
from countbot_cli.errors import (
    CountbotError,
    Interrupted,
    OutputClosed,
    Terminated,
    UnexpectedError,
)
from countbot_cli.messages import (
    ChatRequest,
    Finished,
    Message,
    ReasoningDelta,
    StreamEvent,
    TextDelta,
    ToolCallDelta,
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
    from countbot_cli.conversation.round_fit import RoundFit
    from countbot_cli.conversation.sessions.session import Session
    from countbot_cli.conversation.tool_round import RepeatedCalls
    from countbot_cli.provider import Provider
    from countbot_cli.tools.registry import ToolRegistry


class _Round:
    """What one model call streamed so far. The pieces are joined when read: `+=` on an
    attribute copies the whole text for every token (quadratic in a long answer or thinking)."""

    def __init__(self) -> None:
        self.pieces: list[str] = []
        self.thoughts: list[str] = []

    @property
    def text(self) -> str:
        return "".join(self.pieces)

    @text.setter
    def text(self, value: str) -> None:
        self.pieces = [value]

    @property
    def reasoning(self) -> str:
        return "".join(self.thoughts)

    @reasoning.setter
    def reasoning(self, value: str) -> None:
        self.thoughts = [value]


class Engine:
    def __init__(
        self,
        *,
        settings: Settings,
        provider: Provider,
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
        self,
        session: Session | None = None,
        *,
        system: str | None = None,
        start_tools: bool = False,
    ) -> PromptFacts:
        """The system prompt's facts; a session's own instructions (/system) win over `system`
        (--system, as the conversation holds it). `start_tools`: see `tool_schemas`."""
        return prompt_facts(
            self.settings,
            self.today(),
            tools_enabled=bool(self.tool_schemas(start=start_tools)),
            extra_system=(session.system if session and session.system else system),
        )

    def tool_schemas(self, *, start: bool = False) -> list[dict[str, Any]]:
        """The tools offered to the model, sorted by name (a stable prefix whatever order MCP
        servers answered in): none when the provider's model cannot take them (the embedded
        SmolLM2's template has no tools; offering them only costs context). Those known now:
        only a turn (`start=True`) starts MCP servers for theirs, never a count, the toolbar
        or /tools."""
        if self.tools is None:
            return []
        if self._provider_tools is None:
            self._provider_tools = self.provider.supports_tools
        if not self._provider_tools:
            return []
        return sorted(self.tools.schemas(start=start), key=_tool_name)

    def context_for(
        self,
        session: Session,
        user: Message,
        *,
        system: str | None = None,
        start_tools: bool = False,
    ) -> TurnContext:
        """The request for `user` in `session`: recalled and pinned memory, the tools (MCP
        servers started for them with `start_tools`: a turn's request, not a count), the
        history window the budget leaves."""
        memory = _nicety(self.recall, user.content) if self.recall is not None else []
        pinned = _nicety(self.pinned) if self.pinned is not None else []
        return build_context(
            facts=self.prompt_facts(session, system=system, start_tools=start_tools),
            summary=session.context_summary(),
            history=session.messages,
            user=user,
            max_history=self.settings.persona.max_history_messages,
            memory_entries=memory,
            pinned=pinned,
            instructions=self.instructions,
            skills=self.skills,
            tools=self.tool_schemas(start=start_tools),
            budget=self.budget,
            keep_recall=self.settings.provider.preset in KEEP_RECALL,
        )

    def _say_context_window_assumed(
        self, ctx: TurnContext, session: Session, view: TurnView
    ) -> None:
        """Once: the token budget left history out against a context window only assumed, or
        one a server that loads models runs (conversation/server_window.py)."""
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
        system: str | None = None,
        attached: Attached | None = None,
        started: Callable[[Message], None] | None = None,
    ) -> TurnRecord:
        """Run one turn asked in `session` (the history it is sent with) and return its record.
        `system`: extra instructions when the session has none of its own (--system);
        `attached`: what -a attached (images sent, records kept with the message);
        `started(question)`: called first, before the request is built and the model starts
        (a KeyboardInterrupt from it interrupts the turn).

        The set-up (recall, MCP servers started, the request built) is part of the turn: Ctrl-C
        or an error there ends it as one before the first token does, with the question in the
        record (saved by the conversation, marked interrupted or failed; /retry asks it)."""
        user = _user_message(user_text, attached)
        record = TurnRecord(user=user, model=self.provider.model)
        self._cache_key = session.id
        self._current = rnd = _Round()
        try:
            if started is not None:
                started(user)
            ctx = self._set_up(session, record, view, system)
            rnd = self._run_rounds(ctx, view, record)
        except (KeyboardInterrupt, OutputClosed) as exc:
            rnd = self._interrupted(exc, record)
        except Exception as exc:  # a provider error, or anything else: the record says
            rnd = self._failed(exc, record)
        record.answer, record.reasoning = rnd.text, rnd.reasoning
        if record.status == "ok":
            record.cache.observe(record.usage)
        return record

    def _set_up(
        self, session: Session, record: TurnRecord, view: TurnView, system: str | None
    ) -> TurnContext:
        """The turn's request, built into `record` (its context, and what changed since the
        session's previous request: cache_report)."""
        user = record.user
        ctx = self.context_for(session, user, system=system, start_tools=True)
        if self.budget is not None:  # a server that cuts silently gets no over-long message
            system_message = {"role": "system", "content": ctx.system}
            fixed = [system_message, ctx.api_user(), *self.tool_schemas()]
            self.budget.check_fits(fixed)
        self._say_context_window_assumed(ctx, session, view)
        if ctx.keep_recall:  # the lines sent with the question stay with it (context.py)
            user.kept = recall_block(ctx.memory_entries, ctx.language) or None
        p = self.provider
        record.context = ctx
        record.cache = probe(session, ctx, p.name, p.model, self.settings.provider.preset)
        return ctx

    def _interrupted(self, exc: BaseException, record: TurnRecord) -> _Round:
        """Settle a turn stopped by Ctrl-C (or SIGTERM, or its output closed)."""
        record.status = "interrupted"
        record.error = Interrupted.by(exc)
        if isinstance(exc, (Terminated, OutputClosed)):  # the program stops once it is saved
            record.stopped_by = exc
        return self._current

    def _failed(self, exc: Exception, record: TurnRecord) -> _Round:
        """Settle a failed turn: a CountbotError as it is, anything else as UnexpectedError."""
        err = exc if isinstance(exc, CountbotError) else UnexpectedError.wrap(exc)
        record.status = "failed"
        record.error = err
        rnd = self._current
        if err.partial_text and not rnd.text:
            rnd.text = err.partial_text
        return rnd

    def _run_rounds(self, ctx: TurnContext, view: TurnView, record: TurnRecord) -> _Round:
        """Ask the model, run the tools it calls, ask again: until it answers without calls,
        or `max_iterations` rounds, or it repeats a call (RepeatedCalls). Each request after
        the first is fitted to the token budget again (RoundFit)."""
        sent = ctx.api_messages()
        max_rounds = max(1, self.settings.max_iterations)  # tool rounds allowed in one turn
        tools = self.tool_schemas(start=True) or None
        repeats: RepeatedCalls | None = None
        fit: RoundFit | None = None  # each later request fitted to the budget again
        for n in range(max_rounds + 1):
            self._current = rnd = _Round()
            fin = self._stream_round(sent, tools, view, rnd)
            if self.budget is not None:
                self.budget.after_request()  # a server that loads models has loaded it now
            if self.budget is not None and fin.usage is not None:  # calibrate the token budget
                self.budget.observe(sent, tools, fin.usage.prompt_tokens)
            self._note_call(fin, record, view)
            if not fin.tool_calls or self.tools is None:
                return rnd
            # a tool round: loaded by the first (a turn without tools never needs it)
            from countbot_cli.conversation.round_fit import RoundFit
            from countbot_cli.conversation.tool_round import RepeatedCalls, ToolRunner  # likewise

            if repeats is None:
                repeats = RepeatedCalls()
            if fit is None:
                fit = RoundFit(self.budget, ctx.window, sent, tools or ())
            if n == max_rounds:
                view.notice(MAX_ITERATIONS_NOTICE.format(n=max_rounds))
                record.finish_reason = "max_iterations"
                return rnd
            if (looping := repeats.looping(fin.tool_calls)) is not None:
                view.notice(REPEATED_CALL_NOTICE.format(name=looping.name, n=repeats.limit))
                record.finish_reason = "repeated_tool_call"
                return rnd
            done = ToolRunner(self.tools, self.policy, self.settings.tools).run_calls(
                fin.tool_calls, view
            )
            call = Message(role="assistant", content=rnd.text, tool_calls=fin.tool_calls)
            fit.add_round(call.to_api(), done.messages)
            record.tools += done.records
            if done.interrupt is not None:  # every call answered; the turn ends interrupted
                raise done.interrupt
            sent = fit.next_request(view)
        return self._current

    def _note_call(self, fin: Finished, record: TurnRecord, view: TurnView) -> None:
        """One model call into the record: its usage, the model that answered, why it ended."""
        record.calls.append(ModelCall(fin.model, fin.usage))
        record.finish_reason = fin.finish_reason
        if fin.model:
            record.model = fin.model
        if fin.finish_reason == "length":
            view.notice("the answer was cut off at max_tokens")

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
                rnd.pieces.append(ev.text)
                view.text(ev.text)
            elif isinstance(ev, ReasoningDelta):
                rnd.thoughts.append(ev.text)
                view.reasoning(ev.text)
            elif isinstance(ev, ToolCallDelta):
                continue
            elif isinstance(ev, Finished):
                finished = ev
                if ev.reasoning and not rnd.reasoning:
                    rnd.reasoning = ev.reasoning
                    view.reasoning(ev.reasoning)
        return finished


def _nicety(fn: Callable[..., list[str]], *args: str) -> list[str]:
    """Recalled and pinned memory are niceties: a broken MEMORY.md never blocks a turn."""
    try:
        return fn(*args)
    except Exception:
        return []


def _tool_name(schema: dict[str, Any]) -> str:
    fn = schema.get("function")
    return str(fn.get("name", "")) if isinstance(fn, dict) else ""


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
