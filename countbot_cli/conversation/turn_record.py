"""What a turn gives back: the engine's `TurnRecord`, and the `TurnResult` a conversation makes.

The engine runs a turn and returns a record of it; it saves nothing and charges nothing. The
record holds the question (`user`), the answer or what arrived of it, each model call's usage,
a `ToolRecord` for each tool call (conversation/tool_round.py makes them), and how the turn
ended (`status`, the `error`, and `stopped_by`: a SIGTERM or a closed output the conversation
raises again once the turn is saved). `messages` says what of it a session keeps.
`Conversation` (chat.py) saves it, charges it, runs the upkeep after it, and returns a
`TurnResult`: the record with where it was saved and what that added (notices, the day's
cost, the fallback that answered, ask's memory report).
"""

from __future__ import annotations

from dataclasses import dataclass, field, fields, replace
from typing import TYPE_CHECKING, Any, Literal, NamedTuple

from countbot_cli.conversation.cache_report import CacheReport
from countbot_cli.messages import STATUS_FAILED, STATUS_INTERRUPTED, Message, Usage

if TYPE_CHECKING:
    from countbot_cli.conversation.context import TurnContext
    from countbot_cli.errors import CountbotError

TurnStatus = Literal["ok", "interrupted", "failed"]
ToolOutcome = Literal["ok", "error", "denied", "interrupted", "timeout"]


class ToolRecord(NamedTuple):
    """One tool call as the session keeps it (`stored` is its form in `tool_conversations`).

    `arguments`: the arguments that ran (the user's edit included) when they parsed, else the
    model's as sent; `result`: what the model was told, capped; `approval`: how it was decided
    (`Decision.how`, or "not-run", "deny-rule")."""

    tool_call_id: str
    tool: str
    arguments: Any
    result: str
    error: str | None
    outcome: ToolOutcome
    duration_ms: int
    approval: str
    timestamp: str

    def stored(self, message_id: str | None) -> dict[str, Any]:
        """The record in the session file, tied to the answer it led to (None: no answer)."""
        return {
            "tool_call_id": self.tool_call_id,
            "tool": self.tool,
            "arguments": self.arguments,
            "result": self.result,
            "error": self.error,
            "outcome": self.outcome,
            "duration_ms": self.duration_ms,
            "approval": self.approval,
            "timestamp": self.timestamp,
            "message_id": message_id,
        }

    def reported(self) -> dict[str, Any]:
        """The call as `ask --json` reports it: name, arguments, outcome."""
        return {"name": self.tool, "arguments": self.arguments, "outcome": self.outcome}


class ModelCall(NamedTuple):
    """One request of the turn: the model that answered (as the provider named it) and its
    usage (None when the provider reported none)."""

    model: str | None
    usage: Usage | None


@dataclass
class TurnRecord:
    """One turn as the engine ran it. `answer` is the last round's text (what arrived of it
    when the turn was interrupted or failed); `model` the model that gave it."""

    user: Message
    model: str
    status: TurnStatus = "ok"
    answer: str = ""
    reasoning: str = ""
    finish_reason: str | None = None
    calls: list[ModelCall] = field(default_factory=list)
    tools: list[ToolRecord] = field(default_factory=list)
    error: CountbotError | None = None
    context: TurnContext | None = None
    cache: CacheReport = field(default_factory=CacheReport)  # why the prompt cache missed
    stopped_by: BaseException | None = None  # raised again once the turn is saved

    @property
    def usage(self) -> Usage:
        """The turn's usage: every call's, added (with their cost once charged)."""
        total = Usage()
        for call in self.calls:
            total.add(call.usage)
        return total

    @property
    def usage_reported(self) -> bool:
        """Some call of the turn reported usage (else `ask --json` says null)."""
        return any(call.usage is not None for call in self.calls)

    @property
    def tool_calls(self) -> list[dict[str, Any]]:
        """The tool calls as `ask --json` reports them (name, arguments, outcome)."""
        return [t.reported() for t in self.tools]

    def messages(self) -> list[Message]:
        """What a session keeps of the turn: the question, marked failed (or interrupted when
        nothing arrived), and the answer (what arrived of it, marked the same) unless there was
        none to an interrupted or failed turn; the answer names the model that gave it."""
        user = self.user
        if self.status == "failed":
            user = replace(user, status=STATUS_FAILED)
        elif self.status == "interrupted" and not self.answer:
            user = replace(user, status=STATUS_INTERRUPTED)
        if self.status != "ok" and not self.answer:
            return [user]
        status = {"ok": None, "interrupted": STATUS_INTERRUPTED}.get(self.status, STATUS_FAILED)
        answer = Message(role="assistant", content=self.answer, status=status)
        answer.model = self.model
        return [user, answer]


@dataclass
class TurnResult(TurnRecord):
    """A turn as the conversation settled it: the record, where it was saved (`session_id`,
    None when nothing is saved) and what saving, charging and the rest added."""

    session_id: str | None = None
    notices: list[str] = field(default_factory=list)  # for after the answer (e.g. a new file)
    cost_today: float | None = None  # all priced calls of the day, all sessions (prices set)
    saved_today: float | None = None  # what the cache saved on them (prices set)
    memory: dict[str, Any] = field(default_factory=dict)  # ask's memory_used/_written (--json)
    fallback: dict[str, str] | None = None  # answered by a fallback link: from, to, reason
    upkeep_wait: float = 0.0  # seconds the turn waited for the memory upkeep to give way

    @classmethod
    def of(cls, record: TurnRecord, session_id: str | None) -> TurnResult:
        """The result of `record`, saved in `session_id`."""
        kept = {f.name: getattr(record, f.name) for f in fields(TurnRecord)}
        return cls(**kept, session_id=session_id)
