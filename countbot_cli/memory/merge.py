"""MEMORY.md merged with the conflict copies a file-sync tool made of it, or git's marks in it.

`reconcile`, under MEMORY.md's lock: the sidecars' copies first (pins and mutes, sources, the
archive: unions), then each version's entries by content (whitespace normalised; each kept once,
its line byte for byte, so its pin, mute and source hold), an entry only the copy has placed by
its date between the lines both have; a line `memory tidy` archived is not brought back; a pin
of a copy's line kept under another date moves to the kept line; then the copy is moved aside
(`<copy>.merged-<UTC time>`) with one line saying so.

Invariant: every entry of every version is in the merged file exactly once, and a copy is moved
aside only after what it held is written.
"""

from __future__ import annotations

import contextlib
import difflib
import json
import os
import threading
from collections.abc import Callable, Iterator
from contextlib import AbstractContextManager
from pathlib import Path
from typing import NamedTuple

from countbot_cli import conflicts, fileio
from countbot_cli.config.own_files import ARCHIVE_SUFFIX, MARKS_SUFFIX, SOURCES_SUFFIX
from countbot_cli.jsonsafe import loads_bounded
from countbot_cli.memory import archive
from countbot_cli.memory.search import Snapshot
from countbot_cli.memory.sources import line_key

_GIT_HINT = (b"<<<<<<< ", b"\n=======")


class Merged(NamedTuple):
    lines: list[str]
    added: int  # entries brought in from the copy
    moved: list[tuple[str, str]]  # (copy's line, the line kept for the same content)


def merge_lines(main: list[str], copy: list[str], retired: frozenset[str] = frozenset()) -> Merged:
    """`main`'s lines with the entries (and other non-blank lines) only `copy` has, each
    placed by its date between the lines both have; a copy line in `retired` is left out."""
    mine, theirs = _parse(main), _parse(copy)
    seen = {k for k, _line, _day, _entry in mine}
    kept_for = {k: line for k, line, _day, entry in mine if entry}
    out: list[str] = []
    added, moved = 0, []
    # anchored on identical lines; an entry both have under other dates is placed by this one's
    matcher = difflib.SequenceMatcher(None, [r[1] for r in mine], [r[1] for r in theirs], False)
    for tag, i1, i2, j1, j2 in matcher.get_opcodes():
        if tag == "equal":
            out.extend(r[1] for r in mine[i1:i2])
            continue
        fresh = []
        for key, line, day, entry in theirs[j1:j2]:
            if key in seen:
                if entry and kept_for.get(key, line) != line:
                    moved.append((line, kept_for[key]))
                continue
            if not line.strip() or line in retired:
                continue
            seen.add(key)
            added += entry
            fresh.append((key, line, day, entry))
        out.extend(r[1] for r in _by_date(mine[i1:i2], fresh))
    return Merged(out, added, moved)


def _parse(lines: list[str]) -> list[tuple[str, str, str, bool]]:
    """(key, line, date, is an entry) per line: an entry's key is its content with whitespace
    normalised, any other line's the line itself; a line that is not an entry carries the date
    of the entry before it (so it stays beside it)."""
    snap = Snapshot.parse("\n".join(lines).encode("utf-8", "surrogateescape"), key=None)
    entries = {e.line_no: e for e in snap.entries()}
    out, day = [], ""
    for n, line in enumerate(lines, 1):
        e = entries.get(n)
        if e is not None:
            day = e.date
            out.append(("\0" + " ".join(e.content.split()), line, day, True))
        else:
            out.append((line, line, day, False))
    return out


def _by_date(
    mine: list[tuple[str, str, str, bool]], theirs: list[tuple[str, str, str, bool]]
) -> list[tuple[str, str, str, bool]]:
    """Two runs merged by date, each keeping its order; on the same date MEMORY.md's first."""
    out, i, j = [], 0, 0
    while i < len(mine) or j < len(theirs):
        if j == len(theirs) or (i < len(mine) and mine[i][2] <= theirs[j][2]):
            out.append(mine[i])
            i += 1
        else:
            out.append(theirs[j])
            j += 1
    return out


# ---- the files ----


class Watch(conflicts.FolderWatch):
    """When to look for conflict copies of a memory file: as `FolderWatch` says, never while
    this thread holds the file's lock (a merge takes it)."""

    def __init__(self) -> None:
        super().__init__()
        self._held = threading.local()

    def due(self, folder: Path) -> bool:
        return not getattr(self._held, "depth", 0) and self.changed(folder)

    @contextlib.contextmanager
    def holding(self) -> Iterator[None]:
        """Mark this thread as holding the memory file's lock."""
        self._held.depth = getattr(self._held, "depth", 0) + 1
        try:
            yield
        finally:
            self._held.depth -= 1


def reconcile(
    target: Path,
    hold_lock: Callable[[], AbstractContextManager[None]],
    notice: Callable[[str], None],
) -> int:
    """Merge every conflict copy of the memory file `target` (its real path), and git's marks
    in it, into it under its lock (`hold_lock`); returns how many entries came in."""
    if not _found(target):
        return 0
    added = 0
    with hold_lock():
        names = _names(target.parent)
        for suffix in (MARKS_SUFFIX, SOURCES_SUFFIX, ARCHIVE_SUFFIX):
            side = target.with_name(target.stem + suffix)
            for c in conflicts.copies_of(side.name, names):
                _merge_sidecar(side, target.parent / c.name, suffix == MARKS_SUFFIX)
        added = _merge_memory(target, conflicts.copies_of(target.name, names), notice)
    return added


def _found(target: Path) -> bool:
    """Cheaply: is there a copy of the file or of a sidecar, or a git mark in the file?"""
    stems = (target.stem + ".", target.stem + " ", target.stem + "_")
    names = [n for n in _names(target.parent) if n.startswith(stems) and conflicts.maybe_copy(n)]
    if any(conflicts.original_name(n) for n in names):
        return True
    try:
        with open(target, "rb") as f:
            head = f.read()
    except OSError:
        return False
    return _GIT_HINT[0] in head and _GIT_HINT[1] in head


def _names(folder: Path) -> list[str]:
    try:
        return os.listdir(folder)
    except OSError:
        return []


def _merge_memory(target: Path, copies: list[conflicts.Copy], notice: Callable[[str], None]) -> int:
    try:
        data = target.read_bytes()
    except FileNotFoundError:
        data = b""
    lines = _lines(data)
    said: list[str] = []
    added, moved = 0, []
    sides = conflicts.git_sides(data.decode("utf-8", "surrogateescape"))
    retired = frozenset(str(r["line"]) for r in archive.load(target))
    if sides is not None:
        ours, theirs = (_lines(s.encode("utf-8", "surrogateescape")) for s in sides)
        result = merge_lines(ours, theirs, retired)
        lines, added, moved = result.lines, result.added, list(result.moved)
        said.append(
            f"merged the two sides of the git conflict in {target.name} "
            f"({_entries(result.added)} from theirs)"
        )
    read: list[tuple[conflicts.Copy, int]] = []
    for c in copies:
        try:
            copied = (target.parent / c.name).read_bytes()
        except OSError:
            continue
        result = merge_lines(lines, _lines(copied), retired)
        lines, added, moved = result.lines, added + result.added, moved + result.moved
        read.append((c, result.added))
    new = ("\n".join(lines) + "\n").encode("utf-8", "surrogateescape") if lines else b""
    if new != data:
        fileio.atomic_write(target, new)
    _carry_marks(target.with_name(target.stem + MARKS_SUFFIX), moved)
    for c, n in read:
        aside = fileio.move_aside(target.parent / c.name, conflicts.MERGED_TAG)
        said.append(
            f"merged {_entries(n)} from {c.name} (a {c.tool} conflict copy) into "
            f"{target.name}; the copy is now {aside.name}"
        )
    for line in said:
        notice(line)
    return added


def _merge_sidecar(side: Path, copy: Path, is_marks: bool) -> None:
    """A sidecar's copy into it: pins and mutes as a union (what MEMORY.md holds wins), a
    JSON-lines file as the union of its lines; then the copy is moved aside."""
    try:
        theirs = copy.read_bytes()
    except OSError:
        return
    try:
        mine = side.read_bytes()
    except FileNotFoundError:
        mine = b""
    if is_marks:
        new = _union_marks(mine, theirs)
    else:
        have = set(mine.splitlines())
        extra = [ln for ln in dict.fromkeys(theirs.splitlines()) if ln.strip() and ln not in have]
        new = mine + (b"" if not mine or mine.endswith(b"\n") else b"\n")
        new += b"".join(ln + b"\n" for ln in extra)
    if new != mine:
        fileio.atomic_write(side, new)
    fileio.move_aside(copy, conflicts.MERGED_TAG)


def _union_marks(mine: bytes, theirs: bytes) -> bytes:
    a, b = _marks_doc(mine), _marks_doc(theirs)
    for key, line in b["pinned"].items():
        if key not in a["muted"]:
            a["pinned"].setdefault(key, line)
    for key, line in b["muted"].items():
        if key not in a["pinned"]:
            a["muted"].setdefault(key, line)
    return (json.dumps(a, ensure_ascii=False, indent=1) + "\n").encode("utf-8")


def _carry_marks(path: Path, moved: list[tuple[str, str]]) -> None:
    """Pins and mutes of the copy's lines kept as another line (same content) move to it."""
    try:
        data = path.read_bytes()
    except OSError:
        return
    doc = _marks_doc(data)
    for old, kept in moved:
        for table in doc.values():
            if table.pop(line_key(old), None) is not None:
                table.setdefault(line_key(kept), kept)
    new = (json.dumps(doc, ensure_ascii=False, indent=1) + "\n").encode("utf-8")
    if moved and _marks_doc(new) != _marks_doc(data):
        fileio.atomic_write(path, new)


def _marks_doc(data: bytes) -> dict[str, dict[str, str]]:
    try:
        doc = loads_bounded(data) if data.strip() else {}
    except ValueError:
        doc = {}
    out: dict[str, dict[str, str]] = {}
    for name in ("pinned", "muted"):
        raw = doc.get(name) if isinstance(doc, dict) else None
        table = raw if isinstance(raw, dict) else {}
        out[name] = {k: v for k, v in table.items() if isinstance(k, str) and isinstance(v, str)}
    return out


def _lines(data: bytes) -> list[str]:
    text = data.decode("utf-8", "surrogateescape")
    lines = text.split("\n")
    if lines and lines[-1] == "":
        lines.pop()
    return lines


def _entries(n: int) -> str:
    return f"{n} entr{'y' if n == 1 else 'ies'}"
