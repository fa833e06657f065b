"""countbot's side of the embedded model's process (provider/local_child.py, SPEC §9).

- One model process per countbot process, shared by every LocalProvider (`model_process`): it
  is started on first use and stopped when countbot ends (atexit; and it exits by itself when
  its stdin closes, so even a SIGKILL of countbot ends it). It runs in its own session, so the
  terminal's Ctrl-C reaches countbot only: countbot then cancels the generation.
- JSON lines over pipes, one request at a time (`busy`: a second request from the thread that
  is generating is an error, other threads wait their turn).
- The child is not trusted: a line over MAX_LINE bytes, a line that is not a JSON object, a
  reply to no request, or one not shaped as its request's replies are (`_problem`) is the
  child's death: it is killed and reading raises `ChildDied` saying what it sent. A line is
  searched for its end once, however it arrives. Anything that fails before the child said it
  is ready (a SIGTERM, a timeout, another first line) kills it too.
- `cancel`: a cancel message, which the child checks between tokens and llama.cpp between
  the steps of a prompt's evaluation; if it has not stopped within CANCEL_GRACE (native code
  that does not ask), it is killed and the next request starts a new one. `stop` gives it
  STOP_GRACE to exit: countbot ends within a second whatever the child does.
- When the process dies (llama.cpp's SIGSEGV, the OOM killer), reading raises `ChildDied`,
  which says how (the signal, or the exit code and its last line on stderr); the next
  `model_process()` starts a new one.
"""

from __future__ import annotations

import atexit
import json
import math
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

from countbot_cli import CHILD_FOLDER
from countbot_cli.jsonsafe import loads_bounded
from countbot_cli.provider.sse import MAX_LINE

CHILD_MODULE = "countbot_cli.provider.local_child"
START_TIMEOUT = 300.0  # seconds for the child to import llama_cpp (a cold disk, a busy machine)
CANCEL_GRACE = 0.5  # seconds the child has to stop after a cancel before it is killed
STOP_GRACE = 0.5  # seconds the child has to exit once its stdin is closed
STDERR_TAIL = 4000  # bytes of the child's stderr read to explain an exit
READ_SIZE = 1 << 20  # bytes read from the child's stdout at once


class ChildDied(Exception):
    """The model process ended while countbot waited for it, or was killed because it broke
    the protocol (`broke` says what it sent)."""

    def __init__(self, returncode: int, stderr: str, broke: str | None = None) -> None:
        super().__init__(returncode)
        self.returncode = returncode
        self.stderr = stderr
        self.broke = broke

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


class _Broke(Exception):
    """What the child sent is not the protocol (the message says what it was)."""


class _Lines:
    """Lines from a pipe, with a timeout (select on the raw fd, so nothing hides in a buffer).
    Each byte is searched for a line end once; a line over `limit` bytes raises _Broke."""

    def __init__(self, fd: int, limit: int = MAX_LINE) -> None:
        self.fd = fd
        self.limit = limit
        self.buf = bytearray()
        self.searched = 0  # bytes of `buf` known to hold no line end

    def next(self, timeout: float | None) -> bytes | None:
        """The next line; None when `timeout` seconds pass first; EOFError at the end."""
        deadline = None if timeout is None else time.monotonic() + timeout
        while (i := self.buf.find(b"\n", self.searched)) < 0:
            self.searched = len(self.buf)
            if self.searched > self.limit:
                raise _Broke(f"a line over {self.limit:,} bytes")
            if deadline is not None:
                ready, _, _ = select.select([self.fd], [], [], max(deadline - time.monotonic(), 0))
                if not ready:
                    return None
            data = os.read(self.fd, READ_SIZE)
            if not data:
                raise EOFError
            self.buf += data
        if i > self.limit:
            raise _Broke(f"a line over {self.limit:,} bytes")
        line = bytes(self.buf[:i])
        del self.buf[: i + 1]
        self.searched = 0
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
            cwd=CHILD_FOLDER,  # not the user's folder: `-m` imports from its working folder
            start_new_session=True,  # the terminal's Ctrl-C is countbot's to handle
        )
        assert self.proc.stdin is not None and self.proc.stdout is not None
        self._stdin = self.proc.stdin
        self._lines = _Lines(self.proc.stdout.fileno())
        self._ids = 0
        self._ops: dict[int, tuple[str, bool]] = {}  # id -> (op, streamed) of each request
        self._lock = threading.Lock()
        self._owner: int | None = None
        try:
            ready = self._read_any(START_TIMEOUT)
            if ready is None:  # it hangs
                raise self._died()
            if ready.get("ready") is not True:
                raise self._broke('a first line that is not {"ready": true}')
        except BaseException:  # also SIGTERM or Ctrl-C while it starts: no child left behind
            self.kill()
            raise
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
        self._ops[self._ids] = (op, bool(fields.get("stream")))
        self._write({"id": self._ids, "op": op, **fields})
        return self._ids

    def read(self, rid: int, timeout: float | None = None) -> dict[str, Any] | None:
        """The next reply to request `rid` (replies to earlier, cancelled ones are skipped);
        None on timeout; ChildDied when the process ends or breaks the protocol (it is then
        killed): every reply is checked against what its request's replies look like."""
        deadline = None if timeout is None else time.monotonic() + timeout
        while True:
            left = None if deadline is None else max(deadline - time.monotonic(), 0)
            msg = self._read_any(left)
            if msg is None:
                return None
            mid = msg.get("id")
            request = self._ops.get(mid) if type(mid) is int else None
            problem = "a reply to no request" if request is None else _problem(*request, msg)
            if problem is not None:
                raise self._broke(problem)
            if mid == rid:
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
        """End the process: its stdin closed (it exits), killed if it has not within
        STOP_GRACE."""
        try:
            self._stdin.close()
            self.proc.wait(timeout=STOP_GRACE)
        except (OSError, subprocess.TimeoutExpired):
            self.kill()
        except BaseException:  # a signal while waiting: it must not outlive countbot
            self.kill()
            raise

    # -- internals --

    def _write(self, msg: dict[str, Any]) -> None:
        try:
            self._stdin.write(json.dumps(msg, ensure_ascii=False).encode("utf-8") + b"\n")
            self._stdin.flush()
        except (BrokenPipeError, OSError, ValueError):
            raise self._died() from None

    def _read_any(self, timeout: float | None) -> dict[str, Any] | None:
        """The next line as a JSON object; None on timeout. Anything else is the child's
        death (nothing but the protocol is written there: native prints go to stderr)."""
        try:
            line = self._lines.next(timeout)
        except (EOFError, OSError):
            raise self._died() from None
        except _Broke as e:
            raise self._broke(str(e)) from None
        if line is None:
            return None
        try:
            msg = loads_bounded(line)
        except ValueError:
            msg = None
        if not isinstance(msg, dict):
            raise self._broke("a line that is not a JSON object")
        return msg

    def _broke(self, what: str) -> ChildDied:
        """The ChildDied of a child killed because it sent `what`."""
        self.kill()
        died = self._died()
        died.broke = what
        return died

    def _died(self) -> ChildDied:
        try:
            code = self.proc.wait(timeout=STOP_GRACE)
        except subprocess.TimeoutExpired:  # its stdout closed but it lives on: end it
            self.kill()
            code = self.proc.returncode
        self._stderr.seek(0, os.SEEK_END)
        self._stderr.seek(max(self._stderr.tell() - STDERR_TAIL, 0))
        return ChildDied(code, self._stderr.read().decode("utf-8", "replace"))


# ---- what a reply may be ----


def _problem(op: str, streamed: bool, msg: dict[str, Any]) -> str | None:
    """What is wrong with `msg` as a reply to a request `op` (local_child.py's replies), or
    None when it is one."""
    if "error" in msg:
        error = msg["error"]
        if isinstance(error, dict) and all(
            isinstance(error.get(key, ""), str) for key in ("message", "kind")
        ):
            hint = error.get("hint")
            return None if hint is None or isinstance(hint, str) else "an error with a bad hint"
        return "an error that is not one"
    if not _number(msg.get("load_seconds", 0)):
        return "a load time that is not a number"
    if op == "chat":
        if "chunk" in msg:
            return None if isinstance(msg["chunk"], dict) else "a chunk that is not an object"
        if msg.get("cancelled") is True:
            return None
        end = msg.get("end")
        if not isinstance(end, dict):
            return "a reply with no chunk, end or error"
        return _end_problem(end, streamed)
    field, check = _FIELDS.get(op, ("", _never))
    return None if field in msg and check(msg[field]) else f"a reply to {op!r} without its {field}"


def _end_problem(end: dict[str, Any], streamed: bool) -> str | None:
    usage = end.get("usage", {})
    if not isinstance(usage, dict) or not all(_count(v) for v in usage.values()):
        return "an end whose usage is not counts"
    if not _number(end.get("load_seconds", 0)) or not _count(end.get("cached", 0)):
        return "an end whose figures are not numbers"
    if not streamed and not isinstance(end.get("response"), dict):
        return "an end without the response"
    return None


def _count(value: Any) -> bool:
    return type(value) is int and value >= 0


def _number(value: Any) -> bool:
    return type(value) in (int, float) and math.isfinite(value) and value >= 0


def _never(value: Any) -> bool:
    return False


def _models(value: Any) -> bool:
    return isinstance(value, list) and all(
        isinstance(m, list) and len(m) == 3 and isinstance(m[0], str) and _count(m[1])
        for m in value
    )


_FIELDS: dict[str, tuple[str, Any]] = {
    "tokens": ("count", _count),
    "info": ("tools", lambda v: type(v) is bool),
    "models": ("models", _models),
    "unload": ("ok", lambda v: v is True),
}


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
