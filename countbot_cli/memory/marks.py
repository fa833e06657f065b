"""Pinned and muted memory lines: `MEMORY.marks.json`, a sidecar beside MEMORY.md.

`countbot memory pin N` sends entry N with every request, in the stable head of the system prompt
(SPEC §4); `memory mute N` keeps it out of recall (`memory.inject`) for good; `unpin` and
`unmute` undo them. MEMORY.md keeps its `YYYY-MM-DD|source|content` lines untouched: the marks
live here, as `{"pinned": {KEY: LINE}, "muted": {KEY: LINE}}` where KEY is `sources.line_key`
of the whole line (the same key `MEMORY.sources.jsonl` uses). So a mark follows its line when
lines above it are deleted and is dropped when the line itself is edited or deleted (an edited
line is a new line). Writes happen under MEMORY.md's lock, atomically; a missing or damaged
sidecar reads as "no marks" (it never costs a memory line).
"""

from __future__ import annotations

import contextlib
import json
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Literal

from countbot_cli import fileio
from countbot_cli.config.own_files import MARKS_SUFFIX as SUFFIX
from countbot_cli.errors import StorageError, UsageError
from countbot_cli.jsonsafe import loads_bounded
from countbot_cli.memory.sources import line_key

if TYPE_CHECKING:
    from countbot_cli.memory.search import Entry
    from countbot_cli.memory.store import MemoryStore

Kind = Literal["pinned", "muted"]
MAX_PINNED = 20  # pinned lines are sent with every request: keep the head small


@dataclass
class Marks:
    pinned: dict[str, str] = field(default_factory=dict)
    muted: dict[str, str] = field(default_factory=dict)

    def is_pinned(self, entry: Entry) -> bool:
        return line_key(entry.line) in self.pinned

    def is_muted(self, entry: Entry) -> bool:
        return line_key(entry.line) in self.muted


def marks_path(memory_file: Path) -> Path:
    """MEMORY.md -> MEMORY.marks.json (same folder)."""
    return memory_file.with_name(memory_file.stem + SUFFIX)


def load(memory_file: Path) -> Marks:
    try:
        data = loads_bounded(marks_path(memory_file).read_bytes())
    except (OSError, ValueError):
        return Marks()
    if not isinstance(data, dict):
        return Marks()

    def table(name: str) -> dict[str, str]:
        raw = data.get(name)
        if not isinstance(raw, dict):
            return {}
        return {k: v for k, v in raw.items() if isinstance(k, str) and isinstance(v, str)}

    return Marks(pinned=table("pinned"), muted=table("muted"))


def pinned_entries(store: MemoryStore) -> list[Entry]:
    """The pinned lines that are still in MEMORY.md, in file order."""
    marks = load(store.path)
    if not marks.pinned:
        return []
    return [e for e in store.entries() if marks.is_pinned(e)]


def set_mark(store: MemoryStore, number: int, kind: Kind, on: bool) -> Entry:
    """Pin/mute (on) or unpin/unmute entry `number` (1..N, as `memory show` numbers them);
    returns it. A pinned line is never muted and the other way round (the newer wish wins)."""
    with store.hold_lock():
        entry = store.entry(number)
        marks = load(store.path)
        live = {line_key(e.line) for e in store.entries()}
        key = line_key(entry.line)
        mine, other = (
            (marks.pinned, marks.muted) if kind == "pinned" else (marks.muted, marks.pinned)
        )
        if on:
            if kind == "pinned" and key not in mine and len(_live(mine, live)) >= MAX_PINNED:
                raise UsageError(f"{MAX_PINNED} lines are pinned already", hint="unpin one first")
            mine[key] = entry.line
            other.pop(key, None)
        else:
            mine.pop(key, None)
        _save(store.path, Marks(pinned=_live(marks.pinned, live), muted=_live(marks.muted, live)))
    return entry


def _live(table: dict[str, str], live: set[str]) -> dict[str, str]:
    """Marks of lines still in the file (marks of deleted or edited lines are dropped)."""
    return {k: v for k, v in table.items() if k in live}


def _save(memory_file: Path, marks: Marks) -> None:
    blob = json.dumps({"pinned": marks.pinned, "muted": marks.muted}, ensure_ascii=False, indent=1)
    path = marks_path(Path(memory_file))
    try:
        with contextlib.suppress(FileExistsError):
            path.parent.mkdir(parents=True, exist_ok=True)
        fileio.atomic_write(path, (blob + "\n").encode("utf-8"))
    except OSError as exc:
        raise StorageError(f"cannot write {path}: {exc.strerror or exc}") from exc


def carry(memory_file: Path, old_key: str, new_line: str) -> None:
    """A line's pin or mute moves to the line that replaced it (`memory tidy`'s merge); the
    caller holds MEMORY.md's lock."""
    marks = load(memory_file)
    new_key = line_key(new_line)
    moved = False
    for table in (marks.pinned, marks.muted):
        if old_key in table:
            table[new_key] = new_line
            del table[old_key]
            moved = True
    if moved:
        _save(memory_file, marks)
