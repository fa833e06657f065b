"""Workspace confinement: the one function every path goes through (SPEC §6).

`resolve_in_workspace` resolves a path against the workspace, symlinks included, and decides
containment on resolved paths component by component, never by string prefix. It only stats;
nothing here opens a file. `sensitive_reason` names the paths that are never approved without
asking (hidden files, key files, countbot's own files, `/proc`), and `hard_link_reason` a file
with several hard links. Which and why: docs/design/tools.md.
"""

from __future__ import annotations

import os
import re
import stat
from pathlib import Path

from countbot_cli.config.own_files import OwnFiles

# file names that usually hold a private key or a password
_SECRET_NAME = re.compile(
    r"id_(rsa|dsa|ecdsa|ed25519)(_sk)?|.+\.(pem|key|p12|pfx|jks|keystore|kdbx)"
    r"|credentials(\.json)?|secrets?\.(json|ya?ml|toml)",
    re.IGNORECASE,
)


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
    try:
        resolved = Path(os.path.realpath(candidate))
    except OSError as e:  # a component was swapped (link <-> folder) while it was resolved
        why = f"the path changed while it was checked ({e.strerror}); try again"
        raise OSError(e.errno, why, str(candidate)) from None
    return resolved, resolved == root or resolved.is_relative_to(root)


def sensitive_reason(path: Path, workspace: Path, protected: OwnFiles | None = None) -> str | None:
    """Why a resolved path must always be asked about, or None."""
    own = protected.reason(path) if protected is not None else None
    if own is not None:
        return own
    root = workspace.resolve()
    if path == root:
        return None
    if path.is_relative_to(root):
        if root == Path(root.anchor):  # countbot started in / with no workspace configured
            return "the workspace is the root folder, so no path is confined; set tools.workspace"
        parts = path.relative_to(root).parts
    else:
        parts = path.parts[1:]
        if parts[:1] == ("proc",):
            return "process information: /proc shows countbot's own environment and API keys"
    if any(part.startswith(".") for part in parts):
        return "a hidden file or folder: these hold secrets, settings and hooks"
    if parts and _SECRET_NAME.fullmatch(parts[-1]):
        return "named like a key or password file"
    return None


def hard_link_reason(path: Path) -> str | None:
    """Why writing the existing file at resolved `path` must be asked about: it has several
    hard links, so it may be a file outside the workspace under another name. None otherwise."""
    try:
        st = os.stat(path)
    except OSError:
        return None
    if stat.S_ISREG(st.st_mode) and st.st_nlink > 1:
        return f"the file has {st.st_nlink} hard links, so it may also be a file elsewhere"
    return None


def display_path(path: Path, workspace: Path) -> str:
    """A short form for messages: relative inside the workspace, absolute outside."""
    root = workspace.resolve()
    if path.is_relative_to(root):
        rel = path.relative_to(root)
        return str(rel) if str(rel) != "." else "."
    return str(path)
