"""An encoder process that outlives the countbot that started it, for the next ones.

Loading the two encoders takes a new process about a quarter of a second of a warm `ask`'s
half second; an Ollama model stays loaded for minutes after a request for the same reason.
With `memory.recall_keep` above zero, the encoder process also listens on a unix socket
(memory/encoder_socket.py: a private folder, this user's processes only) and serves every
connection as it serves its pipe, one request at a time across all of them; once nobody is
connected for `keep` seconds, or another encoder process has taken the socket's place, it
removes its socket and exits. A connection is greeted with the ready line the pipe got.
"""

from __future__ import annotations

import contextlib
import os
import socket
import threading
import time
from collections.abc import Callable
from typing import IO

from countbot_cli.memory.encoder_socket import peer_is_us, socket_path

Serve = Callable[[IO[bytes], IO[bytes]], None]  # serves one client: its requests, its replies
TICK = 1.0  # seconds between looks at whether it is time to go


class Lingering:
    """The socket, the clients connected (the pipe's countbot counts as one) and the idle clock."""

    def __init__(self, path: str, keep: float, greeting: bytes, serve: Serve) -> None:
        """Listen at `path` (OSError when it cannot): whatever socket is there is replaced."""
        with contextlib.suppress(FileNotFoundError):
            os.unlink(path)
        self.sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        self.sock.bind(path)
        self.sock.listen(16)
        self.path, self.keep, self.greeting, self.serve = path, keep, greeting, serve
        self.inode = os.stat(path).st_ino
        self.cond = threading.Condition()
        self.clients = 1  # the countbot on the pipe
        self.last = time.monotonic()
        threading.Thread(target=self._accept, daemon=True).start()

    def pipe_closed(self) -> None:
        self._left()

    def linger(self) -> None:
        """Wait until nobody has been connected for `keep` seconds, or the socket is not this
        process's any more; then remove it."""
        with self.cond:
            while True:
                self.cond.wait(TICK)
                if self.clients:
                    continue
                if time.monotonic() - self.last >= self.keep or not self._ours():
                    break
        if self._ours():
            with contextlib.suppress(OSError):
                os.unlink(self.path)

    def _ours(self) -> bool:
        try:
            return os.stat(self.path).st_ino == self.inode
        except OSError:
            return False

    def _accept(self) -> None:
        while True:
            try:
                conn, _ = self.sock.accept()
            except OSError:
                return
            if not peer_is_us(conn):
                conn.close()
                continue
            with self.cond:
                self.clients += 1
            threading.Thread(target=self._client, args=(conn,), daemon=True).start()

    def _client(self, conn: socket.socket) -> None:
        try:
            with conn, conn.makefile("rb") as reader, conn.makefile("wb") as writer:
                writer.write(self.greeting)
                writer.flush()
                self.serve(reader, writer)
        except (OSError, ValueError, SystemExit):
            pass  # this client is gone or broke the protocol; the others go on
        finally:
            self._left()

    def _left(self) -> None:
        with self.cond:
            self.clients -= 1
            self.last = time.monotonic()
            self.cond.notify_all()


def listen(cache_folder: str, keep: float, greeting: bytes, serve: Serve) -> Lingering | None:
    """A Lingering on the cache folder's socket; None when there is none to be had."""
    from pathlib import Path

    path = socket_path(Path(cache_folder), make=True)
    if path is None or keep <= 0:
        return None
    try:
        return Lingering(path, keep, greeting, serve)
    except OSError:
        return None
