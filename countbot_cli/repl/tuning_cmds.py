"""`/set KEY VALUE` and `/role [NAME]`: per-call options and the role for the rest of the chat.

Options are checked by config/options.py (the same rules as `-o`); a bad value is a one-line
error naming the key and nothing is sent. Roles come from config/roles.py (the user's own
roles folder only).
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from typing import TYPE_CHECKING

from countbot_cli.config import options as opts
from countbot_cli.config.chat import CHAT_KEYS, with_value
from countbot_cli.config.roles import load_role, parse_role, role_names, roles_dir
from countbot_cli.errors import CountbotError, UsageError
from countbot_cli.textsafe import sanitize_line

if TYPE_CHECKING:
    from countbot_cli.repl.host import ReplHost


def cmd_set(repl: ReplHost, arg: str) -> None:
    c = repl.conversation
    key, _, text = arg.partition(" ")
    key, text = key.strip(), text.strip()
    if not key:
        merged = c.tuning.merged()
        if not merged:
            repl.info("No options set (/set KEY VALUE sets one, e.g. /set temperature 0.2).")
            return
        for name, value in sorted(merged.items()):
            source = "" if name in c.tuning.options else " (from the role)"
            repl.write(f"  {sanitize_line(name)} = {sanitize_line(json.dumps(value))}{source}\n")
        return
    if key in CHAT_KEYS:  # the prompt's own settings (config chat:), not a model option
        _set_chat(repl, key, text)
        return
    if not text:
        if key not in c.tuning.options:
            raise UsageError(f"{sanitize_line(key)} is not set (/set lists what is)")
        c.set_option(key, None)
        repl.meter.invalidate()
        repl.info(f"{sanitize_line(key)} removed.")
        return
    try:
        value = opts.parse_text(key, text)
    except opts.OptionError as e:
        raise UsageError(f"/set {sanitize_line(str(e))}") from None
    c.set_option(key, value)
    repl.meter.invalidate()
    repl.info(
        f"{sanitize_line(key)} = {sanitize_line(json.dumps(value))} for the rest of this chat."
    )


def _set_chat(repl: ReplHost, key: str, text: str) -> None:
    if not text:
        repl.info(f"{key} = {getattr(repl.chat, key)} (/set {key} VALUE changes it)")
        return
    try:
        repl.chat = with_value(repl.chat, key, text)
    except ValueError as e:
        raise UsageError(f"/set {sanitize_line(str(e))}") from None
    repl.apply_chat()
    repl.info(f"{key} = {getattr(repl.chat, key)} for the rest of this chat.")


def cmd_role(repl: ReplHost, arg: str) -> None:
    c = repl.conversation
    current = c.tuning.role.name if c.tuning.role else None
    if not arg:
        names = role_names()
        for name in names:
            repl.write(f"{'*' if name == current else ' '} {name}  {_first_line(name)}\n")
        where = roles_dir()
        if not names:
            repl.info(f"No roles yet: write markdown files into {where}/NAME.md")
        repl.info(f"current: {current or 'none'} · /role NAME switches · /role none drops it")
        return
    if arg.lower() == "none":
        c.set_role(None)
        repl.meter.invalidate()
        repl.info("No role.")
        return
    try:
        role = load_role(arg)
    except UsageError as e:
        raise UsageError(e.user_message()) from None  # one line, naming the roles folder
    c.set_role(role)
    repl.meter.invalidate()
    model = f" · model {sanitize_line(role.model)}" if role.model else ""
    repl.info(f"Role: {role.name}{model}.")


def complete_roles(repl: ReplHost, arg: str) -> Iterator[tuple[str, str]]:
    if " " in arg:
        return
    yield "none", "no role"
    for name in role_names():
        yield name, _first_line(name)


def complete_keys(repl: ReplHost, arg: str) -> Iterator[tuple[str, str]]:
    if " " in arg:
        return
    for key in opts.KNOWN:
        yield key, "set" if key in repl.conversation.tuning.options else ""
    for key in CHAT_KEYS:
        yield key, f"chat: {getattr(repl.chat, key)}"


def _first_line(name: str) -> str:
    try:
        return sanitize_line(parse_role(name, roles_dir() / f"{name}.md").first_line)[:60]
    except CountbotError:
        return "(cannot be read)"
