"""SessionStore: one JSON file a session, atomic writes, sidecar locks, an index, quarantine.

The sessions folder (0700, files 0600) holds `<id>.json` files, damaged ones moved aside as
`.corrupt-<time>`, and nothing else: it may be shared by a file-sync tool, so the locks, the
listing cache `index.json` and the search index live in the cache folder (config/derived.py).
`update()` is the only way to change a saved session: lock, re-read, apply, write atomically,
so two processes appending to one session never lose each other's messages. The index is
derived and refreshed whenever it disagrees with the files. Long sessions: unchanged bytes skip
the parse and only changed chunks are re-encoded. The layout and why: docs/design/storage.md.
"""

from __future__ import annotations

import builtins
import contextlib
import os
import threading
import time
from collections import OrderedDict
from collections.abc import Callable
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any, NoReturn, TypeVar

from countbot_cli import conflicts, fileio
from countbot_cli.config import derived
from countbot_cli.conversation.sessions import listing, merge
from countbot_cli.conversation.sessions.listing import ID_RE, Row, is_session_file
from countbot_cli.conversation.sessions.session import (
    SchemaVersionError,
    Session,
    header_from_dict,
    new_session_id,
)
from countbot_cli.errors import DamagedDataError, NotUsableError, StorageError, UsageError
from countbot_cli.fileio import Key
from countbot_cli.jsonsafe import loads_bounded
from countbot_cli.messages import utc_now

T = TypeVar("T")

TEMP_MAX_AGE = 3600.0  # seconds before a leftover temp file is removed
CACHED_SESSIONS = 2
_CHUNK = 256  # list items encoded together and reused while unchanged
_LIST_FIELDS = ("tool_conversations", "archived", "messages")  # written last, in this order
Chunks = dict[str, list[tuple[list[Any], bytes]]]


@dataclass
class _Snapshot:
    """A session file as this store last wrote or read it. Owned by the store, never shared."""

    data: bytes
    doc: dict[str, Any]
    chunks: Chunks = field(default_factory=dict)


class SessionStore:
    def __init__(
        self,
        root: Path,
        *,
        lock_timeout: float = 10.0,
        on_notice: Callable[[str], None] | None = None,
        workspace: str = "",
    ) -> None:
        self.root = Path(root)
        self.workspace = workspace  # recorded in a session created without one
        self.lock_timeout = lock_timeout
        self._notice = on_notice or (lambda _msg: None)
        self._reported: set[str] = set()
        self._root_ready = False
        self._snaps: OrderedDict[str, _Snapshot] = OrderedDict()
        self._snaps_mutex = threading.Lock()  # one store may be shared by threads
        self._listing = listing.Listing(self.root)
        self._watch = conflicts.FolderWatch()  # when to look for conflict copies again
        self._merging = threading.Lock()

    # ---- public API ----

    def path(self, sid: str) -> Path:
        _check_id(sid)
        return self.root / f"{sid}.json"

    def create(self, session: Session) -> None:
        """Save a new session (in this store's `workspace` unless it names one); refuses to
        overwrite an existing one."""
        session.workspace = session.workspace or self.workspace
        path = self.path(session.id)
        self._ensure_root()
        with self._session_lock(session.id):
            if path.exists():
                raise StorageError(f"session {session.id} already exists ({path})")
            self._save(session, None)

    def load(self, sid: str) -> Session:
        path = self.path(sid)
        self._conflicts()
        for _attempt in range(3):
            try:
                data, key = fileio.read_keyed(path)
            except FileNotFoundError:
                raise UsageError(f"no session with id '{sid}'") from None
            except OSError as e:
                raise fileio.read_error(path, e, "a session file") from e
            try:
                return self._parse(sid, data)[0]
            except ValueError as e:
                if self._git_merged(sid, data, key, locked=False):
                    continue
                moved = self._quarantine(sid, key, e, locked=False)
                if moved is not None:
                    raise _damaged(path, moved, e) from e
        raise StorageError(f"{path} keeps changing while being read; try again")

    def update(self, sid: str, fn: Callable[[Session], T], *, touch: bool = True) -> T:
        """Lock, re-read, apply `fn`, write atomically, unlock. Returns what `fn` returns.

        `touch` sets `updated_at` (renames and summaries pass False: they are not activity).
        If `fn` raises, nothing is written. `fn` gets fresh objects (keeping them is harmless) and
        runs under the lock, so keep it quick; never call update() on the same id inside it.
        """
        path = self.path(sid)
        gone = StorageError(f"session {sid} no longer exists (deleted by another process?)")
        if not self.root.is_dir():
            raise gone
        self._conflicts()
        with self._session_lock(sid):
            try:
                data, key = fileio.read_keyed(path)
            except FileNotFoundError:
                raise gone from None
            except OSError as e:
                raise fileio.read_error(path, e, "a session file") from e
            try:
                if self._git_merged(sid, data, key, locked=True):
                    data, key = fileio.read_keyed(path)
                session, snap = self._parse(sid, data)
            except ValueError as e:
                moved = self._quarantine(sid, key, e, locked=True)
                raise _damaged(path, moved, e) from e
            result = fn(session)
            if session.id != sid:
                raise ValueError("update() must not change the session id")
            if touch:
                session.updated_at = utc_now()
            self._save(session, snap)
        return result

    def rename(self, sid: str, title: str) -> None:
        clean = " ".join(title.split())
        if not clean:
            raise UsageError("a session title cannot be empty")

        def apply(s: Session) -> None:
            s.title = clean

        self.update(sid, apply, touch=False)

    def set_summary(self, sid: str, text: str) -> None:
        """Set the session summary; an empty text clears it."""

        def apply(s: Session) -> None:
            s.summary = text.strip()

        self.update(sid, apply, touch=False)

    def delete(self, sid: str) -> None:
        path = self.path(sid)
        if not self.root.is_dir():
            raise UsageError(f"no session with id '{sid}'")
        with self._session_lock(sid):
            try:
                path.unlink()
            except FileNotFoundError:
                raise UsageError(f"no session with id '{sid}'") from None
            except OSError as e:
                raise StorageError(f"cannot delete {path}: {e.strerror or e}") from e
            self._remember(sid, None)
            fileio.fsync_dir(self.root)
            self._listing.apply({}, [sid], self.lock_timeout)
            self._unindex(sid)
            with contextlib.suppress(OSError):
                # safe while we hold it: a process waiting on the old inode re-reads, finds no file
                _lock_path(path).unlink()

    def list(self) -> list[dict[str, Any]]:
        """Headers of every readable session, most recently updated first.

        Stats the files and reuses index rows whose (inode, mtime, size) match; reads only new or
        changed files. A damaged file is quarantined and reported through `on_notice`.
        """
        rows = self._scan()
        ordered = sorted(
            rows.items(), key=lambda kv: (kv[1].updated_at, kv[1].mtime_ns, kv[0]), reverse=True
        )
        return [listing.header(sid, row) for sid, row in ordered]

    def keyed_headers(self) -> dict[str, tuple[Key, dict[str, Any]]]:
        """Every readable session's file key (inode, mtime_ns, size) and header, from the same
        listing as `list()` (index rows reused, damaged files quarantined). For caches kept
        beside the sessions (the search index): a file is unchanged while its key is."""
        return {sid: (r.key, listing.header(sid, r)) for sid, r in self._scan().items()}

    def resolve(self, ref: str) -> str:
        """A full id from a full id, any unique prefix, or 'latest'. UsageError otherwise."""
        ref = ref.strip()
        if not ref:
            raise UsageError("a session id is required")
        self._conflicts()
        if ref.lower() == "latest":
            headers = self.list()
            if not headers:
                raise UsageError("there are no saved sessions yet")
            return str(headers[0]["id"])
        if ID_RE.fullmatch(ref) and ref != "index" and self.path(ref).is_file():
            return ref
        matches = [sid for sid in self._ids() if sid.lower().startswith(ref.lower())]
        if len(matches) == 1:
            return matches[0]
        if not matches:
            raise UsageError(
                f"no session matches '{ref}'", hint="`countbot sessions list` shows them"
            )
        self._ambiguous(ref, matches)

    # ---- reading and writing one session ----

    def _parse(self, sid: str, data: bytes) -> tuple[Session, _Snapshot]:
        """The session in `data` (ValueError if damaged), reusing the snapshot when it matches."""
        snap = self._snaps.get(sid)
        if snap is None or snap.data != data:
            snap = _Snapshot(data, _loads(data))
        try:
            session = Session.from_dict(snap.doc)
        except SchemaVersionError as e:
            raise NotUsableError(
                f"{self.path(sid)} was written by a newer countbot ({e})",
                hint="upgrade countbot to open it",
            ) from e
        session.id = sid  # the file name is authoritative (a copied file keeps working)
        self._remember(sid, snap)
        return session, snap

    def _save(self, session: Session, prev: _Snapshot | None) -> None:
        path = self.path(session.id)
        doc = session.to_dict()
        data, chunks = _encode(doc, prev.chunks if prev else {})
        try:
            key = fileio.atomic_write(path, data, durable=True)
            self._watch.wrote(self.root)
        except OSError as e:
            self._remember(session.id, None)
            raise StorageError(f"could not save {path}: {e.strerror or e}") from e
        self._remember(session.id, _Snapshot(data, doc, chunks))
        self._listing.apply({session.id: listing.row(key, session.header())}, [], self.lock_timeout)
        from countbot_cli.conversation.sessions import search_saves  # sqlite3: on a save only

        search_saves.index_saved(self, session, key)

    def _remember(self, sid: str, snap: _Snapshot | None) -> None:
        """Keep (or with None, forget) the snapshot of a session; only the last few are kept."""
        with self._snaps_mutex:
            if snap is None:
                self._snaps.pop(sid, None)
                return
            self._snaps[sid] = snap
            self._snaps.move_to_end(sid)
            while len(self._snaps) > CACHED_SESSIONS:
                self._snaps.popitem(last=False)

    def _quarantine(self, sid: str, key: Key, err: Exception, *, locked: bool) -> Path | None:
        """Move a damaged file aside (never overwriting anything). None if it changed meanwhile."""
        path = self.path(sid)
        self._remember(sid, None)
        with contextlib.nullcontext() if locked else self._session_lock(sid):
            if fileio.key_of(path) != key:
                return None  # replaced by a writer since we read it: not the damaged file
            try:
                target = fileio.move_aside(path)
            except OSError as e:
                raise StorageError(
                    f"{path} is damaged ({err}) and could not be moved aside: {e}"
                ) from e
        self._listing.apply({}, [sid], self.lock_timeout)
        self._unindex(sid)
        return target

    def _unindex(self, sid: str) -> None:
        """The session's rows out of the search index (search_saves.py), if there is one."""
        from countbot_cli.conversation.sessions import search_saves  # sqlite3: on a delete only

        search_saves.forget(self, sid)

    def _session_lock(self, sid: str) -> contextlib.AbstractContextManager[None]:
        return fileio.locked(_lock_path(self.path(sid)), self.lock_timeout, f"session {sid}")

    def _ensure_root(self) -> None:
        if self._root_ready:
            return
        try:
            self.root.mkdir(mode=0o700, parents=True, exist_ok=True)
            st = self.root.stat()
            if st.st_mode & 0o077 and st.st_uid == getattr(os, "getuid", lambda: -1)():
                os.chmod(self.root, 0o700)  # the sessions folder is private (SPEC §8)
        except OSError as e:
            raise fileio.folder_error(self.root, e, "sessions folder") from e
        self._root_ready = True

    # ---- listing and the index ----

    def _ids(self) -> builtins.list[str]:
        try:
            with os.scandir(self.root) as it:
                return [e.name[:-5] for e in it if is_session_file(e.name)]
        except FileNotFoundError:
            return []
        except OSError as e:
            raise fileio.folder_error(self.root, e, "sessions folder", verb="read") from e

    def _ambiguous(self, ref: str, matches: builtins.list[str]) -> NoReturn:
        titles = {h["id"]: h["title"] for h in self.list()}
        shown = [f"{sid} ({titles.get(sid) or 'untitled'})" for sid in sorted(matches)[:8]]
        more = f" and {len(matches) - 8} more" if len(matches) > 8 else ""
        raise UsageError(f"'{ref}' matches {len(matches)} sessions: {', '.join(shown)}{more}")

    def _scan(self) -> dict[str, Row]:
        try:
            with os.scandir(self.root) as it:
                entries = builtins.list(it)
            if self._conflicts([e.name for e in entries]):
                with os.scandir(self.root) as it:
                    entries = builtins.list(it)
        except FileNotFoundError:
            return {}
        except OSError as e:
            raise fileio.folder_error(self.root, e, "sessions folder", verb="read") from e
        index = self._listing.read()
        rows: dict[str, Row] = {}
        fixes: dict[str, Row] = {}
        now = time.time()
        for entry in entries:
            name = entry.name
            if name.startswith(".") and name.endswith(fileio.TEMP_SUFFIX):
                fileio.remove_if_older(Path(entry.path), TEMP_MAX_AGE, now)
                continue
            if not is_session_file(name):
                continue
            sid = name[:-5]
            try:
                st = entry.stat()
            except FileNotFoundError:
                continue
            row = index.get(sid)
            if row is None or row.key != (st.st_ino, st.st_mtime_ns, st.st_size):
                row = self._read_row(sid)
                if row is None:
                    continue
                fixes[sid] = row
            rows[sid] = row
        gone = [sid for sid in index if sid not in rows]
        if fixes or gone:
            self._listing.apply(fixes, gone, self.lock_timeout, verify=True)
        return rows

    def _read_row(self, sid: str) -> Row | None:
        """The index row of one file, read from the file itself; None if unreadable."""
        path = self.path(sid)
        try:
            data, key = fileio.read_keyed(path)
        except OSError:
            return None
        try:
            return listing.row(key, header_from_dict(_loads(data)))
        except SchemaVersionError as e:
            self._report(
                str(path),
                f"{path} was written by a newer countbot ({e}); skipped (upgrade countbot to open it)",
            )
        except ValueError as e:
            try:
                if self._git_merged(sid, data, key, locked=False):
                    return self._read_row(sid)
                moved = self._quarantine(sid, key, e, locked=False)
            except StorageError as err:  # busy or cannot be moved: skip it this time
                self._report(str(path), err.user_message())
                return None
            if moved is not None:
                self._report(str(moved), _damaged(path, moved, e).user_message())
        return None

    def notice(self, message: str) -> None:
        """Say something to the user through the store's `on_notice` (caches beside it use it)."""
        self._notice(message)

    # ---- what a file-sync tool left: conflict copies, git's marks (merge.py) ----

    def _conflicts(self, names: builtins.list[str] | None = None) -> bool:
        """Merge the conflict copies among `names` (the folder's entries; None: list them when
        the folder changed since the last look). True when there were some."""
        if names is None:
            if not self._watch.changed(self.root):
                return False
            names = os.listdir(self.root)
        found = [n for n in names if conflicts.maybe_copy(n)]
        if not found or not self._merging.acquire(blocking=False):
            return False  # none, or this store is merging them (a merge's own update)
        try:
            merge.reconcile(self, found)
        finally:
            self._merging.release()
        return True

    def _git_merged(self, sid: str, data: bytes, key: Key, *, locked: bool) -> bool:
        """The file holds git's conflict marks: its two versions merged (or the other kept as
        a fork) and written. False when it holds none (or changed since it was read)."""
        if merge.git_versions(data, sid) is None:
            return False
        with contextlib.nullcontext() if locked else self._session_lock(sid):
            data, now = fileio.read_keyed(self.path(sid))
            versions = merge.git_versions(data, sid) if now == key else None
            if versions is None:
                return now != key
            ours, theirs = versions
            both = merge.merged(ours, theirs)
            self._save(both or ours, None)
        said = f"resolved the git conflict in session {sid}"
        if both is None:
            fork = replace(
                theirs, id=new_session_id(), title=merge.FORK_TITLE.format(title=theirs.title)
            )
            self.create(fork)
            said += (
                f": the two sides cannot be put in one order, theirs is kept as session {fork.id}"
            )
        self._notice(said)
        return True

    def _report(self, key: str, message: str) -> None:
        if key not in self._reported:
            self._reported.add(key)
            self._notice(message)


# ---- helpers ----


def _check_id(sid: str) -> None:
    if not isinstance(sid, str) or not ID_RE.fullmatch(sid) or sid == "index":
        raise UsageError(f"'{sid}' is not a valid session id")


def _lock_path(path: Path) -> Path:
    return derived.lock_file(path)


def _loads(data: bytes) -> Any:
    """Parse a session or index file: too deep / too long numbers are damage like any other
    (jsonsafe's limits; a ValueError, so the file is quarantined)."""
    return loads_bounded(data)


def _encode(doc: dict[str, Any], prev: Chunks) -> tuple[bytes, Chunks]:
    """`doc` as compact JSON, its list fields last and encoded in chunks of _CHUNK items.

    A chunk equal to the one at the same place in `prev` reuses its bytes, so saving a new turn
    re-encodes only the tail. The bytes equal json.loads-compatible output of the whole doc.
    """
    scalars = {k: v for k, v in doc.items() if k not in _LIST_FIELDS}
    parts = [listing.dumps(scalars)[:-1]]
    chunks: Chunks = {}
    for name in _LIST_FIELDS:
        items = doc.get(name) or []
        old = prev.get(name, [])
        mine = []
        for n, start in enumerate(range(0, len(items), _CHUNK)):
            part = items[start : start + _CHUNK]
            if n < len(old) and old[n][0] == part:
                mine.append(old[n])
            else:
                mine.append((part, listing.dumps(part)[1:-1]))
        chunks[name] = mine
        sep = b"," if len(parts) > 1 or scalars else b""
        parts.append(sep + f'"{name}":['.encode() + b",".join(c for _, c in mine) + b"]")
    parts.append(b"}")
    return b"".join(parts), chunks


def _damaged(path: Path, moved: Path | None, err: Exception) -> StorageError:
    where = f"; moved it to {moved}" if moved else ""
    return DamagedDataError(f"session file {path} is damaged ({err}){where}")
