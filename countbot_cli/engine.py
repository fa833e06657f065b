"""One turn: context -> stream -> tool rounds -> approval -> save -> memory upkeep.

The engine never prints: everything the user sees goes through the narrow `TurnView` sink.
What is saved (SPEC §4): the user message and the final answer. A failed turn saves the user
message marked failed (and any partial text marked failed), never an error string as the answer;
an interrupted turn saves what arrived, marked interrupted. Tool calls are recorded in the
session's `tool_conversations`, not replayed in later turns.
"""

from __future__ import annotations

import json
import signal
import threading
import time
from collections.abc import Callable, Iterable, Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, field
from datetime import date
from typing import TYPE_CHECKING, Any, Protocol

from .approval import ApprovalPolicy, Decision
from .context import Budget, TurnContext, build_context
from .errors import CountbotError, Interrupted
from .models import (
    STATUS_FAILED,
    STATUS_INTERRUPTED,
    ChatRequest,
    Finished,
    Message,
    ReasoningDelta,
    StreamEvent,
    TextDelta,
    ToolCall,
    ToolCallDelta,
    Usage,
    utc_now,
)
from .prompts import MAX_ITERATIONS_NOTICE, PromptFacts
from .session import Session

if TYPE_CHECKING:
    from .config import Settings
    from .memory import MemoryKeeper
    from .provider import Provider
    from .store import SessionStore
    from .tools import PreparedCall, ToolRegistry, ToolResult

TOOL_RESULT_RECORD_CHARS = 4000
TOOL_STOP_WAIT = 10.0  # seconds a cancelled tool gets to stop before the turn gives up on it


class TurnView(Protocol):
    """Where a turn's output goes. The REPL, `ask` and tests each provide one."""

    def text(self, delta: str) -> None: ...
    def reasoning(self, delta: str) -> None: ...
    def notice(self, text: str) -> None: ...
    def tool_start(self, prepared: PreparedCall) -> None: ...
    def tool_end(self, prepared: PreparedCall, result: ToolResult, decision: Decision) -> None: ...


class NullView:
    def text(self, delta: str) -> None:
        pass

    def reasoning(self, delta: str) -> None:
        pass

    def notice(self, text: str) -> None:
        pass

    def tool_start(self, prepared: PreparedCall) -> None:
        pass

    def tool_end(self, prepared: PreparedCall, result: ToolResult, decision: Decision) -> None:
        pass


@dataclass
class TurnResult:
    session_id: str | None
    answer: str
    status: str  # "ok" | "interrupted" | "failed"
    model: str
    finish_reason: str | None = None
    usage: Usage = field(default_factory=Usage)
    tool_calls: list[dict[str, Any]] = field(default_factory=list)
    reasoning: str = ""
    error: CountbotError | None = None
    context: TurnContext | None = None


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
        budget: Budget | None = None,
        recall: Callable[[str], list[str]] | None = None,
        upkeep: Sequence[Callable[[str], None]] = (),
        today: Callable[[], date] = date.today,
        streaming: bool = True,
    ) -> None:
        self.settings = settings
        self.provider = provider
        self.store = store
        self.tools = tools
        self.policy = policy or ApprovalPolicy()
        self.budget = budget
        self.recall = recall
        self.upkeep = list(upkeep)
        self.today = today
        self.system_override = settings.system
        self._current = _Round()
        self.streaming = streaming
        self.memory_keeper: MemoryKeeper | None = (
            None  # set by app.build_engine for /compact, /tokens
        )

    # ---- building the request ----

    def prompt_facts(self) -> PromptFacts:
        p = self.settings.persona
        return PromptFacts(
            ai_name=p.ai_name,
            user_name=p.user_name,
            personality=p.personality,
            language=p.language,
            workspace=str(self.settings.tools.workspace),
            today=self.today(),
            tools_enabled=self.tools is not None,
            extra_system=self.system_override,
        )

    def tool_schemas(self) -> list[dict[str, Any]]:
        return self.tools.schemas() if self.tools is not None else []

    def context_for(self, session: Session, user: Message) -> TurnContext:
        memory: list[str] = []
        if self.recall is not None:
            try:
                memory = self.recall(user.content)
            except Exception:  # memory recall is a nicety; a broken MEMORY.md never blocks a turn
                memory = []
        return build_context(
            facts=self.prompt_facts(),
            summary=session.summary,
            history=session.messages,
            user=user,
            max_history=self.settings.persona.max_history_messages,
            memory_entries=memory,
            tools=self.tool_schemas(),
            budget=self.budget,
        )

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
    ) -> TurnResult:
        """Run one turn and save it. Never raises for provider errors or Ctrl-C: the result says."""
        user = Message(role="user", content=user_text)
        ctx = self.context_for(session, user)
        result = TurnResult(
            session_id=session.id if save else None,
            answer="",
            status="ok",
            model=self.provider.model,
            context=ctx,
        )
        convo = ctx.api_messages()
        records: list[dict[str, Any]] = []
        self._current = rnd = _Round()
        try:
            rnd = self._run_rounds(convo, view, result, records)
        except KeyboardInterrupt:
            result.status = "interrupted"
            result.error = Interrupted("interrupted by the user")
            rnd = self._current
        except CountbotError as err:
            result.status = "failed"
            result.error = err
            rnd = self._current
            partial = getattr(err, "partial_text", None)
            if partial and not rnd.text:
                rnd.text = partial
        result.answer = rnd.text
        result.reasoning = rnd.reasoning
        result.tool_calls = [
            {"name": r["tool"], "arguments": r["arguments"], "outcome": r["outcome"]}
            for r in records
        ]
        new_messages = self._messages_to_save(user, result)
        for r in records:
            r["message_id"] = new_messages[-1].id if new_messages[-1].role == "assistant" else None
        if save and self.store is not None:
            with _sigint_deferred():
                self._save(session, new_messages, records, result, is_new=is_new, replaces=replaces)
            self._run_upkeep(session.id, view)
        return result

    def _run_rounds(
        self,
        convo: list[dict[str, Any]],
        view: TurnView,
        result: TurnResult,
        records: list[dict[str, Any]],
    ) -> _Round:
        max_rounds = max(1, self.settings.max_iterations)
        tools = self.tool_schemas() or None
        for n in range(max_rounds):
            self._current = rnd = _Round()
            fin = self._stream_round(convo, tools, view, rnd)
            result.usage.add(fin.usage)
            result.finish_reason = fin.finish_reason
            if fin.model:
                result.model = fin.model
            if fin.finish_reason == "length":
                view.notice("the answer was cut off at max_tokens")
            if not fin.tool_calls or self.tools is None:
                return rnd
            if n == max_rounds - 1:
                view.notice(MAX_ITERATIONS_NOTICE.format(n=max_rounds))
                result.finish_reason = "max_iterations"
                return rnd
            convo.append(
                Message(role="assistant", content=rnd.text, tool_calls=fin.tool_calls).to_api()
            )
            self._run_tools(fin.tool_calls, convo, view, records)
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

    def _run_tools(
        self,
        calls: list[ToolCall],
        convo: list[dict[str, Any]],
        view: TurnView,
        records: list[dict[str, Any]],
    ) -> None:
        assert self.tools is not None
        s = self.settings.tools
        interrupted = False
        for call in calls:
            if interrupted:
                content = "Not run: the user interrupted the turn."
                convo.append(_tool_message(call, content))
                records.append(_record(call, None, content, "interrupted", 0, "not-run"))
                continue
            prepared = self.tools.prepare(call, allow_rules=s.allow, deny_rules=s.deny)
            if prepared.error:
                content = f"Error: {prepared.error}"
                convo.append(_tool_message(call, content))
                records.append(_record(call, prepared.args, content, "error", 0, "not-run"))
                view.notice(f"{call.name or '?'}: {prepared.error}")
                continue
            edited: dict[str, Any] | None = None
            try:
                decision, prepared, edited = self._decide(call, prepared)
            except KeyboardInterrupt:
                decision = Decision(False, "interrupted", reason="the user interrupted the turn")
                interrupted = True
            if not decision.approved:
                why = decision.reason or "no reason given"
                content = f"Denied: {why}"
                outcome = "interrupted" if interrupted else "denied"
                convo.append(_tool_message(call, content))
                records.append(_record(call, prepared.args, content, outcome, 0, decision.how))
                if not interrupted:
                    view.notice(f"{call.name}: not run ({why})")
                continue
            view.tool_start(prepared)
            tres, ms, stopped = self._execute(prepared)
            interrupted = interrupted or stopped
            outcome = _outcome(tres)
            content = tres.content
            if edited is not None:  # the model must know what really ran
                ran = json.dumps(edited, ensure_ascii=False)
                content = f"[The user edited the arguments; the call ran with: {ran}]\n{content}"
            convo.append(_tool_message(call, content))
            records.append(
                _record(call, prepared.args, content, outcome, ms, decision.how, error=tres.error)
            )
            view.tool_end(prepared, tres, decision)
        if interrupted:
            raise KeyboardInterrupt

    def _decide(
        self, call: ToolCall, prepared: PreparedCall
    ) -> tuple[Decision, PreparedCall, dict[str, Any] | None]:
        """(decision, the call to run, the user's edited arguments or None).

        An edited call is prepared again; when the edit reaches a path outside the workspace
        that the prompt did not show, it is asked about again (outside needs approval of that
        exact call). KeyboardInterrupt (Ctrl-C at a prompt) propagates.
        """
        edited: dict[str, Any] | None = None
        decision = self.policy.decide(prepared)
        while decision.approved and decision.args is not None:
            edited = decision.args
            again = self._reprepare(call, edited)
            new_outside = [p for p in again.outside_paths if p not in prepared.outside_paths]
            prepared = again
            if again.error or not new_outside or not again.needs_approval:
                break
            decision = self.policy.decide(again)
        return decision, prepared, edited

    def _reprepare(self, call: ToolCall, args: dict[str, Any]) -> PreparedCall:
        assert self.tools is not None
        edited = ToolCall(
            id=call.id, name=call.name, arguments=json.dumps(args, ensure_ascii=False)
        )
        s = self.settings.tools
        return self.tools.prepare(edited, allow_rules=s.allow, deny_rules=s.deny)

    def _execute(self, prepared: PreparedCall) -> tuple[ToolResult, int, bool]:
        """Run a tool in a worker thread so Ctrl-C in the main thread can stop it."""
        assert self.tools is not None
        registry = self.tools
        cancel = threading.Event()
        box: list[ToolResult] = []
        errors: list[BaseException] = []

        done = threading.Event()

        def work() -> None:
            try:
                box.append(registry.run(prepared, cancel))
            except BaseException as exc:  # a tool bug must not kill the turn
                errors.append(exc)
            finally:
                done.set()

        t0 = time.monotonic()
        worker = threading.Thread(target=work, name=f"tool-{prepared.call.name}", daemon=True)
        worker.start()
        stopped = False
        # Wait on an Event, not Thread.join: a KeyboardInterrupt inside join() marks a running
        # thread as finished on some CPython versions (bpo-45274), so the tool's result is lost.
        try:
            while not done.wait(0.05):
                pass
        except KeyboardInterrupt:
            stopped = True
            cancel.set()
            _wait_through_interrupts(done, TOOL_STOP_WAIT)
        ms = int((time.monotonic() - t0) * 1000)
        from .tools import ToolResult

        if box:
            res = box[0]
            if stopped and not res.interrupted:
                res.interrupted = True
                res.content += "\n[interrupted by the user]"
            return res, ms, stopped
        if stopped:
            return (
                ToolResult(
                    content="Interrupted by the user before it finished.",
                    ok=False,
                    error="interrupted",
                    interrupted=True,
                ),
                ms,
                True,
            )
        detail = f"{type(errors[0]).__name__}: {errors[0]}" if errors else "no result"
        return (
            ToolResult(content=f"Error: the tool failed ({detail})", ok=False, error=detail),
            ms,
            False,
        )

    # ---- saving ----

    def _messages_to_save(self, user: Message, result: TurnResult) -> list[Message]:
        if result.status == "ok":
            return [user, Message(role="assistant", content=result.answer)]
        if result.status == "interrupted":
            if result.answer:
                return [
                    user,
                    Message(role="assistant", content=result.answer, status=STATUS_INTERRUPTED),
                ]
            user.status = STATUS_INTERRUPTED
            return [user]
        user.status = STATUS_FAILED
        if result.answer:
            return [user, Message(role="assistant", content=result.answer, status=STATUS_FAILED)]
        return [user]

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
                s.messages = _without_failed(s.messages, replaces)
            s.messages.extend(new_messages)
            s.tool_conversations.extend(records)
            s.usage.add(result.usage)
            s.model = result.model or s.model
            s.updated_at = utc_now()
            if not s.title:
                from .session import title_from

                s.title = title_from(new_messages[0].content)

        if is_new:
            apply(session)
            self.store.create(session)
        else:
            self.store.update(session.id, apply)
            apply(session)

    def _run_upkeep(self, session_id: str, view: TurnView) -> None:
        for hook in self.upkeep:
            try:
                hook(session_id)
            except KeyboardInterrupt:
                view.notice("memory upkeep interrupted; it will run again after the next turn")
                return
            except Exception as exc:  # upkeep never breaks a turn
                view.notice(f"memory upkeep failed: {exc}")


def _without_failed(messages: list[Message], user_id: str) -> list[Message]:
    """Drop a failed/interrupted user message (and its failed partial answer) being retried."""
    out: list[Message] = []
    skipping = False
    for m in messages:
        if m.id == user_id and m.role == "user":
            skipping = True
            continue
        if skipping and m.role == "assistant" and m.status is not None:
            continue
        skipping = False
        out.append(m)
    return out


def _wait_through_interrupts(done: threading.Event, seconds: float) -> None:
    """Give a cancelled tool time to stop its processes; more Ctrl-C presses do not cut it short
    (a daemon thread killed at exit could leave a command running)."""
    deadline = time.monotonic() + seconds
    while not done.is_set() and time.monotonic() < deadline:
        try:
            done.wait(max(0.0, min(0.05, deadline - time.monotonic())))
        except KeyboardInterrupt:
            continue


def _tool_message(call: ToolCall, content: str) -> dict[str, Any]:
    return Message(role="tool", content=content, tool_call_id=call.id, name=call.name).to_api()


def _outcome(res: ToolResult) -> str:
    if res.interrupted:
        return "interrupted"
    if res.timed_out:
        return "timeout"
    return "ok" if res.ok else "error"


def _record(
    call: ToolCall,
    args: dict[str, Any] | None,
    content: str,
    outcome: str,
    ms: int,
    how: str,
    *,
    error: str | None = None,
) -> dict[str, Any]:
    result = (
        content
        if len(content) <= TOOL_RESULT_RECORD_CHARS
        else (
            content[:TOOL_RESULT_RECORD_CHARS]
            + f"\n[… {len(content) - TOOL_RESULT_RECORD_CHARS} more characters]"
        )
    )
    return {
        "tool_call_id": call.id,
        "tool": call.name,
        "arguments": args if args is not None else call.arguments,
        "result": result,
        "error": error
        if error is not None
        else (content if outcome in ("error", "denied") else None),
        "outcome": outcome,
        "duration_ms": ms,
        "approval": how,
        "timestamp": utc_now(),
    }


@contextmanager
def _closing(events: Iterable[StreamEvent]) -> Iterator[None]:
    """Close a provider's generator at once when the turn stops early (Ctrl-C, error)."""
    try:
        yield
    finally:
        close = getattr(events, "close", None)
        if callable(close):
            close()


@contextmanager
def _sigint_deferred() -> Iterator[None]:
    """Hold Ctrl-C while a turn is being written, then deliver it: a save is never half done."""
    if threading.current_thread() is not threading.main_thread():
        yield
        return
    pending: list[bool] = []
    try:
        previous = signal.signal(signal.SIGINT, lambda *_: pending.append(True))
    except ValueError:
        yield
        return
    try:
        yield
    finally:
        signal.signal(signal.SIGINT, previous)
        if pending:
            raise KeyboardInterrupt
