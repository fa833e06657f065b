"""Race-free opening of workspace paths for the file tools and `exec`'s working_dir (SPEC §6).

`paths.resolve_in_workspace` decides from resolved paths whether a call stays inside the
workspace, but another process can swap a folder on the way for a symlink after that check. So
a path inside the workspace is never opened by name: each component of its resolved path is
opened relative to the folder before it, starting at the workspace root, with `O_NOFOLLOW` (a
component that has become a symlink fails instead of being followed), and the tools then work on
the descriptors: a read reads the opened file, a write creates its temporary file in the opened
folder and renames it there, `list_dir` scans the opened folder, a command starts in it.
A path outside the workspace (the user approved that exact call) is opened by name and follows
symlinks, as the prompt showed it.
"""

from __future__ import annotations

import errno
import os
import secrets
import stat
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

_DIR = os.O_RDONLY | os.O_DIRECTORY | os.O_CLOEXEC
SWAPPED = "a folder on the way became a symbolic link after the path was checked; not followed"
SWAPPED_FILE = "the file became a symbolic link after the path was checked; not followed"


@dataclass(frozen=True)
class Place:
    """A resolved path, and the resolved workspace root it must stay in (None: outside, and
    approved for this call, so it is opened by name)."""

    path: Path
    root: Path | None

    @property
    def confined(self) -> bool:
        return self.root is not None

    def parts(self) -> tuple[str, ...]:
        assert self.root is not None
        return self.path.relative_to(self.root).parts


def _step(fd: int, part: str, *, create: bool) -> int:
    """The folder `part` inside the open folder `fd`, never through a symlink."""
    try:
        return os.open(part, _DIR | os.O_NOFOLLOW, dir_fd=fd)
    except FileNotFoundError:
        if not create:
            raise
    try:
        os.mkdir(part, 0o777, dir_fd=fd)
    except FileExistsError:
        pass  # made meanwhile: opened (and checked) below
    return os.open(part, _DIR | os.O_NOFOLLOW, dir_fd=fd)


def _explain(e: OSError, fd: int, part: str, path: Path) -> OSError:
    """ELOOP/ENOTDIR on a component that is now a symlink: say that it was swapped."""
    if e.errno in (errno.ELOOP, errno.ENOTDIR):
        try:
            if stat.S_ISLNK(os.lstat(part, dir_fd=fd).st_mode):
                return OSError(errno.ELOOP, SWAPPED, str(path))
        except OSError:
            pass
    return e


def open_folder(place: Place, *, create: bool = False) -> int:
    """A descriptor of the folder `place` (made, with its parents, when `create`).
    FileNotFoundError, NotADirectoryError or OSError(ELOOP, SWAPPED) when it cannot be."""
    if not place.confined:
        if create:
            os.makedirs(place.path, exist_ok=True)
        return os.open(place.path, _DIR)
    assert place.root is not None
    fd = os.open(place.root, _DIR)
    try:
        for part in place.parts():
            try:
                nxt = _step(fd, part, create=create)
            except OSError as e:
                raise _explain(e, fd, part, place.path) from None
            os.close(fd)
            fd = nxt
    except BaseException:
        os.close(fd)
        raise
    return fd


@contextmanager
def folder_of(place: Place, *, create: bool = False) -> Iterator[tuple[int, str]]:
    """(descriptor of the folder holding `place`, the final name); closed afterwards.
    IsADirectoryError for the workspace folder itself (it has no file name to write)."""
    if place.confined and place.path == place.root:
        raise IsADirectoryError(errno.EISDIR, os.strerror(errno.EISDIR), str(place.path))
    parent = Place(place.path.parent, place.root)
    fd = open_folder(parent, create=create)
    try:
        yield fd, place.path.name
    finally:
        os.close(fd)


def open_in(fd: int, name: str, place: Place, flags: int, mode: int = 0o666) -> int:
    """Open `name` in the folder `fd`; inside the workspace a symlink there is never followed
    (the resolved path had none, so one now is a swap)."""
    if place.confined:
        flags |= os.O_NOFOLLOW
    try:
        return os.open(name, flags | os.O_CLOEXEC, mode, dir_fd=fd)
    except OSError as e:
        if place.confined and e.errno == errno.ELOOP:
            raise OSError(errno.ELOOP, SWAPPED_FILE, str(place.path)) from None
        raise


def lstat_in(fd: int, name: str) -> os.stat_result | None:
    """The entry `name` in folder `fd` itself (a symlink is not followed), or None if missing."""
    try:
        return os.lstat(name, dir_fd=fd)
    except FileNotFoundError:
        return None


def cwd_for(fd: int, place: Place) -> str:
    """A working directory for a child process that is exactly the open folder `fd`: on Linux
    `/proc/self/fd/N`, which the child resolves to that folder whatever happened to its path
    (the child changes directory before it closes inherited descriptors)."""
    magic = f"/proc/self/fd/{fd}"
    if place.confined and os.path.isdir(magic):
        return magic
    st, now = os.fstat(fd), os.stat(place.path)  # elsewhere: check the folder is still the one
    if (st.st_dev, st.st_ino) != (now.st_dev, now.st_ino):
        raise OSError(errno.ELOOP, SWAPPED, str(place.path))
    return str(place.path)


def write_replacing(fd: int, name: str, data: bytes, mode: int | None) -> None:
    """Replace `name` in folder `fd` with `data`: temporary file in that folder, fsync, rename
    there. `mode`: the permission bits to keep (an existing file's). A symlink named `name` is
    replaced, never followed."""
    tmp = f".{name}.countbot-{secrets.token_hex(4)}.tmp"
    flags = os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW | os.O_CLOEXEC
    tmp_fd = os.open(tmp, flags, 0o666, dir_fd=fd)
    try:
        with os.fdopen(tmp_fd, "wb") as f:
            f.write(data)
            f.flush()
            os.fsync(f.fileno())
            if mode is not None:
                os.fchmod(f.fileno(), mode)
        os.replace(tmp, name, src_dir_fd=fd, dst_dir_fd=fd)
    except BaseException:
        try:
            os.unlink(tmp, dir_fd=fd)
        except OSError:
            pass
        raise
