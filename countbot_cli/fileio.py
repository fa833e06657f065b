"""Durable, private files: atomic writes, sidecar locks, no-clobber moves, and the one way to read
a file that may be hostile (no third-party imports).

Writes: temporary file in the same folder, write, fsync, `os.replace`, fsync the folder; files
0600. Locks are `flock` on a separate `*.lock` file, because `os.replace` swaps the data file's
inode; the holder writes its host and pid into it. A damaged file is moved aside, never
overwritten. Reads of a file countbot did not just write go through `open_regular`: without
blocking, stat'ed on the open descriptor (a FIFO, a device or a folder is refused before any
read), at most a given number of bytes. A cache (`read_cache`) is also never a symbolic link and
never empty; a damaged one is said once, moved aside when it is not a file, and built again by
its owner.
"""

from __future__ import annotations

import contextlib
import errno
import os
import secrets
import stat
import sys
import time
from collections.abc import Callable, Iterator
from datetime import datetime, timezone
from pathlib import Path
from typing import Any

from countbot_cli.errors import (
    DamagedDataError,
    NotUsableError,
    SessionLockedError,
    StorageError,
)
from countbot_cli.jsonsafe import loads_bounded
from countbot_cli.textsafe import sanitize

Key = tuple[int, int, int]  # (inode, mtime_ns, size): a file is unchanged while this is equal

TEMP_SUFFIX = ".tmp"


def read_keyed(path: Path) -> tuple[bytes, Key]:
    """The file's bytes and the (inode, mtime, size) of exactly that version."""
    with open(path, "rb") as f:
        st = os.fstat(f.fileno())
        return f.read(), (st.st_ino, st.st_mtime_ns, st.st_size)


class NotRegularFile(OSError):
    """A path that is a FIFO, a device, a socket or a folder where a file was expected."""

    def __init__(self, path: Path, kind: str) -> None:
        super().__init__(errno.EINVAL, f"is {kind}, not a regular file", str(path))
        self.kind = kind


_KINDS = (
    (stat.S_ISFIFO, "a named pipe (FIFO)"),
    (stat.S_ISCHR, "a character device"),
    (stat.S_ISBLK, "a block device"),
    (stat.S_ISSOCK, "a socket"),
    (stat.S_ISDIR, "a folder"),
    (stat.S_ISLNK, "a symbolic link"),
)


def kind_of(mode: int) -> str | None:
    """What a file of this `st_mode` is when it is not a regular file ("a named pipe (FIFO)",
    "a folder", …); None for a regular file."""
    if stat.S_ISREG(mode):
        return None
    return next((name for test, name in _KINDS if test(mode)), "not a file")


def not_a_file(path: Path) -> str | None:
    """What stands at `path` (itself, not what a link points at) when it is not a regular
    file; None for a regular file or nothing at all."""
    try:
        return kind_of(os.lstat(path).st_mode)
    except OSError:
        return None


def read_capped(path: Path, limit: int, *, follow_links: bool = True) -> tuple[bytes, int]:
    """(at most the first `limit` bytes of the regular file `path`, its size), for a file that
    may be hostile (`open_regular`): a FIFO or a device raises `NotRegularFile` instead of
    hanging, and a huge file costs `limit` bytes. Other problems raise OSError
    (FileNotFoundError, PermissionError, …)."""
    fd = open_regular(path, follow_links=follow_links)
    try:
        size = os.fstat(fd).st_size
        parts: list[bytes] = []
        left = limit
        while left > 0 and (chunk := os.read(fd, min(left, 1 << 16))):
            parts.append(chunk)
            left -= len(chunk)
    finally:
        os.close(fd)
    return b"".join(parts), size


def open_regular(path: Path, *, follow_links: bool = True) -> int:
    """A read-only descriptor of the regular file `path`: opened without blocking and stat'ed
    on the descriptor before any read, so a FIFO, a device, a socket or a folder raises
    `NotRegularFile` at once; with `follow_links=False` a symbolic link (the last part of the
    path) does too. The caller closes it."""
    flags = os.O_RDONLY | getattr(os, "O_NONBLOCK", 0) | getattr(os, "O_NOCTTY", 0)
    if not follow_links:
        flags |= getattr(os, "O_NOFOLLOW", 0)
    try:
        fd = os.open(path, flags | getattr(os, "O_CLOEXEC", 0))
    except OSError as e:
        if e.errno == errno.ELOOP and not follow_links:
            raise NotRegularFile(path, "a symbolic link") from None
        raise
    try:
        kind = kind_of(os.fstat(fd).st_mode)
        if kind is not None:
            raise NotRegularFile(path, kind)
    except BaseException:
        os.close(fd)
        raise
    return fd


# ---- caches: files countbot can build again ----

SMALL_CACHE = 1 << 20  # bytes: a cache of a row a model or a server (token ratios, windows)
_DAMAGE_SAID: set[str] = set()


def read_cache(path: Path, limit: int, notice: Callable[[str], None] | None = None) -> bytes | None:
    """The bytes of the cache file `path`, or None when there is nothing to use: no file, one
    that cannot be read (silently: it is only a cache), or a damaged one (`cache_damaged`: a
    symbolic link, a FIFO, a device, a folder, an empty file, one over `limit` bytes), which
    the caller then builds again. Never blocks, never reads more than `limit` + 1 bytes."""
    try:
        data, _size = read_capped(path, limit + 1, follow_links=False)
    except FileNotFoundError:
        return None
    except NotRegularFile as e:
        cache_damaged(path, e.kind, notice)
        return None
    except OSError:
        return None
    if not data:
        cache_damaged(path, "empty", notice)
        return None
    if len(data) > limit:
        cache_damaged(path, f"over {limit:,} bytes", notice)
        return None
    return data


def read_json_cache(
    path: Path, limit: int, notice: Callable[[str], None] | None = None
) -> dict[str, Any]:
    """The JSON object of the cache file `path` (`read_cache`); {} when there is none or it is
    damaged (text that is not a JSON object is, too)."""
    data = read_cache(path, limit, notice)
    if data is None:
        return {}
    try:
        value = loads_bounded(data)
    except ValueError:
        value = None
    if not isinstance(value, dict):
        cache_damaged(path, "not a JSON object", notice)
        return {}
    return value


def cache_damaged(path: Path, why: str, notice: Callable[[str], None] | None = None) -> None:
    """The cache file `path` is `why` ("empty", "a named pipe (FIFO)", …): said once per file
    and process (on stderr unless `notice` says it elsewhere); what is not a regular file is
    moved aside (never deleted), so the rebuilt cache can take its place."""
    moved = ""
    if not_a_file(path) is not None:
        with contextlib.suppress(OSError, StorageError):
            moved = f": moved aside to {move_aside(path, 'damaged').name}"
    if str(path) in _DAMAGE_SAID:
        return
    _DAMAGE_SAID.add(str(path))
    (notice or _say)(f"the cache {path} was {why}{moved}; countbot builds it again")


def _say(text: str) -> None:
    sys.stderr.write(f"countbot: {sanitize(text)}\n")
    sys.stderr.flush()


def read_error(path: Path, e: OSError, what: str = "") -> StorageError:
    """Why `path` could not be read: DamagedDataError (exit 2) when a folder or another thing
    that is not a file stands where countbot keeps `what`, NotUsableError (exit 2) when a file
    stands in its folder's way or permission is refused, StorageError otherwise."""
    if isinstance(e, IsADirectoryError) or e.errno == errno.EISDIR:
        return DamagedDataError(
            f"{path} is a folder, not {what or 'a file'}", hint="move it away or rename it"
        )
    if e.errno == errno.ENOTDIR:
        return folder_error(path.parent, e, f"folder of {what or path.name}", verb="read")
    if e.errno in (errno.EACCES, errno.EPERM):
        return NotUsableError(
            f"cannot read {path}: {e.strerror or e}", hint="check its permissions"
        )
    return StorageError(f"cannot read {path}: {e.strerror or e}")


def folder_error(folder: Path, e: OSError, what: str, verb: str = "make") -> StorageError:
    """Why the `what` (e.g. "sessions folder") at `folder` cannot be made or read: when a file
    stands in its way or access is refused, NotUsableError (exit 2) naming the folder and what
    to do; StorageError (exit 1) for anything else."""
    head = f"cannot {verb} the {what} {folder}"
    if e.errno in (errno.ENOTDIR, errno.EEXIST):
        chain = [*reversed(folder.parents), folder]
        file = next((p for p in chain if p.exists() and not p.is_dir()), None)
        if file is not None:
            return NotUsableError(
                f"{head}: {file} is a file, not a folder",
                hint="move that file away, or choose another folder in the config file",
            )
    if e.errno in (errno.EACCES, errno.EPERM, errno.EROFS):
        return NotUsableError(
            f"{head}: {e.strerror or e}",
            hint="check the permissions, or choose another folder in the config file",
        )
    return StorageError(f"{head}: {e.strerror or e}")


def key_of(path: Path) -> Key | None:
    try:
        st = os.stat(path)
    except OSError:
        return None
    return (st.st_ino, st.st_mtime_ns, st.st_size)


def temp_name(path: Path) -> Path:
    """`.<name>.<random>.tmp` beside `path`: hidden, unique, recognisable as a leftover."""
    return path.with_name(f".{path.name}.{secrets.token_hex(4)}{TEMP_SUFFIX}")


def atomic_write(path: Path, data: bytes, *, durable: bool = True) -> Key:
    """Replace `path` with `data` atomically (mode 0600). Returns the new file's key.

    `durable` adds the fsyncs (file, then folder); a cache file may skip them.
    """
    tmp = temp_name(path)
    fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL | getattr(os, "O_CLOEXEC", 0), 0o600)
    try:
        try:
            if hasattr(os, "fchmod"):
                os.fchmod(fd, 0o600)  # whatever the umask
            view = memoryview(data)
            while view:
                view = view[os.write(fd, view) :]
            if durable:
                os.fsync(fd)
            st = os.fstat(fd)
        finally:
            os.close(fd)
        os.replace(tmp, path)
    except BaseException:
        with contextlib.suppress(OSError):
            os.unlink(tmp)
        raise
    if durable:
        fsync_dir(path.parent)
    return (st.st_ino, st.st_mtime_ns, st.st_size)


def fsync_dir(folder: Path) -> None:
    """Make a rename or unlink in `folder` durable (POSIX; a no-op where unsupported)."""
    if sys.platform == "win32":
        return
    try:
        fd = os.open(folder, os.O_RDONLY)
    except OSError:
        return
    try:
        os.fsync(fd)
    except OSError:
        pass  # some filesystems cannot fsync a folder
    finally:
        os.close(fd)


def move_aside(path: Path, tag: str = "corrupt") -> Path:
    """Rename `path` to `<name>.<tag>-<UTC time>[-n]`, never overwriting anything. The new path."""
    stamp = datetime.now(timezone.utc).strftime("%Y%m%dT%H%M%SZ")
    for n in range(1000):
        target = path.with_name(f"{path.name}.{tag}-{stamp}" + (f"-{n}" if n else ""))
        try:
            # fails if target exists: nothing is ever overwritten; a link is moved as a link
            os.link(path, target, follow_symlinks=False)
        except FileExistsError:
            continue
        except OSError:
            if target.exists():
                continue
            os.rename(path, target)  # a filesystem without hard links
        else:
            os.unlink(path)
        fsync_dir(path.parent)
        return target
    raise StorageError(f"cannot find a free name to move {path} aside")


def remove_if_older(path: Path, max_age: float, now: float | None = None) -> None:
    """Delete a leftover (e.g. a temp file of a killed writer) older than `max_age` seconds."""
    with contextlib.suppress(OSError):
        if (now or time.time()) - os.stat(path).st_mtime > max_age:
            os.unlink(path)


@contextlib.contextmanager
def locked(path: Path, timeout: float, what: str) -> Iterator[None]:
    """Hold an exclusive lock on the sidecar file `path`, waiting up to `timeout` seconds.

    The holder writes its host and pid into the file (`HOST PID`), so a process that gives up
    says whose the lock is. Raises SessionLockedError ("<what> is busy in another countbot
    process (pid N on this machine)") on timeout. The lock is per open file: the same process
    locking twice waits for itself, so don't nest.
    """
    try:
        fd = os.open(path, os.O_RDWR | os.O_CREAT | getattr(os, "O_CLOEXEC", 0), 0o600)
    except OSError as e:
        raise StorageError(f"cannot open the lock file {path}: {e.strerror or e}") from e
    try:
        deadline = time.monotonic() + timeout
        delay = 0.002
        while not _try_lock(fd, path):
            if time.monotonic() >= deadline:
                raise SessionLockedError(
                    f"{what} is busy in another countbot process{_holder(fd)}",
                    hint=f"waited {timeout:g} s for {path.name}",
                )
            time.sleep(delay)
            delay = min(delay * 2, 0.05)
        with contextlib.suppress(OSError):  # only ever said when someone waits too long
            os.ftruncate(fd, 0)
            _write_at_start(fd, f"{host_name()} {os.getpid()}\n".encode())
        yield
    finally:
        os.close(fd)  # closing releases the lock (so does the death of the process)


def host_name() -> str:
    """This machine's name, as lock files record it (no spaces)."""
    name = os.uname().nodename if hasattr(os, "uname") else os.environ.get("COMPUTERNAME", "")
    return "".join(name.split()) or "localhost"


def lock_holder(data: bytes) -> tuple[str, int] | None:
    """(host, pid) recorded in a lock file's bytes; None when it records none."""
    parts = data.decode("utf-8", "replace").split()
    if len(parts) != 2 or not parts[1].isdigit() or not parts[0].isprintable():
        return None
    return parts[0], int(parts[1])


def _write_at_start(fd: int, data: bytes) -> None:
    if hasattr(os, "pwrite"):
        os.pwrite(fd, data, 0)
    else:  # pragma: no cover - Windows
        os.lseek(fd, 0, os.SEEK_SET)
        os.write(fd, data)


def _read_start(fd: int, n: int) -> bytes:
    if hasattr(os, "pread"):
        return os.pread(fd, n, 0)
    os.lseek(fd, 0, os.SEEK_SET)  # pragma: no cover - Windows
    return os.read(fd, n)  # pragma: no cover


def _holder(fd: int) -> str:
    """` (pid N on this machine)` / ` (pid N on HOST)`: who holds the lock on `fd`, if said."""
    try:
        found = lock_holder(_read_start(fd, 300))
    except OSError:
        return ""
    if found is None:
        return ""
    host, pid = found
    where = "this machine" if host == host_name() else host
    return f" (pid {pid} on {where})"


if sys.platform == "win32":  # pragma: no cover - exercised on Windows only
    import msvcrt

    def _try_lock(fd: int, path: Path) -> bool:
        try:
            msvcrt.locking(fd, msvcrt.LK_NBLCK, 1)
        except OSError:
            return False
        return True

else:
    import fcntl

    def _try_lock(fd: int, path: Path) -> bool:
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            return False
        except OSError as e:  # e.g. ENOLCK on a network filesystem without locks
            raise StorageError(f"cannot lock {path}: {e.strerror or e}") from e
        return True
