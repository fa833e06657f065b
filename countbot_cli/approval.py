"""Who may run a prepared tool call: the approval policy (SPEC §6). No terminal I/O here.

The policy answers without asking when it can (reads inside the workspace, `--yes` or `/tools
auto` for writes and edits, a tool allowed for the session) and otherwise asks the injected
`Confirmer` — the terminal prompt in interactive runs, none in non-interactive ones, where
anything that needs approval is denied with a notice. `exec` is never approved for the session
and never by `--yes`; a path outside the workspace is only ever approved by asking about that
exact call.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Protocol

if TYPE_CHECKING:
    from .tools import PreparedCall

# Decision.how values, recorded in the session's tool_conversations
HOW_NOT_NEEDED = "not-needed"
HOW_RULE = "allow-rule"
HOW_YES_FLAG = "yes-flag"
HOW_AUTO_MODE = "auto-mode"
HOW_SESSION = "session"
HOW_USER_ONCE = "user"
HOW_USER_ALWAYS = "user-always"
HOW_USER_EDITED = "user-edited"
HOW_DENIED_USER = "denied-by-user"
HOW_DENIED_POLICY = "denied"


@dataclass
class Decision:
    approved: bool
    how: str
    reason: str | None = None  # why it was denied; goes back to the model
    args: dict[str, Any] | None = None  # arguments edited by the user
    always: bool = False  # the user answered "a": allow this tool for the session


class Confirmer(Protocol):
    """Asks a person about one call. Returns approved/denied (+reason), always, or edited args."""

    def confirm(self, prepared: PreparedCall) -> Decision: ...


@dataclass
class ApprovalPolicy:
    mode: str = "ask"  # ask | auto | off (the REPL's /tools)
    yes_writes: bool = False  # --yes
    confirmer: Confirmer | None = None  # None: non-interactive
    session_allowed: set[str] = field(default_factory=set)

    @property
    def interactive(self) -> bool:
        return self.confirmer is not None and self.mode != "off"

    def decide(self, prepared: PreparedCall) -> Decision:
        spec = prepared.spec
        kind = spec.kind if spec else ""
        outside = bool(prepared.outside_paths)
        if not prepared.needs_approval:
            how = HOW_RULE if kind == "exec" else HOW_NOT_NEEDED
            return Decision(True, how)
        if not outside and kind in ("write", "memory"):
            if self.yes_writes:
                return Decision(True, HOW_YES_FLAG)
            if self.mode == "auto":
                return Decision(True, HOW_AUTO_MODE)
            if spec and spec.name in self.session_allowed:
                return Decision(True, HOW_SESSION)
        if not self.interactive or self.confirmer is None:
            return Decision(False, HOW_DENIED_POLICY, reason=self._why_denied(kind, outside))
        decision = self.confirmer.confirm(prepared)
        if decision.approved and decision.always and spec and kind != "exec" and not outside:
            self.session_allowed.add(spec.name)
        return decision

    def _why_denied(self, kind: str, outside: bool) -> str:
        if outside:
            return "path outside the workspace; this needs the user's approval in an interactive session"
        if self.mode == "off":
            return "tools that change things are switched off (/tools off)"
        if kind == "exec":
            return (
                "shell commands need the user's approval; this run is non-interactive "
                "(an allow rule in the config can permit specific commands)"
            )
        return "this change needs the user's approval; this run is non-interactive (--yes allows file writes)"
