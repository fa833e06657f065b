"""Reading a YAML file countbot takes settings from, so that every value remembers its line.

`load_yaml(path)` composes the document with PyYAML (imported here, lazily, only when a file is
read) and returns a `Section`: typed getters that turn each mistake into a `ConfigError` naming
the file, the 1-based line and the dotted key. A getter returns None for a key that is absent or
null, so the caller applies its own default. `parse_yaml` is the one way a YAML text is read
(config files, the front matter of roles, templates and skills): whatever PyYAML raises, a
value it cannot build and text no file can hold are a ConfigError at the line of the problem,
never another exception.
"""

from __future__ import annotations

import difflib
import functools
import math
import os
import re
from collections.abc import Iterable, Mapping, Sequence
from pathlib import Path
from typing import Any, NamedTuple, TypeVar, cast

from countbot_cli.errors import ConfigError
from countbot_cli.fileio import read_capped

Choice = TypeVar("Choice", bound=str)  # a mode's Literal type (config/chat.py, settings.py)


def pick(text: str, choices: Sequence[Choice]) -> Choice | None:
    """The one of `choices` that `text` is (typed as the choices are), or None."""
    return next((c for c in choices if c == text), None)


class Node(NamedTuple):
    """One parsed value of the file and its line (a NamedTuple, not a dataclass: defined at
    every start, DEVELOPING.md)."""

    value: Any  # a scalar, list[Node] or dict[str, Node]
    line: int  # 1-based; for a mapping entry, the line of its key


MAX_BYTES = 1 << 20  # a config file is a few KiB; anything over 1 MiB is not one
MAX_DEPTH = 64  # countbot's own keys nest 4 deep (providers.NAME.headers.KEY)
MAX_VALUES = 20_000  # keys and values once aliases are expanded; the example file has ~100


def read_config(path: Path) -> bytes:
    """The file's bytes (at most MAX_BYTES, stat'ed before reading: a FIFO is refused, a huge
    file is not read): hashed for trust and parsed from the same copy."""
    try:
        data, size = read_capped(path, MAX_BYTES + 1)
    except OSError as e:
        raise ConfigError(f"cannot read the file: {e.strerror or e}", file=str(path)) from None
    if max(size, len(data)) > MAX_BYTES:
        raise ConfigError(
            f"larger than {MAX_BYTES >> 20} MiB: too big for a config file", file=str(path)
        )
    return data


def decode(data: bytes, file: str) -> str:
    """The file's text; bytes that are not UTF-8 are a ConfigError at their line."""
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError as e:
        line = data.count(b"\n", 0, e.start) + 1
        raise ConfigError(f"not UTF-8 text ({e.reason})", file=file, line=line) from None


def load_yaml(path: Path, data: bytes | None = None) -> Section:
    """The file's top-level mapping (from `data` when given). An empty file is an empty
    section."""
    text = decode(read_config(path) if data is None else data, str(path))
    root = parse_yaml(text, str(path))
    if root is None or root.value is None:
        return Section({}, file=str(path), prefix="", line=1)
    if not isinstance(root.value, dict):
        raise ConfigError(
            "the top level must be a mapping of keys (like `default_provider: openai`)",
            file=str(path),
            line=root.line,
        )
    return Section(root.value, file=str(path), prefix="", line=1)


def parse_yaml(text: str, file: str) -> Node | None:
    """Compose (nesting bounded), bound the alias expansion, then build the values. Whatever
    PyYAML raises (a control character, broken syntax) and a value it cannot build (a date
    that is no date) is a ConfigError at the line where the problem is."""
    import yaml

    try:
        loader = _loader_class()(text)  # PyYAML's reader checks every character here
    except yaml.YAMLError as e:
        raise _yaml_error(e, text, file) from None
    loader.countbot_file = file
    try:
        node = loader.get_single_node()
        if node is None:
            return None
        _check_expansion(node, file)
        return _convert(node, loader, file)
    except yaml.YAMLError as e:
        raise _yaml_error(e, text, file) from None
    finally:
        loader.dispose()


_CONTROL_HINT = 'write it as an escape in double quotes ("\\x01") or remove it'


def _yaml_error(e: Exception, text: str, file: str) -> ConfigError:
    """PyYAML's error as a ConfigError naming the line where the problem is."""
    import yaml

    if isinstance(e, yaml.reader.ReaderError) and isinstance(e.character, int):
        line = text.count("\n", 0, e.position) + 1
        what = f"a control character (U+{e.character:04X}) is not allowed in YAML"
        return ConfigError(f"invalid YAML: {what}", file=file, line=line, hint=_CONTROL_HINT)
    if not isinstance(e, yaml.MarkedYAMLError):
        return ConfigError(f"invalid YAML: {e}", file=file)
    mark = e.problem_mark or e.context_mark
    what = e.problem or e.context or "invalid YAML"
    problem = e.problem or ""
    if e.context_mark is not None and ("stream end" in problem or "end of stream" in problem):
        # the file ended inside something left open: point at where it was opened
        mark = e.context_mark
        what = f"{e.context} that is never closed ({e.problem})"
    return ConfigError(
        f"invalid YAML: {what}", file=file, line=mark.line + 1 if mark is not None else None
    )


def top_level_keys(text: str) -> list[str] | None:
    """The top-level keys of a document, composed only (nothing expanded or built); None when
    it is not a mapping or not valid YAML. For telling another program's file apart."""
    import yaml

    try:
        loader = _loader_class()(text)
    except yaml.YAMLError:  # a control character
        return None
    loader.countbot_file = ""
    try:
        node = loader.get_single_node()
    except (yaml.YAMLError, ConfigError):
        return None
    finally:
        loader.dispose()
    if node is None:
        return []
    if not isinstance(node, yaml.MappingNode):
        return None
    return [str(k.value) for k, _ in node.value if isinstance(k, yaml.ScalarNode)]


@functools.cache
def _loader_class() -> Any:
    """A SafeLoader that refuses nesting deeper than MAX_DEPTH while composing, before
    PyYAML's recursive composer can hit Python's recursion limit, and already while scanning
    `[`/`{` (its simple-key bookkeeping costs flow depth × tokens)."""
    import yaml

    class Loader(yaml.SafeLoader):
        countbot_file = ""
        depth = 0

        def fetch_flow_collection_start(self, token_class: Any) -> None:
            if self.flow_level >= MAX_DEPTH:
                raise _too_deep(self.countbot_file, self.get_mark().line + 1)
            super().fetch_flow_collection_start(token_class)

        def compose_node(self, parent: Any, index: Any) -> Any:
            self.depth += 1
            try:
                if self.depth > MAX_DEPTH:
                    line = self.peek_event().start_mark.line + 1
                    raise _too_deep(self.countbot_file, line)
                return super().compose_node(parent, index)
            finally:
                self.depth -= 1

    return Loader


def _too_deep(file: str, line: int) -> ConfigError:
    return ConfigError(f"nested deeper than {MAX_DEPTH} levels", file=file, line=line)


def _check_expansion(root: Any, file: str) -> None:
    """Refuse a document whose aliases (`*name`) would expand past MAX_VALUES values or
    MAX_DEPTH levels (a "billion laughs" bomb), or that contains itself.

    Each composed node is measured once (aliases share the node), so this is linear in the
    file; it runs before merge keys are flattened or any value is built.
    """
    import yaml

    measured: dict[int, tuple[int, int]] = {}  # id(node) -> (values when expanded, height)
    open_nodes: set[int] = set()

    def walk(node: Any, depth: int) -> tuple[int, int]:
        key = id(node)
        line = node.start_mark.line + 1
        if key in open_nodes:
            raise ConfigError(
                "an alias refers to a collection that contains it", file=file, line=line
            )
        if key not in measured:
            if depth > MAX_DEPTH:
                raise _too_deep(file, line)
            open_nodes.add(key)
            size, height = 1, 1
            for child in _children(node, yaml):
                child_size, child_height = walk(child, depth + 1)
                size, height = size + child_size, max(height, child_height + 1)
                if size > MAX_VALUES:
                    raise ConfigError(
                        f"aliases (*name) expand to more than {MAX_VALUES:,} values",
                        file=file,
                        line=line,
                        hint="a config file needs a few hundred at most",
                    )
            open_nodes.discard(key)
            measured[key] = (size, height)
        size, height = measured[key]
        if depth + height - 1 > MAX_DEPTH:
            raise _too_deep(file, line)
        return size, height

    walk(root, 1)


def _children(node: Any, yaml: Any) -> list[Any]:
    if isinstance(node, yaml.MappingNode):
        return [n for pair in node.value for n in pair]
    if isinstance(node, yaml.SequenceNode):
        return list(node.value)
    return []


def _convert(node: Any, loader: Any, file: str) -> Node:
    import yaml

    line = node.start_mark.line + 1
    if isinstance(node, yaml.MappingNode):
        own = {id(k) for k, _ in node.value if k.tag != "tag:yaml.org,2002:merge"}
        loader.flatten_mapping(node)  # resolves `<<: *anchor` merge keys, merged ones first
        entries: dict[str, Node] = {}
        merged: dict[str, Node] = {}  # a later merged mapping wins; the node's own keys win
        for key_node, value_node in node.value:
            key = _value(key_node, loader, file)
            key_line = key_node.start_mark.line + 1
            if not isinstance(key, str):
                raise ConfigError(f"keys must be text, not {key!r}", file=file, line=key_line)
            if id(key_node) not in own:
                merged[key] = Node(_convert(value_node, loader, file).value, key_line)
                continue
            if key in entries:
                raise ConfigError(f"duplicate key '{key}'", file=file, line=key_line)
            entries[key] = Node(_convert(value_node, loader, file).value, key_line)
        return Node({**merged, **entries}, line)
    if isinstance(node, yaml.SequenceNode):
        return Node([_convert(item, loader, file) for item in node.value], line)
    return Node(_value(node, loader, file), line)


_SURROGATE = re.compile("[\ud800-\udfff]")


def _value(node: Any, loader: Any, file: str) -> Any:
    """A scalar built by PyYAML: a value it cannot build (`2001-13-45` read as a date) or text
    that no file can hold (a lone `\\ud800` escape) is a ConfigError at its line."""
    line = node.start_mark.line + 1
    try:
        value = loader.construct_object(node, deep=True)
    except (ValueError, OverflowError, TypeError) as e:
        kind = str(node.tag).rsplit(":", 1)[-1]
        hint = "put it in quotes to keep it as text"
        raise ConfigError(f"not a valid {kind}: {e}", file=file, line=line, hint=hint) from None
    if isinstance(value, str) and (bad := _SURROGATE.search(value)):
        half = f"\\u{ord(bad.group()):04x}"
        raise ConfigError(
            f"{half} is half of a surrogate pair, not a character", file=file, line=line
        )
    return value


def user_home(env: Mapping[str, str]) -> Path:
    home = env.get("HOME", "").strip()
    return Path(home) if home else Path(os.path.expanduser("~"))


def resolve_path(value: str, base: Path, env: Mapping[str, str]) -> Path:
    """`~` from env HOME; relative paths against `base`; normalised, symlinks left alone."""
    if value == "~" or value.startswith("~/"):
        value = str(user_home(env)) + value[1:]
    path = Path(value)
    return Path(os.path.normpath(path if path.is_absolute() else base / path))


def did_you_mean(word: str, choices: Iterable[str]) -> str | None:
    close = difflib.get_close_matches(word, list(choices), n=1, cutoff=0.6)
    return f"did you mean '{close[0]}'?" if close else None


_TYPE_NAMES = {bool: "true/false", int: "a whole number", float: "a number", str: "text"}


def type_name(value: Any) -> str:
    if value is None:
        return "nothing"
    if isinstance(value, dict):
        return "a mapping"
    if isinstance(value, list):
        return "a list"
    return _TYPE_NAMES.get(type(value), type(value).__name__)


class Section:
    """One mapping of the file, with its dotted prefix, for typed and located access."""

    def __init__(self, entries: dict[str, Node], *, file: str | None, prefix: str, line: int):
        self.entries = entries
        self.file = file
        self.prefix = prefix
        self.line = line

    @classmethod
    def empty(cls, prefix: str = "", file: str | None = None, line: int = 1) -> Section:
        return cls({}, file=file, prefix=prefix, line=line)

    def key(self, name: str) -> str:
        return f"{self.prefix}.{name}" if self.prefix else name

    def has(self, name: str) -> bool:
        node = self.entries.get(name)
        return node is not None and node.value is not None

    def line_of(self, name: str) -> int | None:
        node = self.entries.get(name)
        return node.line if node is not None else (self.line if self.file else None)

    def error(self, name: str | None, message: str, hint: str | None = None) -> ConfigError:
        line = self.line_of(name) if name is not None else (self.line if self.file else None)
        key = self.key(name) if name is not None else (self.prefix or None)
        return ConfigError(message, file=self.file, line=line, key=key, hint=hint)

    def check_keys(self, allowed: Sequence[str]) -> None:
        for name in self.entries:
            if name not in allowed:
                hint = did_you_mean(name, allowed) or "known keys: " + ", ".join(allowed)
                raise self.error(name, "unknown key", hint)

    def _get(self, name: str) -> Any:
        node = self.entries.get(name)
        return None if node is None else node.value

    def _wrong(self, name: str, value: Any, expected: str, hint: str | None = None) -> ConfigError:
        shown = "" if isinstance(value, (dict, list)) else f" {value!r}"  # no parser nodes
        return self.error(name, f"expected {expected}, got {type_name(value)}{shown}", hint)

    def text(self, name: str) -> str | None:
        value = self._get(name)
        if value is None or isinstance(value, str):
            return value
        raise self._wrong(name, value, "text", "put it in quotes")

    def flag(self, name: str) -> bool | None:
        value = self._get(name)
        if value is None or isinstance(value, bool):
            return value
        raise self._wrong(name, value, "true or false")

    def integer(self, name: str, minimum: int | None = None) -> int | None:
        value = self._get(name)
        if value is None:
            return None
        if isinstance(value, bool) or not isinstance(value, int):
            raise self._wrong(name, value, "a whole number")
        if minimum is not None and value < minimum:
            raise self.error(name, f"must be at least {minimum}, got {value}")
        return value

    def number(self, name: str, minimum: float, maximum: float | None = None) -> float | None:
        value = self._get(name)
        if value is None:
            return None
        if isinstance(value, bool) or not isinstance(value, (int, float)):
            raise self._wrong(name, value, "a number")
        if not math.isfinite(value):  # YAML's .nan and .inf
            raise self.error(name, f"must be a finite number, got {value}")
        top = f" and at most {maximum:g}" if maximum is not None else ""
        if value < minimum or (maximum is not None and value > maximum):
            raise self.error(name, f"must be at least {minimum:g}{top}, got {value:g}")
        return float(value)

    def choice(self, name: str, choices: Sequence[Choice]) -> Choice | None:
        """One of `choices` (typed as they are: a Literal's values give that Literal)."""
        value = self._get(name)
        if value is False and "off" in choices:  # YAML 1.1 reads a bare `off` as false
            return cast(Choice, "off")
        if value is True and "on" in choices:
            return cast(Choice, "on")
        if value is None:
            return None
        found = pick(value, choices) if isinstance(value, str) else None
        if found is not None:
            return found
        options = " | ".join(choices)
        if not isinstance(value, str):
            raise self._wrong(name, value, f"one of {options}")
        hint = did_you_mean(value, choices) or f"use one of {options}"
        raise self.error(name, f"'{value}' is not one of {options}", hint)

    def texts(self, name: str) -> tuple[str, ...] | None:
        value = self._get(name)
        if value is None:
            return None
        if isinstance(value, str):
            return (value,)
        if not isinstance(value, list):
            raise self._wrong(name, value, "a list of text")
        out: list[str] = []
        for i, item in enumerate(value):
            if not isinstance(item.value, str):
                raise ConfigError(
                    f"expected text, got {type_name(item.value)} {item.value!r}",
                    file=self.file,
                    line=item.line,
                    key=f"{self.key(name)}[{i}]",
                    hint="put it in quotes",
                )
            out.append(item.value)
        return tuple(out)

    def text_map(self, name: str) -> dict[str, str] | None:
        sub = self.section(name)
        if not sub.entries and not self.has(name):
            return None
        return {k: v for k in sub.entries if (v := sub.text(k)) is not None}

    def section(self, name: str) -> Section:
        """A nested mapping; absent or null gives an empty section."""
        node = self.entries.get(name)
        line = node.line if node is not None else self.line
        if node is None or node.value is None:
            return Section.empty(self.key(name), self.file, line)
        if not isinstance(node.value, dict):
            raise self._wrong(name, node.value, "a mapping of keys")
        return Section(node.value, file=self.file, prefix=self.key(name), line=line)

    def path(self, name: str, base: Path, env: Mapping[str, str]) -> Path | None:
        value = self.text(name)
        if value is None or not value.strip():
            return None
        return resolve_path(value.strip(), base, env)

    def names(self) -> list[str]:
        return list(self.entries)
