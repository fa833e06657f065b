"""`index.json`: the sessions folder's listing cache, one row a session, in the cache folder
(config/derived.py: never in the sessions folder, which a file-sync tool may share).

A row is the session file's key (inode, mtime_ns, size) and the header fields a listing shows
(title, times, provider, model, message count, gist). The index is derived data: the store
(conversation/sessions/store.py) refreshes a row whenever its key disagrees with the file, so a
missing, stale or damaged index loses nothing and costs one read of each file.
"""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any, NamedTuple

from countbot_cli import fileio
from countbot_cli.config.derived import derived_file
from countbot_cli.errors import StorageError
from countbot_cli.fileio import Key
from countbot_cli.jsonsafe import loads_bounded

INDEX_NAME = "index.json"
INDEX_VERSION = 1
MAX_INDEX_BYTES = 64 << 20  # a row a session, about 300 bytes: some 200,000 sessions
ID_RE = re.compile(r"[A-Za-z0-9][A-Za-z0-9_-]{0,63}")
_ROW_FIELDS = ("title", "created_at", "updated_at", "provider", "model", "message_count", "gist")


class Row(NamedTuple):
    """One session in the index: its file's key, then the header fields a listing shows.
    Written to index.json as a JSON array in this order."""

    ino: int
    mtime_ns: int
    size: int
    title: str
    created_at: str
    updated_at: str
    provider: str
    model: str
    message_count: int
    gist: str

    @property
    def key(self) -> Key:
        """The file key (inode, mtime_ns, size) the row was read under."""
        return (self.ino, self.mtime_ns, self.size)


class Listing:
    """The index file of one sessions folder, read through a cache of its last bytes."""

    def __init__(self, root: Path) -> None:
        self.root = root
        self._cache: tuple[bytes, dict[str, Row]] | None = None
        self._path: Path | None = None

    @property
    def path(self) -> Path:
        """Where the index of this folder is (looked up once)."""
        if self._path is None:
            self._path = index_file(self.root)
        return self._path

    def read(self) -> dict[str, Row]:
        """The index rows (a private copy); {} when the index is missing or damaged."""
        data = fileio.read_cache(self.path, MAX_INDEX_BYTES)
        if data is None:
            return {}
        if self._cache is not None and self._cache[0] == data:
            return dict(self._cache[1])
        try:
            doc = loads_bounded(data)
        except ValueError:
            doc = None
        if not isinstance(doc, dict):
            fileio.cache_damaged(self.path, "not a JSON object")
            return {}
        if doc.get("version") != INDEX_VERSION:
            return {}
        sessions = doc.get("sessions")
        if not isinstance(sessions, dict):
            return {}
        rows = {
            k: Row(*v)
            for k, v in sessions.items()
            if _valid_row(v) and is_session_file(k + ".json")
        }
        self._cache = (data, rows)
        return dict(rows)

    def apply(
        self, rows: dict[str, Row], gone: list[str], lock_timeout: float, *, verify: bool = False
    ) -> None:
        """Merge rows into index.json under its lock (waiting at most `lock_timeout`, 2 s at
        most). Best effort: the index is only a cache.

        With `verify`, a row is written only if its file still has that (inode, mtime, size),
        and an id is dropped only if its file is really gone (list() fixes race with saves).
        """
        lock = self.path.with_name(INDEX_NAME + ".lock")
        try:
            with fileio.locked(lock, min(lock_timeout, 2.0), "the session index"):
                index = self.read()
                for sid, row in rows.items():
                    if not verify or fileio.key_of(self._file(sid)) == row.key:
                        index[sid] = row
                for sid in gone:
                    if not verify or not self._file(sid).exists():
                        index.pop(sid, None)
                data = dumps({"version": INDEX_VERSION, "sessions": index})
                fileio.atomic_write(self.path, data, durable=False)
                self._cache = (data, index)
        except (OSError, StorageError):
            pass  # a stale or missing index is refreshed from the files by the next list()

    def _file(self, sid: str) -> Path:
        return self.root / f"{sid}.json"


def index_file(root: Path) -> Path:
    """The listing cache of the sessions folder `root` (in the cache folder)."""
    return derived_file(root, INDEX_NAME)


def is_session_file(name: str) -> bool:
    """`<id>.json` in the sessions folder (not the index itself)."""
    return name.endswith(".json") and name != INDEX_NAME and bool(ID_RE.fullmatch(name[:-5]))


def dumps(obj: Any) -> bytes:
    """Compact UTF-8 JSON, as the session and index files are written."""
    return json.dumps(obj, ensure_ascii=False, separators=(",", ":")).encode("utf-8")


def row(key: Key, head: dict[str, Any]) -> Row:
    """The index row of a session file with this key and header."""
    return Row(*key, *(head[f] for f in _ROW_FIELDS))


def header(sid: str, row: Row) -> dict[str, Any]:
    """The header a listing shows, from an index row."""
    head: dict[str, Any] = {"id": sid}
    head.update(zip(_ROW_FIELDS, row[3:], strict=True))
    return head


def _valid_row(row: Any) -> bool:
    return (
        type(row) is list
        and len(row) == 10  # a row of an older index (no gist) is read again from its file
        and type(row[0]) is int
        and type(row[1]) is int
        and type(row[2]) is int
        and all(type(x) is str for x in row[3:8])
        and type(row[8]) is int
        and type(row[9]) is str
    )
