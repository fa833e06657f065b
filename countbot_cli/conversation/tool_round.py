"""The tool calls of one round: validate, approve, run (stoppable by Ctrl-C), answer each.

`ToolRunner.run_calls` returns a `RoundResult`: exactly one `tool` message for every
tool_call_id, whatever happened to the call (denied, failed, timed out, interrupted), so the
next request is always valid, and one `ToolRecord` a call (what the session's
`tool_conversations` keeps). It changes nothing it is handed. Ctrl-C (or SIGTERM, SIGHUP, or
ask's output closing) while a tool runs stops that tool and answers the remaining calls as not
run, each saying what stopped it (`errors.stop_cause`: the model is not told "the user" when it
was a signal); the round's `interrupt` holds that exception for the engine to end the turn with.
"""

from __future__ import annotations

import json
import threading
import time
from collections import Counter
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from countbot_cli.conversation.turn_record import ToolOutcome, ToolRecord
from countbot_cli.errors import OutputClosed, Terminated, stop_cause
from countbot_cli.jsonsafe import loads_bounded
from countbot_cli.messages import Message, ToolCall, utc_now
from countbot_cli.tools.approval import ApprovalPolicy, Decision
from countbot_cli.tools.base import ToolResult

if TYPE_CHECKING:
    from countbot_cli.config.settings import ToolSettings
    from countbot_cli.conversation.view import TurnView
    from countbot_cli.tools.base import Progress
    from countbot_cli.tools.registry import PreparedCall, ToolRegistry

TOOL_RESULT_RECORD_CHARS = 4000
TOOL_STOP_WAIT = 10.0  # seconds a cancelled tool gets to stop before the turn gives up on it
REPEAT_LIMIT = 3  # the same call (name and arguments) this many times in one turn ends it
NOT_RUN = "Not run: {cause}."
INTERRUPTED_BEFORE = "Interrupted before it ran: {cause}."
INTERRUPTED_DURING = "Interrupted before it finished: {cause}."
INTERRUPTED_NOTE = "\n[interrupted: {cause}]"

# what stops a round: Ctrl-C (KeyboardInterrupt, `Terminated` for SIGTERM/SIGHUP), or the
# reader of ask's output gone (OutputClosed, raised by the view)
Stop = KeyboardInterrupt | OutputClosed


@dataclass
class RoundResult:
    """What one round of tool calls gives back: a `tool` message for each call (in order), its
    record, and what stopped the round (Ctrl-C, `Terminated`, `OutputClosed`) if anything did."""

    messages: list[dict[str, Any]] = field(default_factory=list)
    records: list[ToolRecord] = field(default_factory=list)
    interrupt: Stop | None = None

    def answer(
        self,
        call: ToolCall,
        content: str,
        outcome: ToolOutcome,
        how: str,
        *,
        args: dict[str, Any] | None = None,
        ms: int = 0,
        error: str | None = None,
    ) -> None:
        """The call's one `tool` message and its record; a denied or failed call's content is
        its error unless the tool said another."""
        if error is None and outcome in ("error", "denied"):
            error = content
        self.messages.append(
            Message(role="tool", content=content, tool_call_id=call.id, name=call.name).to_api()
        )
        self.records.append(
            ToolRecord(
                tool_call_id=call.id,
                tool=call.name,
                arguments=args if args is not None else _arguments_as_sent(call.arguments),
                result=_capped(content),
                error=error,
                outcome=outcome,
                duration_ms=ms,
                approval=how,
                timestamp=utc_now(),
            )
        )


class RepeatedCalls:
    """The calls of one turn counted by name and arguments (as parsed JSON, so spacing and key
    order do not matter): a model asking for the same call a third time is looping (a small
    model re-reads one invented path every round until max_iterations)."""

    def __init__(self, limit: int = REPEAT_LIMIT) -> None:
        self.limit = limit
        self._seen: Counter[tuple[str, str]] = Counter()

    def looping(self, calls: list[ToolCall]) -> ToolCall | None:
        """Count this round's calls; the first one now made `limit` times, else None."""
        found: ToolCall | None = None
        for call in calls:
            key = (call.name, _canonical(call.arguments))
            self._seen[key] += 1
            if found is None and self._seen[key] >= self.limit:
                found = call
        return found


def _canonical(raw: str) -> str:
    try:
        return json.dumps(loads_bounded(raw), sort_keys=True, ensure_ascii=False)
    except (ValueError, TypeError):
        return raw.strip()


class ToolRunner:
    def __init__(
        self, registry: ToolRegistry, policy: ApprovalPolicy, settings: ToolSettings
    ) -> None:
        self.registry = registry
        self.policy = policy
        self.settings = settings

    def run_calls(self, calls: list[ToolCall], view: TurnView) -> RoundResult:
        """Answer every call of the round in order; after an interrupt, the rest are not run."""
        done = RoundResult()
        for call in calls:
            if done.interrupt is not None:
                cause = stop_cause(done.interrupt)
                done.answer(call, NOT_RUN.format(cause=cause), "interrupted", "not-run")
                continue
            answered = len(done.messages)
            try:
                done.interrupt = self._run_one(call, view, done)
            except (KeyboardInterrupt, OutputClosed) as exc:  # between a call's steps (a view)
                done.interrupt = exc
                if len(done.messages) == answered:
                    before = INTERRUPTED_BEFORE.format(cause=stop_cause(exc))
                    done.answer(call, before, "interrupted", "not-run")
        return done

    def _run_one(self, call: ToolCall, view: TurnView, done: RoundResult) -> Stop | None:
        """Answer one call (exactly one `tool` message); the interrupt when the user stopped it."""
        s = self.settings
        prepared = self.registry.prepare(
            call, allow_rules=s.allow, deny_rules=s.deny, exact_rules=s.saved_commands
        )
        if prepared.error:
            by_rule = prepared.error.startswith("denied by rule")
            outcome: ToolOutcome = "denied" if by_rule else "error"
            how = "deny-rule" if by_rule else "not-run"
            done.answer(call, f"Error: {prepared.error}", outcome, how, args=prepared.args)
            view.notice(f"{call.name or '?'}: {prepared.error}")
            view.tool_denied(call, how, prepared.error)
            return None
        edited: dict[str, Any] | None = None
        interrupt: Stop | None = None
        try:
            decision, prepared, edited = self._decide(call, prepared)
        except KeyboardInterrupt as exc:
            decision = Decision(False, "interrupted", reason=stop_cause(exc))
            interrupt = exc
        if not decision.approved:
            why = decision.reason or "no reason given"
            outcome = "interrupted" if interrupt is not None else "denied"
            done.answer(call, f"Denied: {why}", outcome, decision.how, args=prepared.args)
            if interrupt is None:
                view.notice(f"{call.name}: not run ({why})")
            view.tool_denied(call, decision.how, why)
            return interrupt
        view.tool_start(prepared)
        # the view sees a command's output as it runs (a live tail: ui/livetail.py)
        tres, ms, interrupt = self._execute(prepared, view.tool_output)
        content = tres.content
        if edited is not None:  # the model must know what really ran
            ran = json.dumps(edited, ensure_ascii=False)
            content = f"[The user edited the arguments; the call ran with: {ran}]\n{content}"
        done.answer(
            call, content, _outcome(tres), decision.how, args=prepared.args, ms=ms, error=tres.error
        )
        try:
            view.tool_end(prepared, tres, decision)
        except (KeyboardInterrupt, OutputClosed) as exc:
            interrupt = interrupt or exc
        return interrupt

    def _decide(
        self, call: ToolCall, prepared: PreparedCall
    ) -> tuple[Decision, PreparedCall, dict[str, Any] | None]:
        """(decision, the call to run, the user's edited arguments or None).

        An edited call is prepared again; when the edit reaches a path outside the workspace
        that the prompt did not show, it is asked about again (outside needs approval of that
        exact call). KeyboardInterrupt (Ctrl-C at a prompt) propagates.
        """
        edited: dict[str, Any] | None = None
        decision = self.policy.decide(prepared, self.reprepare)
        while decision.approved and decision.args is not None:
            edited = decision.args
            again = self.reprepare(prepared, edited)
            new_outside = [p for p in again.outside_paths if p not in prepared.outside_paths]
            prepared = again
            if again.error or not new_outside or not again.needs_approval:
                break
            decision = self.policy.decide(again, self.reprepare)
        return decision, prepared, edited

    def reprepare(self, prepared: PreparedCall, args: dict[str, Any]) -> PreparedCall:
        """`prepared` with the arguments the user edited, checked as every call of a round is
        (the one place an edited call is prepared; the approval prompt gets it through the
        policy, to show the edited call before it runs)."""
        call = prepared.call
        edited = ToolCall(
            id=call.id, name=call.name, arguments=json.dumps(args, ensure_ascii=False)
        )
        s = self.settings
        return self.registry.prepare(
            edited, allow_rules=s.allow, deny_rules=s.deny, exact_rules=s.saved_commands
        )

    def _execute(
        self, prepared: PreparedCall, progress: Progress | None = None
    ) -> tuple[ToolResult, int, KeyboardInterrupt | None]:
        """Run a tool in a worker thread so Ctrl-C in the main thread can stop it: (its result,
        milliseconds taken, the interrupt that stopped it)."""
        registry = self.registry
        cancel, done = threading.Event(), threading.Event()
        got: list[ToolResult | BaseException] = []

        def work() -> None:
            try:
                got.append(registry.run(prepared, cancel, progress))
            except BaseException as exc:  # a tool bug must not kill the turn
                got.append(exc)
            finally:
                done.set()

        t0 = time.monotonic()
        worker = threading.Thread(target=work, name=f"tool-{prepared.call.name}", daemon=True)
        worker.start()
        interrupt: KeyboardInterrupt | None = None
        # Wait on an Event, not Thread.join: a KeyboardInterrupt inside join() marks a running
        # thread as finished on some CPython versions (bpo-45274), so the tool's result is lost.
        try:
            while not done.wait(0.05):
                pass
        except KeyboardInterrupt as exc:
            interrupt = exc
            cancel.set()
            interrupt = _wait_through_interrupts(done, TOOL_STOP_WAIT) or interrupt
        ms = int((time.monotonic() - t0) * 1000)
        return _settled(got[0] if got else None, interrupt), ms, interrupt


def _settled(got: ToolResult | BaseException | None, stop: Stop | None) -> ToolResult:
    """The tool's result, marked interrupted, with what stopped it, when something did; or
    what stands for it when it did not finish (stopped first) or failed (a bug in the tool)."""
    if isinstance(got, ToolResult):
        if stop is not None:
            got.interrupted = True
            got.content += INTERRUPTED_NOTE.format(cause=stop_cause(stop))
        return got
    if stop is not None:
        return ToolResult(
            content=INTERRUPTED_DURING.format(cause=stop_cause(stop)),
            ok=False,
            error="interrupted",
            interrupted=True,
        )
    detail = f"{type(got).__name__}: {got}" if got is not None else "no result"
    return ToolResult(content=f"Error: the tool failed ({detail})", ok=False, error=detail)


def _wait_through_interrupts(done: threading.Event, seconds: float) -> Terminated | None:
    """Give a cancelled tool time to stop its processes; more Ctrl-C presses do not cut it short
    (a daemon thread killed at exit could leave a command running). A SIGTERM or SIGHUP that
    comes meanwhile does not either, but is kept (returned): it ends countbot once the tool
    stopped, where the Ctrl-C before it would have left the chat running."""
    deadline = time.monotonic() + seconds
    term: Terminated | None = None
    while not done.is_set() and time.monotonic() < deadline:
        try:
            done.wait(max(0.0, min(0.05, deadline - time.monotonic())))
        except Terminated as exc:
            term = exc
        except KeyboardInterrupt:
            continue
    return term


def _outcome(res: ToolResult) -> ToolOutcome:
    if res.interrupted:
        return "interrupted"
    if res.timed_out:
        return "timeout"
    return "ok" if res.ok else "error"


def _capped(content: str) -> str:
    """A result as the record keeps it: the first TOOL_RESULT_RECORD_CHARS characters."""
    if len(content) <= TOOL_RESULT_RECORD_CHARS:
        return content
    more = len(content) - TOOL_RESULT_RECORD_CHARS
    return content[:TOOL_RESULT_RECORD_CHARS] + f"\n[… {more} more characters]"


def _arguments_as_sent(raw: str) -> Any:
    """The model's arguments for the record: the object when they parse, else the raw text."""
    try:
        value = loads_bounded(raw)
    except (ValueError, TypeError):  # also over jsonsafe's limits: kept as the raw text
        return raw
    return value if isinstance(value, dict) else raw
