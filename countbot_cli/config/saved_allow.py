"""Approvals that last: the rules saved with `A` at an approval prompt (SPEC §6).

They live in `$XDG_CONFIG_HOME/countbot/allow.yaml` (`FILE_NAME`), never in a project's folder
or config file: a project must not plant or learn a lasting approval. Two lists: `commands`
(exact `exec` commands, never patterns) and `tools` (allowed like `a`, so a path outside the
workspace still asks). Written atomically, mode 0600.

    commands: ["git status"]
    tools: ["write_file"]
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import NamedTuple

from countbot_cli.config.file import load_yaml
from countbot_cli.errors import ConfigError
from countbot_cli.fileio import atomic_write

FILE_NAME = "allow.yaml"
KEYS = ("commands", "tools")
HEADER = (
    "# countbot: approvals saved with `A` at an approval prompt.\n"
    "# commands: exact exec commands that run without asking (the whole text, no wildcards)\n"
    "# tools: tools that run without asking inside the workspace\n"
    "# Remove one with `countbot config allow remove RULE`.\n"
)


class SavedRules(NamedTuple):
    commands: tuple[str, ...] = ()
    tools: tuple[str, ...] = ()

    def rules(self) -> list[tuple[str, str]]:
        """(kind, text) for every rule: kind "command" or "tool"."""
        return [("command", c) for c in self.commands] + [("tool", t) for t in self.tools]


def summary(path: Path) -> str | None:
    """One line naming the saved rules (for `/tools`), or None when there are none."""
    rules = load(path).rules()
    if not rules:
        return None
    shown = ", ".join(f"{kind} {json.dumps(text, ensure_ascii=False)}" for kind, text in rules)
    return f"Saved approvals ({path}): {shown} · `countbot config allow remove RULE` forgets one"


def allow_file(home: Path) -> Path:
    """The sidecar in the user's config folder `home` ($XDG_CONFIG_HOME/countbot)."""
    return home / FILE_NAME


def load(path: Path) -> SavedRules:
    """The saved rules; none when the file does not exist. A damaged file is a ConfigError
    naming it (file:line), never silently ignored."""
    if not path.exists():
        return SavedRules()
    sec = load_yaml(path)
    sec.check_keys(KEYS)
    return SavedRules(
        commands=tuple(c.strip() for c in sec.texts("commands") or () if c.strip()),
        tools=tuple(t.strip() for t in sec.texts("tools") or () if t.strip()),
    )


def _write(path: Path, rules: SavedRules) -> None:
    lines = [HEADER]
    for key, values in (("commands", rules.commands), ("tools", rules.tools)):
        lines.append(f"{key}:\n" if values else f"{key}: []\n")
        lines += [f"  - {json.dumps(v, ensure_ascii=False)}\n" for v in values]
    try:
        path.parent.mkdir(parents=True, exist_ok=True, mode=0o700)
        atomic_write(path, "".join(lines).encode("utf-8"))
    except OSError as e:
        raise ConfigError(f"cannot save the rule: {e.strerror or e}", file=str(path)) from None


def add_command(path: Path, command: str) -> bool:
    """Save an exact exec command; False when it was already saved."""
    rules, command = load(path), command.strip()
    if not command or command in rules.commands:
        return False
    _write(path, SavedRules(rules.commands + (command,), rules.tools))
    return True


def add_tool(path: Path, name: str) -> bool:
    """Save a tool name; False when it was already saved."""
    rules = load(path)
    if name in rules.tools:
        return False
    _write(path, SavedRules(rules.commands, rules.tools + (name,)))
    return True


def remove(path: Path, rule: str) -> str | None:
    """Remove a saved command or tool equal to `rule`; the kind removed, or None."""
    rules, rule = load(path), rule.strip()
    if rule in rules.commands:
        _write(path, SavedRules(tuple(c for c in rules.commands if c != rule), rules.tools))
        return "command"
    if rule in rules.tools:
        _write(path, SavedRules(rules.commands, tuple(t for t in rules.tools if t != rule)))
        return "tool"
    return None


def is_saved_command(command: str, commands: tuple[str, ...]) -> bool:
    return bool(command.strip()) and command.strip() in commands
