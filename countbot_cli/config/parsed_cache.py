"""The config files' parsed form kept between runs, so a start whose config did not change
reads no YAML (issue 25 point 2: importing PyYAML and composing a commented config took
10-15 ms of a 150 ms `ask`).

`parsed-config.json` in countbot's config folder (beside `trusted.json`) holds the node tree
`file.parse_yaml` made of each of the last MAX_ENTRIES config texts, keyed by the SHA-256 of
the text (and of FORMAT): a file that changed by one byte is parsed again, and its errors are
reported as ever, since only a text that parsed is kept. A tree holding a value JSON cannot
carry exactly (a date, binary data) is not kept. The file is one of countbot's own files (the
tools ask before touching it: it steers the settings as config.yaml does). Damage or a missing
file reads as empty; a failed write is ignored: it is only a cache.
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import math
from collections.abc import Callable
from pathlib import Path
from typing import Any

from countbot_cli import __version__, fileio
from countbot_cli.config.file import Node, parse_yaml
from countbot_cli.jsonsafe import loads_bounded

CACHE_FILE = "parsed-config.json"
FORMAT = f"countbot {__version__} nodes 1"  # a change to file.parse_yaml's trees: bump
MAX_ENTRIES = 8  # the user's config and a few projects'
MAX_BYTES = 8 << 20


def cache_path(config_home: Path) -> Path:
    """The cache in countbot's own config folder (`settings.default_home(env)`)."""
    return config_home / CACHE_FILE


def cached_parser(path: Path) -> Callable[[str, str], Node | None]:
    """`file.parse_yaml`, answered from the cache at `path` when the text was parsed before."""

    def parse(text: str, file: str) -> Node | None:
        key = hashlib.sha256(f"{FORMAT}\0{text}".encode()).hexdigest()
        entries = _read(path)
        known = entries.get(key)
        if known is not None:
            try:
                return _decode(known)
            except (TypeError, ValueError, KeyError, IndexError):
                pass  # damaged: parsed again below, and replaced
        root = parse_yaml(text, file)
        encoded = _encode(root)
        if root is not None and encoded is not _UNCACHEABLE:
            entries.pop(key, None)
            kept = list(entries.items())[-(MAX_ENTRIES - 1) :]
            _write(path, {**dict(kept), key: encoded})
        return root

    return parse


_UNCACHEABLE = object()
_SCALARS = (str, int, bool, type(None))


def _encode(node: Node | None) -> Any:
    """[line, value]: a list of encoded nodes, a mapping of them, or a scalar; _UNCACHEABLE
    for a value JSON would not give back as it is."""
    if node is None:
        return None
    value = node.value
    if isinstance(value, list):
        items = [_encode(item) for item in value]
        return _UNCACHEABLE if _UNCACHEABLE in items else [node.line, items]
    if isinstance(value, dict):
        entries = {key: _encode(item) for key, item in value.items()}
        return _UNCACHEABLE if _UNCACHEABLE in entries.values() else [node.line, entries]
    if isinstance(value, _SCALARS) or (type(value) is float and math.isfinite(value)):
        return [node.line, value]
    return _UNCACHEABLE


def _decode(encoded: Any) -> Node | None:
    if encoded is None:
        return None
    line, value = encoded
    if not isinstance(line, int) or isinstance(line, bool):
        raise TypeError("a node's line is a number")
    if isinstance(value, list):
        return Node([_decode(item) for item in value], line)
    if isinstance(value, dict):
        return Node({str(key): _decode(item) for key, item in value.items()}, line)
    return Node(value, line)


def _read(path: Path) -> dict[str, Any]:
    try:
        data, _size = fileio.read_capped(path, MAX_BYTES)
        loaded = loads_bounded(data, max_depth=2 * 64 + 8)  # config.file.MAX_DEPTH, two a node
    except (OSError, ValueError):  # missing, not a regular file, damaged, over the limits
        return {}
    entries = loaded.get("entries") if isinstance(loaded, dict) else None
    if not isinstance(entries, dict) or loaded.get("format") != FORMAT:
        return {}
    return entries


def _write(path: Path, entries: dict[str, Any]) -> None:
    blob = json.dumps({"format": FORMAT, "entries": entries}, ensure_ascii=False)
    with contextlib.suppress(OSError, ValueError):
        path.parent.mkdir(parents=True, exist_ok=True, mode=0o700)
        fileio.atomic_write(path, blob.encode("utf-8"), durable=False)
