"""`/NAME args`: the user's templates and roles as slash commands (config/templates.py).

A name that is no built-in command is looked up in `templates/` first, then in `roles/`:

- a template's text, its `$ARGUMENTS` / `$1…$9` / `$$` filled from the arguments (split as a
  shell does, so quotes group words), is sent as the next message;
- a role becomes the chat's role (as `/role NAME`), its placeholders filled the same way.

Too few or too many arguments are a one-line error and nothing is sent. Built-in commands win
over a template or role of the same name. Tab completes the names with their descriptions.
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import replace
from typing import TYPE_CHECKING

from countbot_cli.config.roles import load_role, role_names
from countbot_cli.config.templates import (
    fill,
    load_template,
    split_arguments,
    takes_arguments,
    template_names,
    templates_dir,
)
from countbot_cli.errors import CountbotError
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


def custom_help() -> str:
    """The lines /help adds for the templates and roles, or where to write templates."""
    rows = [f"  /{name}  {meta}" for name, meta, _ in custom_commands()]
    if not rows:
        return f"Templates: none yet (write {templates_dir()}/NAME.md; $ARGUMENTS, $1…$9)\n"
    return "Templates and roles:\n" + "\n".join(rows) + "\n"
