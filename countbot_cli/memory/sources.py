"""Where each MEMORY.md line came from: `MEMORY.sources.jsonl`, a sidecar beside it.

The line users read stays `YYYY-MM-DD|source|content`; the link lives beside it, one JSON
object a line: `{"key": …, "session": ID, "messages": [message ids], "source": …}`. `key` is a
hash of the whole memory line, so the link survives the line moving (lines deleted above it)
and dies with an edit of the line (a hand-edited line is the user's own). Records are appended
while the MEMORY.md lock is held (`MemoryStore.add_many`); a later record for the same key
wins. A damaged record is skipped; losing the file loses the links, never a memory.
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import os
from pathlib import Path
from typing import Any

from countbot_cli.config.own_files import SOURCES_SUFFIX as SUFFIX
from countbot_cli.jsonsafe import loads_bounded


def sidecar_path(memory_file: Path) -> Path:
    """MEMORY.md -> MEMORY.sources.jsonl (same folder)."""
    return memory_file.with_name(memory_file.stem + SUFFIX)


def line_key(line: str) -> str:
    return hashlib.sha256(line.encode("utf-8", "surrogatepass")).hexdigest()[:20]


def append(memory_file: Path, records: list[dict[str, Any]]) -> None:
    """Append records (each with `key`); the caller holds MEMORY.md's lock. Best effort: the
    memory line is already written, and a link that could not be kept must not undo it."""
    if not records:
        return
    data = "".join(json.dumps(r, ensure_ascii=False) + "\n" for r in records).encode()
    with contextlib.suppress(OSError):
        fd = os.open(sidecar_path(memory_file), os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o600)
        try:
            os.write(fd, data)
            os.fsync(fd)
        finally:
            os.close(fd)


def load(memory_file: Path) -> dict[str, dict[str, Any]]:
    """key -> the last record for it ({} when there is no sidecar)."""
    out: dict[str, dict[str, Any]] = {}
    with contextlib.suppress(FileNotFoundError):
        for raw in sidecar_path(memory_file).read_bytes().splitlines():
            try:
                rec = loads_bounded(raw)
            except ValueError:
                continue
            if isinstance(rec, dict) and isinstance(rec.get("key"), str) and _valid(rec):
                out[rec["key"]] = rec
    return out


def _valid(rec: dict[str, Any]) -> bool:
    msgs = rec.get("messages", [])
    return (
        isinstance(rec.get("session"), str)
        and isinstance(msgs, list)
        and all(isinstance(m, str) for m in msgs)
    )
