"""Putting a hostile thing where countbot keeps a file of its own (a cache, a sidecar): a FIFO
(a reader that waits on it hangs), a symlink to /dev/zero (a reader that reads it whole fills
the memory), a folder, an empty file; the tests of the caches' opening share them."""

from __future__ import annotations

import os
from pathlib import Path

KINDS = ("fifo", "zero", "folder", "empty")


def damage(path: Path, kind: str) -> None:
    """Replace whatever is at `path` (or nothing) with a thing of `kind` (one of KINDS)."""
    path.parent.mkdir(parents=True, exist_ok=True)
    if path.is_dir() and not path.is_symlink():
        path.rmdir()
    else:
        path.unlink(missing_ok=True)
    if kind == "fifo":
        os.mkfifo(path)
    elif kind == "zero":
        path.symlink_to("/dev/zero")
    elif kind == "folder":
        path.mkdir()
    else:
        path.write_bytes(b"")
