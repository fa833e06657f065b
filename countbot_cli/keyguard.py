"""The API key kept out of reach of the commands countbot runs (Linux, as a non-root user).

An approved `exec` command runs with the user's rights, and without more it could read the key
from countbot's own process: `cat /proc/$PPID/environ` or `ps eww $PPID` show the environment
block the process started with, whatever was removed from `os.environ` since (`unsetenv` does
not touch that block). So:

- `undumpable()` (called first thing by the entry point) makes countbot's process
  non-dumpable (`prctl(PR_SET_DUMPABLE, 0)`): its `/proc/PID/environ`, `mem`, `fd/` and the
  like are then owned by root, a process of the same user can no longer open them or ptrace
  countbot, and no core dump is written (it would hold the key). The process itself still
  reads its own `/proc/self` (the tools' `/proc/self/fd/N` working folders keep working), and
  a command it starts is dumpable again once it execs, so its own `/proc` is unchanged.
  A debugger or profiler (gdb, py-spy) cannot attach to countbot either.
- `forget()` removes from `os.environ` the variables a key was read from, once the settings
  hold it, so no child countbot starts inherits them, whatever their name.

Neither is a sandbox: root (or a process with CAP_SYS_PTRACE) still reads everything; on other
platforms `undumpable` does nothing; the key stays in countbot's memory and in whatever file
the user keeps it in (the config file, what `api_key_cmd` reads), which a command can read.
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
