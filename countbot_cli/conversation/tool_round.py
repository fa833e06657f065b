"""The tool calls of one round: validate, approve, run (stoppable by Ctrl-C), answer each.

Every tool_call_id gets exactly one `tool` message, whatever happened to the call (denied,
failed, timed out, interrupted), so the next request is always valid; every call is recorded
for the session's `tool_conversations`. Ctrl-C while a tool runs stops that tool, answers the
remaining calls as not run, and re-raises KeyboardInterrupt for the engine to end the turn.
"""

from __future__ import annotations

import json
import threading
import time
from collections import Counter
from typing import TYPE_CHECKING, Any

from countbot_cli.jsonsafe import loads_bounded
from countbot_cli.messages import Message, ToolCall, utc_now
from countbot_cli.tools import ToolResult
from countbot_cli.tools.approval import ApprovalPolicy, Decision

if TYPE_CHECKING:
    from countbot_cli.config.settings import ToolSettings
    from countbot_cli.conversation.view import TurnView
    from countbot_cli.tools import PreparedCall, ToolRegistry
    from countbot_cli.tools.base import Progress

TOOL_RESULT_RECORD_CHARS = 4000
TOOL_STOP_WAIT = 10.0  # seconds a cancelled tool gets to stop before the turn gives up on it
REPEAT_LIMIT = 3  # the same call (name and arguments) this many times in one turn ends it


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

    def run_calls(
        self,
        calls: list[ToolCall],
        convo: list[dict[str, Any]],
        view: TurnView,
        records: list[dict[str, Any]],
    ) -> None:
        interrupted = False
        for call in calls:
            if interrupted:
                content = "Not run: the user interrupted the turn."
                convo.append(_tool_message(call, content))
                records.append(_record(call, None, content, "interrupted", 0, "not-run"))
                continue
            answered = len(convo)
            try:
                interrupted = self._run_one(call, convo, view, records)
            except KeyboardInterrupt:  # between the steps of a call (a preview, a view update)
                interrupted = True
                if len(convo) == answered:
                    content = "Interrupted by the user before it ran."
                    convo.append(_tool_message(call, content))
                    records.append(_record(call, None, content, "interrupted", 0, "not-run"))
        if interrupted:
            raise KeyboardInterrupt

    def _run_one(
        self,
        call: ToolCall,
        convo: list[dict[str, Any]],
        view: TurnView,
        records: list[dict[str, Any]],
    ) -> bool:
        """Answer one call (exactly one `tool` message); True when the user interrupted."""
        s = self.settings
        prepared = self.registry.prepare(
            call, allow_rules=s.allow, deny_rules=s.deny, exact_rules=s.saved_commands
        )
        if prepared.error:
            content = f"Error: {prepared.error}"
            by_rule = prepared.error.startswith("denied by rule")
            outcome, how = ("denied", "deny-rule") if by_rule else ("error", "not-run")
            convo.append(_tool_message(call, content))
            records.append(_record(call, prepared.args, content, outcome, 0, how))
            view.notice(f"{call.name or '?'}: {prepared.error}")
            view.tool_denied(call, how, prepared.error)
            return False
        edited: dict[str, Any] | None = None
        interrupted = False
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
            view.tool_denied(call, decision.how, why)
            return interrupted
        view.tool_start(prepared)
        # the view sees a command's output as it runs (a live tail: ui/livetail.py)
        tres, ms, stopped = self._execute(prepared, view.tool_output)
        content = tres.content
        if edited is not None:  # the model must know what really ran
            ran = json.dumps(edited, ensure_ascii=False)
            content = f"[The user edited the arguments; the call ran with: {ran}]\n{content}"
        convo.append(_tool_message(call, content))
        records.append(
            _record(
                call, prepared.args, content, _outcome(tres), ms, decision.how, error=tres.error
            )
        )
        try:
            view.tool_end(prepared, tres, decision)
        except KeyboardInterrupt:
            stopped = True
        return stopped

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
    ) -> tuple[ToolResult, int, bool]:
        """Run a tool in a worker thread so Ctrl-C in the main thread can stop it."""
        registry = self.registry
        cancel = threading.Event()
        box: list[ToolResult] = []
        errors: list[BaseException] = []

        done = threading.Event()

        def work() -> None:
            try:
                box.append(registry.run(prepared, cancel, progress))
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
        "arguments": args if args is not None else _arguments_as_sent(call.arguments),
        "result": result,
        "error": error
        if error is not None
        else (content if outcome in ("error", "denied") else None),
        "outcome": outcome,
        "duration_ms": ms,
        "approval": how,
        "timestamp": utc_now(),
    }


def _arguments_as_sent(raw: str) -> Any:
    """The model's arguments for the record: the object when they parse, else the raw text."""
    try:
        value = loads_bounded(raw)
    except (ValueError, TypeError):  # also over jsonsafe's limits: kept as the raw text
        return raw
    return value if isinstance(value, dict) else raw
