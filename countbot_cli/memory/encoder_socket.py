"""Where an encoder process that outlives its countbot listens, and who may talk to it.

The socket is SOCKET_NAME in SOCKET_FOLDER of the model cache folder (memory/encoder_spec.py):
a folder of this user's, closed to everyone else (0700), made so by whoever gets there first
and refused by both sides otherwise. Both sides also ask the kernel who is at the other end
(SO_PEERCRED) and talk only to this user's processes, so another user can neither use the
encoders nor stand in for them. Where the kernel cannot say (no SO_PEERCRED), or the path is
too long for a unix socket, no encoder process outlives countbot.
"""

from __future__ import annotations

import os
import socket
import stat
import struct
from pathlib import Path

from countbot_cli.memory.encoder_spec import SOCKET_FOLDER, SOCKET_NAME, SOCKET_PATH_MAX


def socket_path(cache_folder: Path, make: bool = False) -> str | None:
    """The socket's path for this cache folder, its folder private (made when `make`); None
    when it cannot be used here."""
    if not hasattr(socket, "SO_PEERCRED") or not hasattr(socket, "AF_UNIX"):
        return None
    folder = os.path.join(os.path.abspath(cache_folder), SOCKET_FOLDER)
    path = os.path.join(folder, SOCKET_NAME)
    if len(os.fsencode(path)) > SOCKET_PATH_MAX:
        return None
    if make:
        try:
            os.makedirs(folder, mode=0o700, exist_ok=True)
        except OSError:
            return None
    try:
        st = os.lstat(folder)
    except OSError:
        return None
    private = st.st_uid == os.getuid() and not st.st_mode & 0o077
    return path if stat.S_ISDIR(st.st_mode) and private else None


def peer(sock: socket.socket) -> tuple[int, int] | None:
    """The process id and user id at the other end; None when the kernel does not say."""
    try:
        creds = sock.getsockopt(socket.SOL_SOCKET, socket.SO_PEERCRED, struct.calcsize("3i"))
    except OSError:
        return None
    pid, uid, _gid = struct.unpack("3i", creds)
    return pid, uid


def peer_is_us(sock: socket.socket) -> bool:
    """Whether the process at the other end runs as this user."""
    who = peer(sock)
    return who is not None and who[1] == os.getuid()
