"""Workspace confinement: the one function every path goes through (SPEC §6).

`resolve_in_workspace` expands a path against the workspace, resolves symlinks (so a link inside
that points out is outside) and decides containment with `Path.is_relative_to` on resolved paths,
component by component — never a string prefix, so `/tmp/ws-evil` is outside `/tmp/ws`.
Nothing here opens a file; it only stats path components to resolve them.

`sensitive_reason` marks paths that are never approved without asking (not by `--yes`,
`/tools auto`, "always" or `allow_outside_workspace`): hidden files and folders (`.env`,
`.ssh/`, `.git/hooks/`, `.bashrc`: secrets, and settings or hooks that other programs run),
files named like private keys, countbot's own files (config/own_files.py: its config can run
a command through `api_key_cmd`, its memory marks pin lines into every prompt), `/proc`
(countbot's own environment is readable there), and everything when the workspace is the root
folder. Inside the workspace only the part below
it counts (a workspace under `~/.config` is fine); outside, the whole path does. Reading them
sends secrets to the model; writing them can run code later. `hard_link_reason` marks a file
with several hard links: it may be a file outside the workspace under another name.
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
