"""`MEMORY.archive.jsonl`: the lines `memory tidy` took out of MEMORY.md, beside it.

A superseded, merged or duplicate line is never silently dropped: it moves here, one JSON
object a line, with why (`reason`: supersede, merge, drop), the line that stands for it now
(`by`), when (`at`), where it came from (`sources`: its `MEMORY.sources.jsonl` record) and how
many entries MEMORY.md held after that tidy (`entries_after`, for the toolbar's hint). Records
are appended while MEMORY.md's lock is held, before MEMORY.md is rewritten, so a crash between
the two leaves a line in both places, never in neither. Archived lines are out of MEMORY.md, so
recall never sends them.
"""

from __future__ import annotations

import contextlib
import json
import os
from pathlib import Path
from typing import Any

from countbot_cli.config.own_files import ARCHIVE_SUFFIX as SUFFIX
from countbot_cli.errors import StorageError
from countbot_cli.jsonsafe import loads_bounded

TAIL_BYTES = 8192  # the last record is read from the file's end


def archive_path(memory_file: Path) -> Path:
    """MEMORY.md -> MEMORY.archive.jsonl (same folder)."""
    return memory_file.with_name(memory_file.stem + SUFFIX)


def append(memory_file: Path, records: list[dict[str, Any]]) -> None:
    """Append records durably (0600); the caller holds MEMORY.md's lock. Unlike the sources
    sidecar this must not fail quietly: a line is removed from MEMORY.md only once it is here."""
    if not records:
        return
    data = "".join(json.dumps(r, ensure_ascii=False) + "\n" for r in records).encode()
    path = archive_path(memory_file)
    try:
        fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o600)
        try:
            os.write(fd, data)
            os.fsync(fd)
        finally:
            os.close(fd)
    except OSError as exc:
        raise StorageError(f"cannot write {path}: {exc.strerror or exc}") from exc


def load(memory_file: Path) -> list[dict[str, Any]]:
    """Every archived record, oldest first ([] when there is none); damaged lines skipped."""
    out: list[dict[str, Any]] = []
    with contextlib.suppress(FileNotFoundError):
        for raw in archive_path(memory_file).read_bytes().splitlines():
            with contextlib.suppress(ValueError):
                rec = loads_bounded(raw)
                if isinstance(rec, dict) and isinstance(rec.get("line"), str):
                    out.append(rec)
    return out


def entries_after_last_tidy(memory_file: Path) -> int | None:
    """How many entries MEMORY.md held after the last tidy that archived something."""
    try:
        with open(archive_path(memory_file), "rb") as f:
            f.seek(0, os.SEEK_END)
            f.seek(max(0, f.tell() - TAIL_BYTES))
            tail = f.read().splitlines()
    except OSError:
        return None
    for raw in reversed(tail):
        with contextlib.suppress(ValueError):
            rec = loads_bounded(raw)
            if isinstance(rec, dict) and isinstance(rec.get("entries_after"), int):
                return int(rec["entries_after"])
    return None
