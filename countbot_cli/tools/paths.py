"""Workspace confinement: the one function every path goes through (SPEC §6).

`resolve_in_workspace` expands a path against the workspace, resolves symlinks (so a link inside
that points out is outside) and decides containment with `Path.is_relative_to` on resolved paths,
component by component — never a string prefix, so `/tmp/ws-evil` is outside `/tmp/ws`.
Nothing here opens a file; it only stats path components to resolve them.
"""

from __future__ import annotations

import os
from pathlib import Path


def resolve_in_workspace(path_str: str, workspace: Path) -> tuple[Path, bool]:
    """(absolute resolved path, whether it lies inside the workspace).

    Relative paths are taken against the workspace; `~` means the home folder. A path that does
    not exist yet is resolved through its nearest existing parent, so a symlinked folder on the
    way still counts. Raises ValueError for an empty path or one containing a NUL byte.
    """
    if "\x00" in path_str:
        raise ValueError("path contains a NUL byte; send the plain file path")
    if not path_str.strip():
        raise ValueError("path is empty; send a file path relative to the workspace")
    root = workspace.resolve()
    raw = Path(os.path.expanduser(path_str)) if path_str.startswith("~") else Path(path_str)
    candidate = raw if raw.is_absolute() else root / raw
    # realpath follows every symlink that exists, applies ".." after resolving the link before it
    # (as the OS does), and appends components that do not exist yet unchanged.
    resolved = Path(os.path.realpath(candidate))
    return resolved, resolved == root or resolved.is_relative_to(root)


def display_path(path: Path, workspace: Path) -> str:
    """A short form for messages: relative inside the workspace, absolute outside."""
    root = workspace.resolve()
    if path.is_relative_to(root):
        rel = path.relative_to(root)
        return str(rel) if str(rel) != "." else "."
    return str(path)
