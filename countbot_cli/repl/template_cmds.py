"""`/NAME args`: the user's templates and roles as slash commands (config/templates.py).

A name that is no built-in command is looked up in `templates/` first, then in `roles/`:

- a template's text, its `$ARGUMENTS` / `$1…$9` / `$$` filled from the arguments (split as a
  shell does, so quotes group words), is sent as the next message;
- a role becomes the chat's role (as `/role NAME`), its placeholders filled the same way.

Too few or too many arguments are a one-line error and nothing is sent. Built-in commands win
over a template or role of the same name. Tab completes the names with their descriptions.
`/skills` lists the skills (config/skills.py) the model is told about, and the ones left out.
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import replace
from typing import TYPE_CHECKING

from countbot_cli.config.roles import load_role, role_names
from countbot_cli.config.skills import find_skills
from countbot_cli.config.templates import (
    fill,
    load_template,
    split_arguments,
    takes_arguments,
    template_names,
    templates_dir,
)
from countbot_cli.errors import CountbotError
from countbot_cli.repl.help_layout import paragraph, two_columns
from countbot_cli.textsafe import sanitize_line

if TYPE_CHECKING:
    from countbot_cli.repl.host import ReplHost


def run_custom(repl: ReplHost, name: str, arg: str) -> bool:
    """Run `/NAME arg` as a template or a role; False when there is neither."""
    if name in template_names():
        template = load_template(name)
        text = fill(template, split_arguments(arg), arg)
        repl.send(text)
        return True
    if name in role_names():
        role = load_role(name)
        role = replace(role, text=fill(role, split_arguments(arg), arg, what="role"))
        repl.conversation.set_role(role)
        repl.meter.invalidate()
        model = f" · model {sanitize_line(role.model)}" if role.model else ""
        repl.info(f"Role: {role.name}{model}.")
        return True
    return False


def custom_commands() -> Iterator[tuple[str, str, bool]]:
    """(name, description, takes arguments) of every template, then every role not shadowed."""
    seen: set[str] = set()
    for kind, names, load in (
        ("template", template_names(), load_template),
        ("role", role_names(), load_role),
    ):
        for name in names:
            if name in seen:
                continue
            seen.add(name)
            try:
                found = load(name)
            except CountbotError:
                yield name, f"{kind} (cannot be read)", False
                continue
            line = sanitize_line(found.first_line)[:60]
            yield name, f"{kind}: {line}" if line else kind, takes_arguments(found.text)


def cmd_skills(repl: ReplHost, arg: str) -> None:
    """`/skills`: the skills listed to the model (their bodies are read only when needed), and
    the ones left out with why (a project's SKILL.md not trusted, no description, …)."""
    settings = repl.conversation.settings
    if settings.trust_store is None:
        repl.info("No skills: countbot has no config folder here.")
        return
    home = settings.trust_store.parent
    found = find_skills(home, settings.tools.workspace, home)
    for s in found.skills:
        where = "project" if s.project else "yours"
        repl.write(f"  {sanitize_line(s.name)}  {sanitize_line(s.description)[:80]}  ({where})\n")
    for line in found.notices:
        repl.warn(line)
    if not found.skills:
        repl.info(f"No skills yet: write {home / 'skills'}/NAME/SKILL.md (name, description)")
    elif repl.conversation.engine.tools is None:
        repl.info("Tools are off: the model cannot read a skill's file")


def custom_help(width: int) -> str:
    """The lines /help adds for the templates and roles, or where to write templates, within
    `width` columns."""
    rows = two_columns([(f"/{name}", meta) for name, meta, _ in custom_commands()], width)
    if not rows:
        none = f"Templates: none yet (write {templates_dir()}/NAME.md; $ARGUMENTS, $1…$9)"
        return "\n".join(paragraph(none, width, "  ", first="")) + "\n"
    return "Templates and roles:\n" + "\n".join(rows) + "\n"
