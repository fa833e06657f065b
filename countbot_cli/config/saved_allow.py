"""Approvals that last: the rules saved with `A` at an approval prompt (SPEC §6).

They live in a sidecar of the user's own config folder, `$XDG_CONFIG_HOME/countbot/allow.yaml`
(`FILE_NAME` beside the user config), never in a project's folder or a project's config file,
even a trusted one: a project must not be able to plant or learn a lasting approval. A sidecar
also leaves the user's commented config.yaml untouched. The file holds two lists::

    commands:   # exec: these exact commands run without asking (whole text, no wildcards)
      - "git status"
    tools:      # these tools run without asking inside the workspace (writes, edits, MCP)
      - "write_file"

A saved command is matched by its exact text (surrounding blanks ignored), never as a pattern:
`A` on `rm *.tmp` allows exactly `rm *.tmp`. A saved tool is allowed like `a` for the session,
so a call reaching outside the workspace or a sensitive path still asks. The file is written
atomically, mode 0600 (`fileio.atomic_write`); strings are written JSON-quoted, which is YAML.
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
