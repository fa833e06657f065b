"""What a save does to the search index: the store calls `index_saved` after it wrote a
session and `forget` after it deleted one or moved a damaged one aside (store.py).

Best effort and brief: the index is a cache the next search reconciles with the folder, so a
busy (another process is building it: `BUSY_TIMEOUT`), damaged or unwritable index is left to
that search, and a save never fails because of it. Cheap for a long session: the process keeps
its last save's chunks of `RECENT` sessions, so a new turn hashes only the chunks it changed
(search_index.chunks_of), and one connection a sessions folder (`FOLDERS` of them), so a save
does not pay for opening the database and for the checkpoint SQLite runs when the last
connection closes. The connection is opened again when the index file was replaced (a search
rebuilt it).
"""

from __future__ import annotations

import os
import threading
from collections import OrderedDict
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING, TypeVar

from countbot_cli.conversation.sessions import search_index
from countbot_cli.conversation.sessions.search_index import Chunk, SessionFiles
from countbot_cli.conversation.sessions.session import Session
from countbot_cli.errors import DamagedDataError
from countbot_cli.fileio import Key

if TYPE_CHECKING:
    import sqlite3

_K = TypeVar("_K")
_V = TypeVar("_V")

BUSY_TIMEOUT = 0.5  # seconds a save waits for the index at most
RECENT = 2  # sessions whose chunks are kept from their last save
FOLDERS = 2  # sessions folders whose index connection is kept open

_mutex = threading.Lock()  # one save at a time touches the caches and the connections
_recent: OrderedDict[tuple[str, str], list[Chunk]] = OrderedDict()
_open: OrderedDict[str, tuple[int, sqlite3.Connection]] = OrderedDict()


def index_saved(store: SessionFiles, session: Session, key: Key) -> None:
    """Put `session`, just saved as the file with `key`, in the index of its folder."""
    memo = (str(store.root), session.id)
    with _mutex:
        chunks = search_index.chunks_of(session, _recent.pop(memo, []))
        if _write(store, lambda con: search_index.put(con, session.id, key, session, chunks)):
            _keep(_recent, memo, chunks, RECENT)


def forget(store: SessionFiles, sid: str) -> None:
    """Drop `sid` from the index of its folder, if there is an index."""
    if not search_index.index_path(store.root).exists():
        return
    with _mutex:
        _write(store, lambda con: search_index.drop(con, sid))


def release(root: Path) -> None:
    """Close this process's connection to the index of the folder `root` (before the index
    is removed; also what a process ending does)."""
    with _mutex:
        _close(str(search_index.index_path(root)))


def _write(store: SessionFiles, change: Callable[[sqlite3.Connection], object]) -> bool:
    """Run `change(con)` in a transaction on the folder's index; False when it could not."""
    import sqlite3

    path = search_index.index_path(store.root)
    try:
        con = _connection(str(path))
        with search_index.txn(con):
            change(con)
    except (sqlite3.Error, OSError, DamagedDataError, search_index.StaleIndex, ValueError):
        _close(str(path))
        return False
    return True


def _connection(path: str) -> sqlite3.Connection:
    held = _open.get(path)
    try:
        ino = os.stat(path).st_ino
    except FileNotFoundError:
        ino = -1
    if held is not None and held[0] == ino:
        _open.move_to_end(path)
        return held[1]
    _close(path)
    con = search_index.open_index(Path(path), BUSY_TIMEOUT, any_thread=True)
    for old in _keep(_open, path, (os.stat(path).st_ino, con), FOLDERS):
        old[1].close()
    return con


def _close(path: str) -> None:
    held = _open.pop(path, None)
    if held is not None:
        held[1].close()


def _keep(cache: OrderedDict[_K, _V], key: _K, value: _V, size: int) -> list[_V]:
    """Put `key` last in `cache`; returns what fell out past `size`."""
    cache[key] = value
    cache.move_to_end(key)
    return [cache.popitem(last=False)[1] for _ in range(len(cache) - size)]
