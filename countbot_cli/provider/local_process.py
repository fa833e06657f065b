"""countbot's side of the embedded model's process (provider/local_child.py, SPEC §9).

- One model process per countbot process, shared by every LocalProvider (`model_process`): it
  is started on first use and stopped when countbot ends (atexit; and it exits by itself when
  its stdin closes, so even a SIGKILL of countbot ends it). It runs in its own session, so the
  terminal's Ctrl-C reaches countbot only: countbot then cancels the generation.
- JSON lines over pipes, one request at a time (`busy`: a second request from the thread that
  is generating is an error, other threads wait their turn).
- `cancel`: a cancel message, which the child checks between tokens; if it has not stopped
  within CANCEL_GRACE (a long prompt being evaluated), it is killed and the next request starts
  a new one.
- When the process dies (llama.cpp's SIGSEGV, the OOM killer), reading raises `ChildDied`,
  which says how (the signal, or the exit code and its last line on stderr); the next
  `model_process()` starts a new one.
"""

from __future__ import annotations

import atexit
import json
import os
import select
import signal
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

CHILD_MODULE = "countbot_cli.provider.local_child"
START_TIMEOUT = 300.0  # seconds for the child to import llama_cpp (a cold disk, a busy machine)
CANCEL_GRACE = 2.0  # seconds the child has to stop after a cancel before it is killed
STDERR_TAIL = 4000  # bytes of the child's stderr read to explain an exit


class ChildDied(Exception):
    """The model process ended while countbot waited for it."""

    def __init__(self, returncode: int, stderr: str) -> None:
        super().__init__(returncode)
        self.returncode = returncode
        self.stderr = stderr

    def how(self) -> str:
        """E.g. "killed by SIGSEGV" or "exited with code 1: MemoryError"."""
        if self.returncode < 0:
            try:
                name = signal.Signals(-self.returncode).name
            except ValueError:
                name = f"signal {-self.returncode}"
            return f"killed by {name}"
        last = next((ln for ln in reversed(self.stderr.splitlines()) if ln.strip()), "")
        return f"exited with code {self.returncode}" + (f": {last.strip()[:200]}" if last else "")


class _Lines:
    """Lines from a pipe, with a timeout (select on the raw fd, so nothing hides in a buffer)."""

    def __init__(self, fd: int) -> None:
        self.fd = fd
        self.buf = bytearray()

    def next(self, timeout: float | None) -> bytes | None:
        """The next line; None when `timeout` seconds pass first; EOFError at the end."""
        deadline = None if timeout is None else time.monotonic() + timeout
        while (i := self.buf.find(b"\n")) < 0:
            if deadline is not None:
                ready, _, _ = select.select([self.fd], [], [], max(deadline - time.monotonic(), 0))
                if not ready:
                    return None
            data = os.read(self.fd, 65536)
            if not data:
                raise EOFError
            self.buf += data
        line = bytes(self.buf[:i])
        del self.buf[: i + 1]
        return line


class ModelProcess:
    """A running local_child process."""

    def __init__(self) -> None:
        started = time.perf_counter()
        self._stderr = tempfile.TemporaryFile()  # noqa: SIM115 (read when the process dies)
        self.proc = subprocess.Popen(
            [sys.executable, "-m", CHILD_MODULE],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=self._stderr,
            start_new_session=True,  # the terminal's Ctrl-C is countbot's to handle
        )
        assert self.proc.stdin is not None and self.proc.stdout is not None
        self._stdin = self.proc.stdin
        self._lines = _Lines(self.proc.stdout.fileno())
        self._ids = 0
        self._lock = threading.Lock()
        self._owner: int | None = None
        if self._read_any(START_TIMEOUT) is None:  # no {"ready": true}: it hangs
            self.kill()
            raise self._died()
        self.start_seconds = time.perf_counter() - started
        self._start_reported = False

    @property
    def alive(self) -> bool:
        return self.proc.poll() is None

    @property
    def pid(self) -> int:
        return self.proc.pid

    def take_start_seconds(self) -> float:
        """The start-up time, for the first request that asks (it is part of its load time)."""
        if self._start_reported:
            return 0.0
        self._start_reported = True
        return self.start_seconds

    @contextmanager
    def busy(self) -> Iterator[ModelProcess]:
        """Hold the process for one request."""
        if self._owner == threading.get_ident():
            raise RuntimeError("the local model is already answering in this thread")
        with self._lock:
            self._owner = threading.get_ident()
            try:
                yield self
            finally:
                self._owner = None

    def send(self, op: str, **fields: Any) -> int:
        """Write one request; its id."""
        self._ids += 1
        self._write({"id": self._ids, "op": op, **fields})
        return self._ids

    def read(self, rid: int, timeout: float | None = None) -> dict[str, Any] | None:
        """The next reply to request `rid` (replies to earlier, cancelled ones are skipped);
        None on timeout; ChildDied when the process ends."""
        deadline = None if timeout is None else time.monotonic() + timeout
        while True:
            left = None if deadline is None else max(deadline - time.monotonic(), 0)
            msg = self._read_any(left)
            if msg is None or msg.get("id") == rid:
                return msg

    def call(self, op: str, **fields: Any) -> dict[str, Any]:
        """One request and its one reply."""
        reply = self.read(self.send(op, **fields))
        assert reply is not None
        return reply

    def cancel(self, rid: int) -> None:
        """Stop request `rid` now: a cancel, then its last reply within CANCEL_GRACE; else kill
        the process (the next request starts another)."""
        try:
            self._write({"op": "cancel", "id": rid})
            deadline = time.monotonic() + CANCEL_GRACE
            while (left := deadline - time.monotonic()) > 0:
                msg = self.read(rid, left)
                if msg is None or "chunk" not in msg:
                    break
            else:
                msg = None
            if msg is None:
                self.kill()
        except ChildDied:
            pass
        except BaseException:  # a second Ctrl-C while it stops: stop it the hard way
            self.kill()
            raise

    def kill(self) -> None:
        if self.alive:
            self.proc.kill()
        self.proc.wait()

    def stop(self) -> None:
        """End the process: its stdin closed (it exits), killed if it does not."""
        try:
            self._stdin.close()
            self.proc.wait(timeout=5)
        except (OSError, subprocess.TimeoutExpired):
            self.kill()

    # -- internals --

    def _write(self, msg: dict[str, Any]) -> None:
        try:
            self._stdin.write(json.dumps(msg, ensure_ascii=False).encode("utf-8") + b"\n")
            self._stdin.flush()
        except (BrokenPipeError, OSError, ValueError):
            raise self._died() from None

    def _read_any(self, timeout: float | None) -> dict[str, Any] | None:
        while True:
            try:
                line = self._lines.next(timeout)
            except (EOFError, OSError):
                raise self._died() from None
            if line is None:
                return None
            try:
                msg = json.loads(line)
            except ValueError:
                continue  # not ours (nothing else should write there)
            if isinstance(msg, dict):
                return msg

    def _died(self) -> ChildDied:
        try:
            code = self.proc.wait(timeout=10)
        except subprocess.TimeoutExpired:  # its stdout closed but it lives on: end it
            self.kill()
            code = self.proc.returncode
        self._stderr.seek(0, os.SEEK_END)
        self._stderr.seek(max(self._stderr.tell() - STDERR_TAIL, 0))
        return ChildDied(code, self._stderr.read().decode("utf-8", "replace"))


_PROCESS: ModelProcess | None = None
_PROCESS_LOCK = threading.Lock()


def model_process() -> ModelProcess:
    """This countbot's model process, started now if there is none (or it died)."""
    global _PROCESS
    with _PROCESS_LOCK:
        if _PROCESS is None or not _PROCESS.alive:
            if _PROCESS is None:
                atexit.register(stop_model_process)
            _PROCESS = ModelProcess()
        return _PROCESS


def current_process() -> ModelProcess | None:
    """The model process if one runs (nothing is started)."""
    with _PROCESS_LOCK:
        return _PROCESS if _PROCESS is not None and _PROCESS.alive else None


def stop_model_process() -> None:
    global _PROCESS
    with _PROCESS_LOCK:
        proc, _PROCESS = _PROCESS, None
    if proc is not None:
        proc.stop()
