"""Roles: `<config folder>/roles/NAME.md`, markdown whose text is added to the system prompt.

A role may start with a front matter setting `model`, `description` and per-call options,
read by config/file.py's bounded loader and checked by config/options.py (a typo is an error
naming the file and line). Roles come only from the user's own config folder, never from a
project folder: a role's text steers the model as much as the system prompt does, and a cloned
repository must not choose it. docs/roles.md shows one.
"""

from __future__ import annotations

import os
import re
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from countbot_cli.config import options as opts
from countbot_cli.config.file import Node, decode, did_you_mean, parse_yaml, read_config
from countbot_cli.config.home import default_home
from countbot_cli.errors import ConfigError, UsageError

NAME_RE = re.compile(r"[A-Za-z0-9][A-Za-z0-9_.-]{0,63}")
FRONT = re.compile(r"\A---[ \t]*\r?\n(.*?)^---[ \t]*(?:\r?\n|\Z)", re.S | re.M)


@dataclass(frozen=True)
class Role:
    name: str
    file: Path
    text: str  # the markdown after the front matter, stripped
    model: str | None = None
    options: Mapping[str, Any] = field(default_factory=dict)
    description: str | None = None  # the front matter's one line (listings, Tab completion)

    @property
    def first_line(self) -> str:
        """The description, else the first line of the text (listings)."""
        if self.description:
            return " ".join(self.description.split())
        for line in self.text.splitlines():
            if line.strip():
                return " ".join(line.split())
        return ""


def roles_dir(env: Mapping[str, str] | None = None) -> Path:
    return default_home(os.environ if env is None else env) / "roles"


def role_names(env: Mapping[str, str] | None = None) -> list[str]:
    return md_names(roles_dir(env))


def md_names(folder: Path) -> list[str]:
    """The names of the NAME.md files in `folder` (roles, templates), sorted."""
    try:
        names = [p.stem for p in folder.iterdir() if p.suffix == ".md" and p.is_file()]
    except OSError:
        return []
    return sorted(n for n in names if NAME_RE.fullmatch(n))


def load_role(name: str, env: Mapping[str, str] | None = None) -> Role:
    """The role called `name`; UsageError (exit 2) naming the roles folder when there is none,
    ConfigError naming the file and line when its front matter is wrong."""
    return load_md("role", roles_dir(env), name, "`countbot roles` lists them")


def load_md(kind: str, folder: Path, name: str, about: str) -> Role:
    """`folder/NAME.md` read as a role (roles, templates); a UsageError naming the `kind`s there
    (hint: create it, markdown; `about`) when there is no such file."""
    if not NAME_RE.fullmatch(name) or not (folder / f"{name}.md").is_file():
        known = md_names(folder)
        have = f"the {kind}s are: {', '.join(known)}" if known else "there are none yet"
        raise UsageError(
            f"no {kind} {name!r} in {folder} ({have})",
            hint=f"create {folder / (name + '.md')} (markdown; {about})",
        )
    return parse_role(name, folder / f"{name}.md")


def parse_role(name: str, file: Path) -> Role:
    text = decode(read_config(file), str(file))
    match = FRONT.match(text)
    if match is None:
        return Role(name=name, file=file, text=text.strip())
    texts, options = _front_matter(match.group(1), file)
    body = text[match.end() :].strip()
    return Role(name, file, body, texts.get("model"), options, texts.get("description"))


FRONT_KEYS = ("model", "description", "options", *opts.KNOWN)


def _front_matter(block: str, file: Path) -> tuple[dict[str, str], dict[str, Any]]:
    """({model, description}, options) of a front matter; its keys are checked as the config file's are (an
    unknown key is exit 2 with "did you mean"); other request fields go under `options:`."""
    node = parse_yaml("\n" + block, str(file))  # the block starts on the file's second line
    if node is None or node.value is None:
        return {}, {}
    if not isinstance(node.value, dict):
        raise ConfigError(
            "the front matter must be `key: value` lines (model, temperature, …)",
            file=str(file),
            line=node.line,
        )
    texts: dict[str, str] = {}
    found: dict[str, Any] = {}
    for key, entry in node.value.items():
        line = entry.line
        if key not in FRONT_KEYS:
            hint = did_you_mean(str(key), FRONT_KEYS) or (
                f"known keys: {', '.join(FRONT_KEYS)}; other request fields go under options:"
            )
            raise ConfigError(f"unknown key '{key}'", file=str(file), line=line, hint=hint)
        if key in ("model", "description"):
            if not isinstance(entry.value, str) or not entry.value.strip():
                what = "a model name" if key == "model" else "one line of text"
                raise ConfigError(f"{key} must be {what}", file=str(file), line=line)
            texts[key] = entry.value.strip()
            continue
        if key == "options":
            found.update(_extra_options(entry, file))
            continue
        found[str(key)] = _option(str(key), entry, file)
    return texts, found


def _extra_options(entry: Node, file: Path) -> dict[str, Any]:
    """`options:`: a mapping of request fields, each checked as `-o KEY VALUE` is."""
    if not isinstance(entry.value, dict):
        raise ConfigError(
            "options must be `key: value` lines (request fields)", file=str(file), line=entry.line
        )
    return {str(k): _option(str(k), v, file) for k, v in entry.value.items()}


def _option(key: str, entry: Node, file: Path) -> Any:
    if isinstance(entry.value, list | dict) and key in opts.KNOWN:
        raise ConfigError(f"{key}: a single value is expected", file=str(file), line=entry.line)
    try:
        return opts.check(key, _plain(entry.value))
    except opts.OptionError as e:
        raise ConfigError(str(e), file=str(file), line=entry.line) from None


def _plain(value: Any) -> Any:
    """A YAML node tree (values that remember their line) as plain Python values."""
    if isinstance(value, Node):
        return _plain(value.value)
    if isinstance(value, dict):
        return {str(k): _plain(v) for k, v in value.items()}
    if isinstance(value, list):
        return [_plain(v) for v in value]
    return value
