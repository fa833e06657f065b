"""Who may run a prepared tool call: the approval policy (SPEC §6). No terminal I/O here.

The policy answers without asking when it can (reads inside the workspace, `--yes` or `/tools
auto` for writes inside it, a tool allowed for the session) and otherwise asks the injected
`Confirmer`; with none (no terminal) what needs approval is denied. The invariant: `exec`, MCP
tools, the `memory` tool, and paths outside the workspace or sensitive are never approved by
`--yes` or `/tools auto`. The rules: docs/design/tools.md.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Literal, NamedTuple, Protocol

if TYPE_CHECKING:
    from countbot_cli.config.settings import ApprovalMode
    from countbot_cli.tools.base import PreparedCall

# Decision.how values, recorded in the session's tool_conversations
How = Literal[
    "not-needed",
    "allow-rule",
    "yes-flag",
    "auto-mode",
    "session",
    "user",
    "user-always",
    "user-saved",
    "saved-rule",
    "user-edited",
    "denied-by-user",
    "denied",
    "deny-rule",  # the tool round's own: a deny rule, a call that could not run, a Ctrl-C
    "not-run",
    "interrupted",
]
HOW_NOT_NEEDED: How = "not-needed"
HOW_RULE: How = "allow-rule"
HOW_YES_FLAG: How = "yes-flag"
HOW_AUTO_MODE: How = "auto-mode"
HOW_SESSION: How = "session"
HOW_USER_ONCE: How = "user"
HOW_USER_ALWAYS: How = "user-always"
HOW_USER_SAVED: How = "user-saved"  # `A`: approved and saved as a lasting rule (saved_allow.py)
HOW_SAVED_RULE: How = "saved-rule"  # a tool saved with `A` in an earlier run
HOW_USER_EDITED: How = "user-edited"
HOW_DENIED_USER: How = "denied-by-user"
HOW_DENIED_POLICY: How = "denied"


class Decision(NamedTuple):
    approved: bool
    how: How
    reason: str | None = None  # why it was denied; goes back to the model
    args: dict[str, Any] | None = None  # arguments edited by the user
    always: bool = False  # the user answered "a": allow this tool for the session


# (the call as the model sent it, edited arguments) -> the edited call, prepared as the tool
# round will run it (conversation/tool_round.py owns it and lends it to the Confirmer)
Reprepare = Callable[["PreparedCall", dict[str, Any]], "PreparedCall"]


class Confirmer(Protocol):
    """Asks a person about one call. Returns approved/denied (+reason), always, or edited args.

    `reprepare` (when the caller has one) prepares edited arguments, so the edited call can be
    shown as it will run and asked about again."""

    def confirm(self, prepared: PreparedCall, reprepare: Reprepare | None = None) -> Decision: ...


@dataclass
class ApprovalPolicy:
    mode: ApprovalMode = "ask"  # ask | auto | off (/tools changes it)
    yes_writes: bool = False  # --yes
    confirmer: Confirmer | None = None  # None: non-interactive
    session_allowed: set[str] = field(default_factory=set)
    saved_tools: frozenset[str] = frozenset()  # saved with `A` (never exec: see saved_allow)

    @property
    def interactive(self) -> bool:
        return self.confirmer is not None and self.mode != "off"

    def decide(self, prepared: PreparedCall, reprepare: Reprepare | None = None) -> Decision:
        spec = prepared.spec
        kind = spec.kind if spec else ""
        only_this_call = bool(prepared.outside_paths or prepared.sensitive)
        if not prepared.needs_approval:
            how = HOW_RULE if kind in ("exec", "mcp") else HOW_NOT_NEEDED
            return Decision(True, how)
        if not only_this_call and kind in ("write", "memory", "mcp") and self.mode != "off":
            if self.yes_writes and kind == "write":
                return Decision(True, HOW_YES_FLAG)
            if self.mode == "auto" and kind == "write":
                return Decision(True, HOW_AUTO_MODE)
            if spec and spec.name in self.session_allowed:
                return Decision(True, HOW_SESSION)
            if spec and spec.name in self.saved_tools and kind != "memory":
                return Decision(True, HOW_SAVED_RULE)
        if not self.interactive or self.confirmer is None:
            return Decision(False, HOW_DENIED_POLICY, reason=self._why_denied(prepared))
        decision = self.confirmer.confirm(prepared, reprepare)
        allowed = decision.approved and decision.always and kind != "exec"
        if allowed and spec is not None and not only_this_call:
            self.session_allowed.add(spec.name)
        return decision

    def revoke_session(self) -> list[str]:
        """Forget every tool allowed with `a` for the session; the names that were allowed."""
        names = sorted(self.session_allowed)
        self.session_allowed.clear()
        return names

    def _why_denied(self, prepared: PreparedCall) -> str:
        kind = prepared.spec.kind if prepared.spec else ""
        where = "in an interactive session" if self.mode != "off" else "after /tools ask"
        if prepared.sensitive:
            return (
                f"sensitive path ({'; '.join(prepared.sensitive)}); only the user can approve "
                f"that, {where}"
            )
        if prepared.outside_paths:
            paths = ", ".join(str(p) for p in prepared.outside_paths)
            return (
                f"path outside the workspace ({paths}); only the user can approve that, "
                f"{where}. Work inside the workspace instead"
            )
        if self.mode == "off":
            return "tools that change things are switched off (/tools off)"
        if kind == "memory":
            return (
                "writing to long-term memory needs the user's approval, also with --yes; "
                "this run is non-interactive"
            )
        if kind == "exec":
            return (
                "shell commands need the user's approval; this run is non-interactive "
                "(an allow rule in the config can permit specific commands)"
            )
        if kind == "read":
            return f"{'; '.join(prepared.reasons)}: only the user can approve that, {where}"
        if kind == "mcp":
            return (
                "MCP server tools need the user's approval, also with --yes; this run is "
                "non-interactive (the server's `allow` list in the config can permit a tool)"
            )
        return (
            "this change needs the user's approval; this run is non-interactive "
            "(--yes allows file writes)"
        )
