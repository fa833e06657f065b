"""Which project-local files the user has trusted (SPEC §3 "Trust"), as direnv and mise do.

A file countbot finds in the folder it starts in (today: `./config.yaml`) may come from a cloned
repository, so it is applied only once the user has run `countbot config trust`. That records
the file's real path and the SHA-256 of the exact bytes the user looked at in `trusted.json`, in
countbot's own config folder (never in the project); a changed file is untrusted again.

`status()` is the one place that decides, on the bytes the caller read (capped: a project file
is never read whole before it is trusted). The list itself is read the same careful way: a FIFO
or device in its place is a ConfigError, never a hang.
"""

from __future__ import annotations

import hashlib
import json
import os
from collections.abc import Callable
from datetime import datetime, timezone
from pathlib import Path
from typing import Literal, NamedTuple

from countbot_cli.errors import ConfigError
from countbot_cli.fileio import NotRegularFile, atomic_write, locked, move_aside, read_capped

TRUST_FILE = "trusted.json"
LOCK_TIMEOUT = 5.0
MAX_STORE_BYTES = 1 << 20  # thousands of records; more is not a list countbot wrote

Status = Literal["trusted", "untrusted", "changed"]


class TrustRecord(NamedTuple):
    path: str  # the file's real path
    sha256: str  # of the bytes that were trusted
    trusted_at: str  # UTC, ISO 8601


def store_path(home: Path) -> Path:
    """`trusted.json` in countbot's own config folder (`default_home(env)`)."""
    return home / TRUST_FILE


def file_key(path: Path) -> str:
    """The record's key: the absolute path with symlinks resolved."""
    return os.path.realpath(path)


def digest(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


def status(path: Path, data: bytes, home: Path) -> Status:
    """Whether these exact bytes of `path` are trusted, were trusted in another version, or
    were never trusted."""
    record = records(home).get(file_key(path))
    if record is None:
        return "untrusted"
    return "trusted" if record.sha256 == digest(data) else "changed"


def records(home: Path) -> dict[str, TrustRecord]:
    """Every record, by real path. A missing or damaged store trusts nothing."""
    return _read(store_path(home))[0]


def trust(path: Path, data: bytes, home: Path) -> TrustRecord:
    """Record `data` (the bytes just read and shown to the user) as the trusted `path`."""
    stamp = datetime.now(timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ")
    record = TrustRecord(file_key(path), digest(data), stamp)

    def change(table: dict[str, TrustRecord]) -> None:
        table[record.path] = record

    _update(home, change)
    return record


def untrust(path: Path, home: Path) -> bool:
    """Forget `path`. False when it was not trusted."""
    removed: list[TrustRecord] = []

    def change(table: dict[str, TrustRecord]) -> None:
        if (old := table.pop(file_key(path), None)) is not None:
            removed.append(old)

    _update(home, change)
    return bool(removed)


def _update(home: Path, change: Callable[[dict[str, TrustRecord]], None]) -> None:
    """Read, change and atomically rewrite the store (mode 0600) under its lock."""
    home.mkdir(parents=True, exist_ok=True, mode=0o700)
    target = store_path(home)
    with locked(home / f".{TRUST_FILE}.lock", LOCK_TIMEOUT, "the list of trusted files"):
        table, damaged = _read(target)
        if damaged:
            move_aside(target)  # kept for a look, never overwritten
        change(table)
        body = {
            "version": 1,
            "trusted": [
                {"path": r.path, "sha256": r.sha256, "trusted_at": r.trusted_at}
                for r in sorted(table.values(), key=lambda r: r.path)
            ],
        }
        atomic_write(target, (json.dumps(body, indent=2) + "\n").encode("utf-8"))


def _read(target: Path) -> tuple[dict[str, TrustRecord], bool]:
    """(records, the file exists but is damaged). Something else than a file at its path (a
    FIFO would hang every read) is damage the user must clear: a ConfigError (exit 2)."""
    try:
        raw, _size = read_capped(target, MAX_STORE_BYTES + 1)
    except NotRegularFile as exc:
        raise ConfigError(
            f"{exc.strerror}; countbot keeps its list of trusted files there",
            file=str(target),
            hint="move it away: countbot writes a new one when you next trust a file",
        ) from None
    except OSError:  # missing (or unreadable): nothing is trusted
        return {}, False
    if len(raw) > MAX_STORE_BYTES:
        return {}, True
    try:
        body = json.loads(raw)
        table = {}
        for item in body["trusted"]:
            record = TrustRecord(str(item["path"]), str(item["sha256"]), str(item["trusted_at"]))
            table[record.path] = record
    except (ValueError, RecursionError, KeyError, TypeError):
        return {}, True
    return table, False
