"""The API key kept out of reach of the commands countbot runs (Linux, as a non-root user).

`undumpable()`, called first thing by the entry point, makes countbot's process non-dumpable
(`prctl(PR_SET_DUMPABLE, 0)`), so a command running with the user's rights cannot read the
environment block countbot started with through /proc, nor attach to it; `forget()` removes
the variables a key was read from, so no child inherits them. Neither is a sandbox: root still
reads everything, and other platforms get only `forget`. Why and what still reads the key:
docs/design/tools.md.
"""

from __future__ import annotations

import sys
from collections.abc import Callable, Iterable, MutableMapping
from typing import Protocol

PR_SET_DUMPABLE = 4
PR_GET_DUMPABLE = 3


def undumpable() -> bool:
    """Make this process non-dumpable on Linux; True when it is now."""
    if not sys.platform.startswith("linux"):
        return False
    try:
        prctl = _libc_prctl()
        if prctl(PR_SET_DUMPABLE, 0, 0, 0, 0) != 0:
            return False  # e.g. a seccomp filter refused it
        return prctl(PR_GET_DUMPABLE, 0, 0, 0, 0) == 0
    except (OSError, AttributeError):  # no libc, or no prctl in it
        return False


def _libc_prctl() -> Callable[..., int]:
    """libc's prctl (the program's own symbols, libc's among them: `ctypes.CDLL(None)`)."""
    import ctypes

    function: Callable[..., int] = ctypes.CDLL(None, use_errno=True).prctl
    return function


class KeyHolder(Protocol):  # config.providers.ProviderConfig
    @property
    def api_key(self) -> str | None: ...
    @property
    def api_key_source(self) -> str: ...  # "env NAME" when read from variable NAME


def forget(environ: MutableMapping[str, str], holders: Iterable[KeyHolder]) -> None:
    """Remove from `environ` (os.environ: unset for every child started after) each variable
    a key of `holders` was read from."""
    for holder in holders:
        if holder.api_key and holder.api_key_source.startswith("env "):
            environ.pop(holder.api_key_source.removeprefix("env "), None)
