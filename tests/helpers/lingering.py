"""The encoder process an `ask` left serving (memory.recall_keep), seen from outside: which
process listens on a cache folder's socket, and how to end it."""

from __future__ import annotations

import contextlib
import os
import signal
import socket
from pathlib import Path

from countbot_cli.memory.encoder_socket import peer, socket_path


def serving_pid(cache_folder: Path) -> int | None:
    """The pid of the process listening on the cache folder's encoder socket; None: none."""
    path = socket_path(cache_folder)
    if path is None:
        return None
    with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as sock:
        sock.settimeout(5)
        try:
            sock.connect(path)
        except OSError:
            return None
        who = peer(sock)
    return who[0] if who else None


def end_serving(cache_folder: Path) -> None:
    """End the process serving the cache folder's socket, if one does."""
    pid = serving_pid(cache_folder)
    if pid:
        with contextlib.suppress(OSError):
            os.kill(pid, signal.SIGKILL)
