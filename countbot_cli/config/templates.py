"""Templates: prompt files with arguments, `<config folder>/templates/NAME.md`, and the same
placeholders in roles.

A template has a role's front matter (config/roles.py), checked the same way, and a text with
placeholders: `$ARGUMENTS` every argument as given, `$1` … `$9` one each (split like a shell
does), `$$` a literal `$`. Too few arguments, or more than it takes, is a UsageError saying how
many it takes. A role's placeholders take the first words of the prompt and leave the rest as
the question. Templates come only from the user's own config folder. docs/roles.md shows them.
"""

from __future__ import annotations

import os
import re
import shlex
from collections.abc import Mapping
from dataclasses import replace
from pathlib import Path

from countbot_cli.config.home import default_home
from countbot_cli.config.roles import Role, load_md, md_names
from countbot_cli.errors import UsageError

PLACEHOLDER = re.compile(r"\$(\$|ARGUMENTS|[1-9])")


def templates_dir(env: Mapping[str, str] | None = None) -> Path:
    return default_home(os.environ if env is None else env) / "templates"


def template_names(env: Mapping[str, str] | None = None) -> list[str]:
    return md_names(templates_dir(env))


def load_template(name: str, env: Mapping[str, str] | None = None) -> Role:
    """The template called `name` (a Role value: its text, model, options, description)."""
    return load_md("template", templates_dir(env), name, "$ARGUMENTS, $1…$9 take arguments")


def arity(text: str) -> tuple[int, bool]:
    """(the highest `$N` used, whether `$ARGUMENTS` is used)."""
    marks = {m.group(1) for m in PLACEHOLDER.finditer(text)}
    highest = max((int(m) for m in marks if m.isdigit()), default=0)
    return highest, "ARGUMENTS" in marks


def takes_arguments(text: str) -> bool:
    highest, everything = arity(text)
    return bool(highest or everything)


def split_arguments(text: str) -> list[str]:
    """The chat's `/NAME a "b c"`: words as a shell splits them; UsageError on a lone quote."""
    try:
        return shlex.split(text)
    except ValueError as e:
        raise UsageError(f"cannot read the arguments: {e}") from None


def fill(template: Role, args: list[str], raw: str | None = None, *, what: str = "template") -> str:
    """`template`'s text with its placeholders filled from `args` (`raw`: `$ARGUMENTS`, else
    the arguments joined by spaces); UsageError when the count does not fit."""
    highest, everything = arity(template.text)
    label = f"{what} '{template.name}'"
    if args and not (highest or everything):
        raise UsageError(f"{label} takes no arguments (it has no $1…$9 or $ARGUMENTS)")
    if len(args) < highest:
        marks = " ".join(f"${i}" for i in range(1, highest + 1))
        raise UsageError(
            f"{label} needs {highest} argument{'s' if highest > 1 else ''} ({marks}), "
            f"got {len(args)}"
        )
    if len(args) > highest and not everything:
        raise UsageError(
            f"{label} takes {highest} argument{'s' if highest > 1 else ''}, got {len(args)}"
        )
    joined = raw.strip() if raw is not None else " ".join(args)

    def value(m: re.Match[str]) -> str:
        mark = m.group(1)
        if mark == "$":
            return "$"
        return joined if mark == "ARGUMENTS" else args[int(mark) - 1]

    return PLACEHOLDER.sub(value, template.text)


def role_with_arguments(role: Role, words: list[str]) -> tuple[Role, list[str]]:
    """`-r NAME WORDS…`: the role with its placeholders filled from the first words (all of
    them for `$ARGUMENTS`), and the words left for the question."""
    highest, everything = arity(role.text)
    if not (highest or everything):
        return role, words
    taken = len(words) if everything else highest
    text = fill(role, words[:taken], what="role")
    return replace(role, text=text), words[taken:]
