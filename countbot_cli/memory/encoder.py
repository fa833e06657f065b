"""countbot's side of recall's encoder process (memory/encoder_child.py).

`Encoder` starts the process (in a session of its own: the terminal's Ctrl-C is countbot's),
sends it one request at a time and reads its replies without trusting them: a reply line is
bounded (MAX_REPLY), and anything but the answer asked for (not JSON, another id, vectors of
the wrong size or not finite, an error, silence past the timeout, an exit) is the process's
death: it is killed and `EncoderDied` says how. Invariant: countbot never waits on the encoders
except through `select` with a timeout, so a signal ends countbot whatever they are doing.
"""

from __future__ import annotations

import base64
import binascii
import contextlib
import json
import math
import os
import select
import signal
import socket
import subprocess
import sys
import tempfile
import time
from array import array
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import IO, TYPE_CHECKING, Any

from countbot_cli import CHILD_FOLDER
from countbot_cli.memory.encoder_socket import peer_is_us, socket_path
from countbot_cli.memory.encoder_spec import (
    BATCH,
    DIM,
    LINE_CHARS,
    MAX_RANK_REQUEST,
    MAX_REQUEST,
    MODEL_TAG,
    PROTOCOL,
)

if TYPE_CHECKING:
    import numpy as np
    from numpy.typing import NDArray

CHILD_MODULE = "countbot_cli.memory.encoder_child"
MAX_REPLY = 2 * BATCH * DIM * 4 + 4096  # bytes: BATCH float32 vectors in base64, with room
STDERR_TAIL = 2000  # bytes of the process's stderr kept to say why it ended
MAX_NOTICES = 4  # lines the process may say while it loads
ATTACH_TIMEOUT = 0.5  # seconds a serving process has to greet (it does at once when it is up)


def child_command() -> tuple[list[str], dict[str, str], str]:
    """The encoder child's command line, environment and working folder: this interpreter
    without `site` (`-S`: no .pth files or import hooks run at each start), the import path
    this process found its packages on as PYTHONPATH, and the folder countbot_cli is in as its
    working folder — `-m` puts that folder first on the import path, and the user's (a
    `json.py` where `countbot ask` runs) is never imported."""
    own = CHILD_FOLDER
    path = [own, *(p for p in sys.path if p and p != own)]
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(path)}
    return [sys.executable, "-S", "-m", CHILD_MODULE], env, own


class EncoderDied(Exception):
    """The encoder process ended, misbehaved or went silent (then it was killed)."""


class Encoder:
    """One running encoder process."""

    def __init__(
        self, cache_folder: Path | None, command: Sequence[str] = (), keep: float = 0.0
    ) -> None:
        """Start the process (`command`, by default the encoder child); the recall model's load
        is kept in `cache_folder` (None: nowhere); `keep`: seconds it serves the next countbots
        once this one is done with it (memory/encoder_linger.py; 0: it ends with this one)."""
        self._stderr: IO[bytes] | None = tempfile.TemporaryFile()  # noqa: SIM115 (read at death)
        args, env, cwd = (list(command), None, None) if command else child_command()
        if cache_folder is not None:
            args += [os.path.abspath(cache_folder), *([repr(keep)] if keep > 0 else [])]
        self.keep = keep if cache_folder is not None else 0.0
        self._sock: socket.socket | None = None
        self.proc: subprocess.Popen[bytes] | None = subprocess.Popen(
            args,
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=self._stderr,
            env=env,
            cwd=cwd,
            start_new_session=True,
        )
        assert self.proc.stdin is not None and self.proc.stdout is not None
        self._stdin: IO[bytes] = self.proc.stdin
        self._fd = self.proc.stdout.fileno()
        self._buf = bytearray()
        self._ids = 0
        self.ready = False

    @classmethod
    def attach(cls, cache_folder: Path, timeout: float = ATTACH_TIMEOUT) -> Encoder | None:
        """The encoder process a countbot before this one left serving (memory.recall_keep),
        ready; None when there is none, it is another user's, or it does not greet with these
        models and this protocol within `timeout` seconds."""
        path = socket_path(cache_folder)
        if path is None:
            return None
        sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        try:
            sock.settimeout(timeout)
            sock.connect(path)
            sock.settimeout(None)
        except OSError:
            sock.close()
            return None
        if not peer_is_us(sock):
            sock.close()
            return None
        enc = cls.__new__(cls)
        enc._stderr = None
        enc.keep, enc.proc, enc._sock = 0.0, None, sock
        enc._stdin = sock.makefile("wb")
        enc._fd = sock.fileno()
        enc._buf, enc._ids, enc.ready = bytearray(), 0, False
        try:
            msg = enc._read(timeout)
        except EncoderDied:
            return None
        ours = msg.get("model") == MODEL_TAG and msg.get("protocol") == PROTOCOL
        if msg.get("ready") is not True or not ours:
            enc.kill()
            return None
        enc.ready = True
        return enc

    @property
    def attached(self) -> bool:
        """Served by a process another countbot started (not this one's child)."""
        return self.proc is None

    def wait_ready(self, timeout: float, notice: Callable[[str], None]) -> None:
        """Wait for the models to load, passing on what loading says (at most MAX_NOTICES
        lines); EncoderDied when they do not load."""
        deadline = time.monotonic() + timeout
        for _ in range(MAX_NOTICES + 1):
            msg = self._read(max(deadline - time.monotonic(), 0.0))
            if not isinstance(msg.get("notice"), str):
                break
            notice(msg["notice"][:500])
        ours = msg.get("model") == MODEL_TAG and msg.get("protocol") == PROTOCOL
        if msg.get("ready") is not True or not ours:
            raise self._death(f"did not start ({str(msg.get('error', msg))[:300]})")
        self.ready = True

    def embed(self, texts: Sequence[str], query: bool, timeout: float) -> NDArray[np.float32]:
        """One row a text (its start: LINE_CHARS characters at most go over the pipe)."""
        import numpy as np

        request = {"texts": [t[:LINE_CHARS] for t in texts], "query": query}
        msg = self._ask(request, MAX_REQUEST, timeout, MAX_REPLY)
        data = self._data(msg, "vectors")
        if len(data) != len(texts) * DIM * 4:
            raise self._death("vectors of the wrong size")
        vectors = np.frombuffer(data, dtype="<f4").reshape(len(texts), DIM)
        if not np.isfinite(vectors).all():
            raise self._death("vectors that are not numbers")
        return vectors

    def rank(
        self,
        file: Path,
        keys: Sequence[bytes],
        fixed: Sequence[bytes],
        question: str,
        timeout: float,
    ) -> array[float] | None:
        """Recall's score of each line (`keys`: their vectors' keys in `file`; `fixed`: small
        talk's) for `question`, computed by the process (memory/encoder_rank.py); None when it
        has not every vector."""
        request = {
            "rank": {
                "file": os.fspath(file),
                "keys": base64.b64encode(b"".join(keys)).decode(),
                "fixed": base64.b64encode(b"".join(fixed)).decode(),
                "question": question[:LINE_CHARS],
            }
        }
        msg = self._ask(request, MAX_RANK_REQUEST, timeout, len(keys) * 6 + MAX_REPLY)
        if isinstance(msg.get("missing"), int) and "scores" not in msg:
            return None
        data = self._data(msg, "scores")
        if len(data) != len(keys) * 4:
            raise self._death("scores of the wrong size")
        out = array("f")
        out.frombytes(data)
        if sys.byteorder != "little":
            out.byteswap()
        if not all(map(math.isfinite, out)):
            raise self._death("scores that are not numbers")
        return out

    def close(self) -> None:
        """Done with the process. One that serves the next countbots (`keep`, or another's) is
        left to: its stdin or the connection closed. Else it is killed once its models are
        loaded (it holds nothing unsaved); while it is still loading, its stdin is closed, so
        that a first load finishes writing the model cache on its own and then exits."""
        if self.proc is not None and not self.keep and (self.ready or self.proc.poll() is not None):
            self.kill()
        else:
            self._hang_up()

    def kill(self) -> None:
        """End the child at once (one served by another's process: the connection)."""
        if self.proc is None:
            self._hang_up()
            return
        with contextlib.suppress(OSError):
            self.proc.kill()
        with contextlib.suppress(subprocess.TimeoutExpired):
            self.proc.wait(5)

    # -- internals --

    def _hang_up(self) -> None:
        """Close this side: the child's stdin, or the connection to another's process."""
        with contextlib.suppress(OSError, ValueError):
            self._stdin.close()
        if self._sock is not None:
            self._sock.close()

    def _ask(
        self, request: dict[str, Any], bound: int, timeout: float, reply_bound: int
    ) -> dict[str, Any]:
        """Send one request; its reply (EncoderDied: none, another's, or an error)."""
        self._ids += 1
        line = json.dumps({"id": self._ids, **request}, ensure_ascii=False)
        data = line.encode("utf-8", "surrogatepass")
        if len(data) >= bound:
            raise ValueError("a request over the encoder's bound")
        try:
            self._stdin.write(data + b"\n")
            self._stdin.flush()
        except (OSError, ValueError):
            raise self._death("stopped reading") from None
        msg = self._read(timeout, reply_bound)
        if msg.get("id") != self._ids or "error" in msg:
            raise self._death(f"answered {str(msg.get('error', 'out of turn'))[:300]}")
        return msg

    def _data(self, msg: dict[str, Any], field: str) -> bytes:
        if not isinstance(msg.get(field), str):
            raise self._death(f"answered without {field}")
        try:
            return base64.b64decode(msg[field], validate=True)
        except (binascii.Error, ValueError):
            raise self._death("a malformed reply") from None

    def _read(self, timeout: float, bound: int = MAX_REPLY) -> dict[str, Any]:
        """The next reply line as a JSON object (at most `bound` bytes; EncoderDied otherwise)."""
        deadline = time.monotonic() + timeout
        scanned = 0
        while (i := self._buf.find(b"\n", scanned)) < 0:
            scanned = len(self._buf)
            if scanned > bound:
                raise self._death("a reply over its bound")
            left = deadline - time.monotonic()
            if left <= 0 or not select.select([self._fd], [], [], left)[0]:
                raise self._death(f"no answer within {timeout:.0f} s")
            try:
                data = os.read(self._fd, 1 << 16)
            except OSError:
                data = b""
            if not data:
                raise self._death("ended")
            self._buf += data
        line = bytes(self._buf[:i])
        del self._buf[: i + 1]
        try:
            msg = json.loads(line)
        except ValueError:
            raise self._death("a malformed reply") from None
        if not isinstance(msg, dict):
            raise self._death("a malformed reply")
        return msg

    def _death(self, what: str) -> EncoderDied:
        """Kill the process; why it ended (its exit, its last line on stderr)."""
        self.kill()
        if self.proc is None or self._stderr is None:
            return EncoderDied(f"the encoder process another countbot left {what}")
        code = self.proc.returncode
        how = what
        if code is not None and code < 0 and code != -signal.SIGKILL:
            how += f", killed by signal {-code}"
        self._stderr.seek(0, os.SEEK_END)
        self._stderr.seek(max(self._stderr.tell() - STDERR_TAIL, 0))
        tail = self._stderr.read().decode("utf-8", "replace").strip().splitlines()
        if tail:
            how += f": {tail[-1].strip()[:200]}"
        return EncoderDied(f"the encoder process {how}")
