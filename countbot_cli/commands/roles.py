"""`-r/--role NAME` and `-o KEY VALUE` turned into what the commands already take: the role's
text joins `--system`, its model stands in for a missing `-m`, its options sit under `-o`'s.
And the `countbot roles` listing.

config/roles.py and config/templates.py are imported only when a role or a template is named:
every `ask` and chat runs `choose`, and most name neither (together they cost a plain `ask`
about 2 ms and a frozen dataclass to define: docs/design/startup.md)."""

from __future__ import annotations

from typing import Any, NamedTuple, TextIO

from countbot_cli.config.options import parse_pairs
from countbot_cli.errors import ConfigError, UsageError
from countbot_cli.textsafe import sanitize_line


class Chosen(NamedTuple):
    """What `choose` resolved (a NamedTuple: defined at every `ask` and chat, DEVELOPING.md)."""

    system: str | None
    model: str | None
    options: dict[str, Any]
    prompt: list[str]  # the question's words, after -r/-t took theirs


def choose(
    role: str | None,
    system: str | None,
    model: str | None,
    words: list[str] | None,
    prompt: list[str] | None = None,
    template: str | None = None,
) -> Chosen:
    """Resolve `-r`, `-t`, `--system`, `-m` and `-o` (UsageError/ConfigError, exit 2, when
    wrong). `words` are `-o`'s values, `KEY=VALUE` each (routing.join_option_pairs joined
    them); `prompt` the question's words: a role's placeholders take the first of them, a
    template (`-t`) takes them all and becomes the question (config/templates.py)."""
    pairs = []
    for word in words or []:
        key, eq, value = word.partition("=")
        if not eq:
            raise UsageError(
                f"-o {key}: needs a value", hint="-o KEY VALUE, e.g. -o temperature 0.2"
            )
        pairs.append((key, value))
    given = parse_pairs(pairs)
    rest = list(prompt or [])
    options: dict[str, Any] = {}
    if template is not None:
        from countbot_cli.config.templates import fill, load_template  # with --template only

        t = load_template(template)
        model, options = model or t.model, dict(t.options)
        rest = [fill(t, rest)]
    if role is None:
        return Chosen(system, model, {**options, **given}, rest)
    from countbot_cli.config.roles import load_role  # with --role only (ask's start-up)
    from countbot_cli.config.templates import role_with_arguments  # likewise

    r, rest = role_with_arguments(load_role(role), rest)
    text = "\n\n".join(t for t in (r.text, system) if t)
    return Chosen(text or None, model or r.model, {**r.options, **options, **given}, rest)


def roles_list(out: TextIO, err: TextIO) -> int:
    from countbot_cli.config.roles import parse_role, role_names, roles_dir  # ask loads `choose`

    folder = roles_dir()
    names = role_names()
    if not names:
        err.write(f"countbot: no roles yet: write markdown files into {folder}/NAME.md\n")
        return 0
    rows: list[tuple[str, str]] = []
    for name in names:
        try:
            rows.append((name, parse_role(name, folder / f"{name}.md").first_line))
        except ConfigError as e:  # one bad file: the others are still listed, it is named
            why = sanitize_line(e.user_message())[:200]
            err.write(f"countbot: role {name!r} left out: {why}\n")
    width = max((len(name) for name, _ in rows), default=0)
    for name, first in rows:
        out.write(f"{name:<{width}}  {sanitize_line(first)[:100]}\n")
    return 0
