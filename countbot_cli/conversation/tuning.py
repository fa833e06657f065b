"""What the chat changes for the rest of a conversation: `/set` options and the `/role`.

`Tuning` holds the per-call options set in the REPL (checked by config/options.py, the same
rules as `-o`) and the role chosen with `/role` (config/roles.py). The conversation merges
them (the role's options under `/set`'s) into the backend it builds, and puts the role's text
in front of the extra instructions of every request.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from countbot_cli.config.roles import Role


@dataclass
class Tuning:
    options: dict[str, Any] = field(default_factory=dict)  # /set KEY VALUE
    role: Role | None = None  # /role NAME

    def merged(self) -> dict[str, Any]:
        """The options the next request carries on top of the settings': role's, then /set's."""
        return {**(dict(self.role.options) if self.role else {}), **self.options}

    def system(self, extra: str | None) -> str | None:
        """The extra instructions with the role's text in front."""
        role_text = self.role.text if self.role else ""
        return "\n\n".join(t for t in (role_text, extra) if t) or None
