"""What countbot derives from a data folder, and where it lives: never in that folder.

A data folder (sessions, MEMORY.md's folder, the data folder) may be shared by a file-sync
tool, so what countbot can rebuild from it (search index and vectors, listing cache, recall
vectors, token and window caches) and its lock files live in the cache folder, one folder per
data folder (`home.derived_dir`); a copy an older countbot left behind is moved once, and an
unwritable cache folder leaves them where they were. Invariant: `derived_file` and `lock_file`
are where such a path is computed; each derived file's module calls one of them in exactly one
function. docs/sync.md says what a user sees.
"""

from __future__ import annotations

import contextlib
import errno
import os
import shutil
import stat
import threading
from pathlib import Path

from countbot_cli import fileio
from countbot_cli.config.home import derived_dir

SQLITE_SIDES = ("-wal", "-shm", "-journal")  # beside an SQLite database: moved with it

_mutex = threading.Lock()
_checked: set[tuple[str, str]] = set()  # (source folder, derived file) looked after this process
_folders: dict[str, Path | None] = {}  # cache folder -> itself, None when it cannot be written


def derived_file(source: Path, name: str) -> Path:
    """The file `name` derived from the folder `source`, in the cache folder (its folder made,
    private). The first call of a process for it moves a copy left at `source/name` there."""
    folder = _folder(Path(source))
    if folder is None:
        return Path(source) / name
    path = folder / name
    if _first(source, path):
        adopt(Path(source) / name, path)
    return path


def lock_file(data_file: Path) -> Path:
    """The lock file of `data_file` (a session, MEMORY.md), in the cache folder: a lock made in
    a synced folder would travel to another machine. A lock file an older countbot left beside
    `data_file` is removed the first time a process asks."""
    beside = data_file.with_name(data_file.name + ".lock")
    folder = _folder(data_file.parent)
    if folder is None:
        return beside
    path = folder / beside.name
    if _first(data_file.parent, path):
        _remove_file(beside)
    return path


def adopt(old: Path, new: Path) -> None:
    """Move the file an older countbot kept at `old` to `new` (with an SQLite database's
    journal files), or remove it when `new` exists already. Anything at `old` that is not a
    regular file is left alone. Best effort: a derived file is rebuilt when it is missing."""
    if not _is_file(old):
        return
    moved = not os.path.lexists(new) and _move(old, new)
    if not (moved or os.path.lexists(new)):
        return  # the cache folder cannot be written: the old copy is left, and ignored
    _remove_file(old)
    for side in SQLITE_SIDES:
        was = Path(f"{old}{side}")
        if moved and side == "-wal" and _is_file(was):
            with contextlib.suppress(OSError):
                os.replace(was, f"{new}{side}")  # the database's last commits
        _remove_file(was)


def _first(source: Path, path: Path) -> bool:
    key = (str(source), str(path))
    with _mutex:
        if key in _checked:
            return False
        _checked.add(key)
        return True


def _folder(source: Path) -> Path | None:
    """The cache folder of `source`, made (private) the first time a process asks; None when
    it cannot be made or written."""
    folder = derived_dir(source)
    key = str(folder)
    with _mutex:
        if key in _folders:
            return _folders[key]
    try:
        folder.mkdir(mode=0o700, parents=True, exist_ok=True)
        usable = os.access(folder, os.W_OK | os.X_OK)
    except OSError:
        usable = False
    with _mutex:
        _folders[key] = folder if usable else None
    return _folders[key]


def _is_file(path: Path) -> bool:
    try:
        return stat.S_ISREG(os.lstat(path).st_mode)
    except OSError:
        return False


def _move(old: Path, new: Path) -> bool:
    """Rename `old` to `new`; across filesystems, copy it (privately, atomically). True when
    `new` holds it."""
    try:
        os.rename(old, new)
        return True
    except OSError as e:
        if e.errno != errno.EXDEV:
            return False
    tmp = fileio.temp_name(new)
    try:
        shutil.copyfile(old, tmp)
        os.chmod(tmp, 0o600)
        os.replace(tmp, new)
    except OSError:
        _remove_file(tmp)
        return False
    return True


def _remove_file(path: Path) -> None:
    if _is_file(path):
        with contextlib.suppress(OSError):
            os.unlink(path)
