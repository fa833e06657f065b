"""Skills (the Agent Skills convention, as CountBot has them): folders of instructions for
particular tasks, `skills/NAME/SKILL.md`, in the user's own config folder and in the workspace.

A SKILL.md starts with a front matter giving `name` and a one-line `description`. Only those
and the file's path go into the stable head of the system prompt (`listing`); the model reads
the body with `read_file` when a task matches, the user's own without asking. A project's skill
is listed only once the user trusted its SKILL.md as it is (the rule of AGENTS.md,
config/instructions.py); the user's skill wins over a project's of the same name. Each SKILL.md
is read capped. docs/roles.md says what a user sees.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

from countbot_cli.config import trust
from countbot_cli.config.file import parse_yaml
from countbot_cli.config.instructions import MAX_BYTES as INSTRUCTIONS_MAX_BYTES
from countbot_cli.config.roles import FRONT, NAME_RE
from countbot_cli.errors import ConfigError
from countbot_cli.fileio import read_capped

if TYPE_CHECKING:
    from countbot_cli.config.settings import Settings

SKILL_FILE = "SKILL.md"
FOLDER = "skills"
MAX_BYTES = INSTRUCTIONS_MAX_BYTES  # of a SKILL.md read: what `config trust` shows and records
MAX_SKILLS = 50
MAX_DESCRIPTION = 300


@dataclass(frozen=True)
class Skill:
    name: str
    description: str
    file: Path  # its SKILL.md
    project: bool  # from the workspace (trusted), not the user's own folder


@dataclass
class Found:
    skills: list[Skill]
    notices: list[str]  # skills left out, and why


def find_skills(user_home: Path, workspace: Path | None, trust_home: Path | None) -> Found:
    """The user's skills, then the workspace's trusted ones (`trust_home`: where the trust
    records live; None: no project skill is used)."""
    found = Found([], [])
    _scan(user_home / FOLDER, False, None, found)
    if workspace is not None and trust_home is not None:
        _scan(workspace / FOLDER, True, trust_home, found)
    return found


def _scan(folder: Path, project: bool, trust_home: Path | None, found: Found) -> None:
    try:
        files = sorted(p / SKILL_FILE for p in folder.iterdir() if (p / SKILL_FILE).is_file())
    except OSError:
        return
    for file in files:
        if len(found.skills) >= MAX_SKILLS:
            found.notices.append(f"only the first {MAX_SKILLS} skills are listed")
            return
        skill, why = _read(file, project, trust_home)
        if skill is None:
            found.notices.append(f"ignored {file}: {why}")
        elif any(s.name == skill.name for s in found.skills):
            found.notices.append(f"ignored {file}: a skill named {skill.name} came first")
        else:
            found.skills.append(skill)


def _read(file: Path, project: bool, trust_home: Path | None) -> tuple[Skill | None, str]:
    try:
        data, _size = read_capped(file, MAX_BYTES)
    except OSError as exc:
        return None, str(exc.strerror or exc)
    if project and trust_home is not None:
        verdict = trust.status(file, data, trust_home)
        if verdict != "trusted":
            why = "it changed since you trusted it" if verdict == "changed" else "not trusted"
            rel = f"{FOLDER}/{file.parent.name}/{SKILL_FILE}"
            return None, f"{why}; review it, then run: countbot config trust {rel}"
    text = data.decode("utf-8", "replace")
    match = FRONT.match(text)
    if match is None:
        return None, "no front matter with a name and a description"
    try:
        node = parse_yaml("\n" + match.group(1), str(file))
    except ConfigError as e:  # said as "ignored FILE: line N: what", the file named once
        where = f"{file}:{e.line}: " if e.line else f"{file}: "
        text = e.user_message().removeprefix(where)
        return None, f"line {e.line}: {text}" if e.line else text
    fields = node.value if node is not None and isinstance(node.value, dict) else {}
    name = _text(fields.get("name")) or file.parent.name
    description = _text(fields.get("description"))
    if not NAME_RE.fullmatch(name):
        return None, f"{name!r} is not a skill name (letters, digits, - _ .)"
    if not description:
        return None, "its front matter has no description (one line: what it is for)"
    return Skill(name, description[:MAX_DESCRIPTION], file, project), ""


def _text(node: object) -> str:
    value = getattr(node, "value", None)
    return " ".join(value.split()) if isinstance(value, str) else ""


def listing(skills: list[Skill], workspace: Path) -> list[tuple[str, str, str]]:
    """(name, description, path to read) for the system prompt: a project skill's path
    relative to the workspace, the user's own absolute."""
    rows = []
    for s in skills:
        path = s.file.relative_to(workspace) if s.project else s.file
        rows.append((s.name, s.description, str(path)))
    return rows


def skills_for(settings: Settings, notice: Callable[[str], None] | None = None) -> list[Skill]:
    """The skills of these settings (the user's folder is the trust store's); the ones left
    out named to `notice` (once per conversation: app.Notices)."""
    if settings.trust_store is None:
        return []
    home = settings.trust_store.parent
    found = find_skills(home, settings.tools.workspace, home)
    if notice is not None:
        for line in found.notices:
            notice(line)
    return found.skills
