"""The copies file-sync tools make of a file changed on two machines, and git's conflict marks.

    Syncthing   NAME.sync-conflict-YYYYMMDD-HHMMSS-DEVICE.EXT (a copy of a copy: tags repeat)
    Dropbox     NAME (conflicted copy YYYY-MM-DD).EXT, NAME (HOST's conflicted copy ...).EXT
    Nextcloud   NAME (conflicted copy [USER ]YYYY-MM-DD HHMMSS).EXT
                (older clients: NAME_conflict-YYYYMMDD-HHMMSS.EXT)
    iCloud      NAME 2.EXT (3, 4, ...)

`original_name` reads such a name back (None for any other, and for a copy countbot moved aside:
`<copy>.merged-<time>`); `git_sides` takes apart a file git wrote both versions into;
`FolderWatch` says when to look again (a copy appearing changes its folder's mtime). Nothing here
reads a file's content or imports a library.
"""

from __future__ import annotations

import os
import re
from collections.abc import Iterable
from pathlib import Path
from typing import NamedTuple

from countbot_cli.textsafe import LazyPattern

_TAGS = (  # compiled when a name is first read (not at start-up)
    ("Syncthing", LazyPattern(r"\.sync-conflict-\d{8}-\d{6}-[A-Za-z0-9]+")),
    ("Dropbox", LazyPattern(r" \([^()]*conflicted copy \d{4}-\d{2}-\d{2}(?: \(\d+\))?\)")),
    ("Nextcloud", LazyPattern(r" \(conflicted copy (?:[^()]* )?\d{4}-\d{2}-\d{2} \d{6}\)")),
    ("Nextcloud", LazyPattern(r"_conflict-\d{8}-\d{6}")),
    ("iCloud", LazyPattern(r" (?:[2-9]|[1-9]\d+)")),
)
MERGED_TAG = "merged"  # a copy merged and moved aside: <copy>.merged-<UTC time>


class Copy(NamedTuple):
    """A conflict copy's name, the name of the file it is a copy of, and the tool that made it."""

    name: str
    original: str
    tool: str


def maybe_copy(name: str) -> bool:
    """A cheap first look: could `name` be a conflict copy at all? (Every tool's tag holds
    "conflict" or a space.)"""
    return "conflict" in name or " " in name


def original_name(name: str) -> Copy | None:
    """The file `name` is a sync tool's conflict copy of, or None when it is not one."""
    stem, dot, ext = name.rpartition(".")
    if not dot or not stem:
        stem, ext = name, ""
    tool = ""
    while True:
        for which, tag in _TAGS:
            found = _tag_at_end(tag.re, stem)
            if found is not None and found > 0:
                stem, tool = stem[:found], tool or which
                break
        else:
            break
    if not tool:
        return None
    return Copy(name, f"{stem}.{ext}" if ext else stem, tool)


def copies_of(name: str, names: Iterable[str]) -> list[Copy]:
    """The conflict copies of the file `name` among `names` (a folder's entries), by name."""
    out = [c for n in names if (c := original_name(n)) is not None and c.original == name]
    return sorted(out)


def _tag_at_end(tag: re.Pattern[str], stem: str) -> int | None:
    """Where `tag` starts when it ends `stem` (its last match), else None."""
    last = None
    for m in tag.finditer(stem):
        if m.end() == len(stem):
            last = m.start()
    return last


class FolderWatch:
    """Whether a folder changed since the last look for conflict copies in it: the first
    look, then whenever its mtime moved (a file made, renamed or removed in it)."""

    def __init__(self) -> None:
        self._seen: int | None = None

    def changed(self, folder: Path) -> bool:
        try:
            mtime = os.stat(folder).st_mtime_ns
        except OSError:
            return False
        if mtime == self._seen:
            return False
        self._seen = mtime
        return True

    def wrote(self, folder: Path) -> None:
        """This process just wrote into `folder`: its own write is no reason to look again (a
        copy landing in the same instant waits for the next change or the next process)."""
        try:
            self._seen = os.stat(folder).st_mtime_ns
        except OSError:
            self._seen = None

    def again(self) -> None:
        """Look at the next call whatever the folder's mtime (a look that could not finish)."""
        self._seen = None


# ---- git ----

OURS, BASE, THEIRS, END = "<<<<<<<", "|||||||", "=======", ">>>>>>>"


def git_sides(text: str) -> tuple[str, str] | None:
    """(ours, theirs): the two versions of a file git left with conflict marks in it (the
    common text in both, a diff3 base section dropped); None when it has no whole conflict."""
    ours: list[str] = []
    theirs: list[str] = []
    state = ""  # "": common text; then OURS, BASE, THEIRS inside a conflict
    found = False
    for line in text.splitlines(keepends=True):
        mark = line[:7]
        if mark == OURS and state == "":
            state, found = OURS, True
        elif mark == BASE and state == OURS:
            state = BASE
        elif mark == THEIRS and line.rstrip("\r\n") == THEIRS and state in (OURS, BASE):
            state = THEIRS
        elif mark == END and state == THEIRS:
            state = ""
        elif state == "":
            ours.append(line)
            theirs.append(line)
        elif state == OURS:
            ours.append(line)
        elif state == THEIRS:
            theirs.append(line)
    if not found or state != "":
        return None
    return "".join(ours), "".join(theirs)
