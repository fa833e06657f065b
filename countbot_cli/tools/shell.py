"""The `exec` tool: run a shell command safely enough to be useful (SPEC §6).

`/bin/sh -c COMMAND` in its own session and process group, stdin closed, no controlling
terminal, an environment scrubbed of secrets; stdout and stderr read by threads into a bounded
head and tail; on timeout or cancel the whole group is stopped (SIGTERM, then SIGKILL). The
invariant: a command never outlives its call holding countbot's pipes, and never sees a key.
The output follows CountBot's format (`STDERR:`, `COMMAND FAILED (exit code N)`). The details:
docs/design/tools.md.
"""

from __future__ import annotations

import codecs
import os
import signal
import subprocess
import threading
import time
from collections.abc import Iterator, Mapping, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import IO, Any

from countbot_cli.tools.base import (
    KIND_EXEC,
    Progress,
    ToolContext,
    ToolError,
    ToolResult,
    ToolSpec,
)
from countbot_cli.tools.confined import cwd_for, open_folder
from countbot_cli.tools.textfile import place_arg, resolve_arg

SHELL = "/bin/sh"
KILL_GRACE = 0.5  # seconds between SIGTERM and SIGKILL
DRAIN_WAIT = 1.0  # seconds to wait for the pipes to close after the shell exits
TAIL_LINES = 12  # lines of output shown after a timeout or an interrupt
MAX_COMMAND_CHARS = 32_000  # longer belongs in a script (and would flood the approval prompt)
# captured of each stream (head and tail) beyond what the model gets: the REPL's /last-tool
# shows the whole output as captured (ToolResult.full)
KEEP_BYTES = 1 << 20
_SECRET_ENDINGS = ("TOKEN", "SECRET", "PASSWORD", "PASSWD")  # PGPASSWORD, GITHUB_TOKEN
_SECRET_SUFFIXES = ("KEY", "PWD")  # only after "_": MONKEY and PWD/OLDPWD are not secrets


def is_secret_name(name: str) -> bool:
    """True for environment names that look like credentials."""
    upper = name.upper()
    if "API_KEY" in upper or "APIKEY" in upper or upper == "KEY":
        return True
    if upper.endswith(_SECRET_ENDINGS):
        return True
    return any(upper.endswith("_" + s) for s in _SECRET_SUFFIXES)


def scrub_env(env: Mapping[str, str], secret_values: Sequence[str] = ()) -> dict[str, str]:
    """Drop variables named like secrets, and any whose value holds a known secret."""
    secrets = [s for s in secret_values if len(s) >= 8]
    return {
        k: v for k, v in env.items() if not is_secret_name(k) and not any(s in v for s in secrets)
    }


class _Capture:
    """Reads one pipe to its end in a daemon thread, keeping a head and a tail of at most
    `limit` bytes each, and counting the bytes and lines in between."""

    def __init__(self, stream: IO[bytes], limit: int, progress: Progress | None = None) -> None:
        self.head = bytearray()
        self.tail = bytearray()
        self.total = 0
        self.lines = 0
        self._limit = limit
        self._stream = stream
        self.progress = progress
        self._decoder = codecs.getincrementaldecoder("utf-8")(errors="replace")
        self._thread = threading.Thread(target=self._pump, daemon=True)
        self._thread.start()

    def _pump(self) -> None:
        fd = self._stream.fileno()
        while chunk := os.read(fd, 65536):
            self.total += len(chunk)
            self.lines += chunk.count(b"\n")
            self._report(chunk)
            room = self._limit - len(self.head)
            if room > 0:
                self.head += chunk[:room]
                chunk = chunk[room:]
            if chunk:
                self.tail += chunk
                if len(self.tail) > self._limit:
                    del self.tail[: len(self.tail) - self._limit]

    def _report(self, chunk: bytes) -> None:
        """Hand the output to the live view as it arrives; its failure never stops the pump."""
        report = self.progress
        if report is not None:
            try:
                report(self._decoder.decode(chunk))
            except Exception:  # a view's bug must not lose the command's output
                self.progress = None

    def join(self, timeout: float | None) -> bool:
        self._thread.join(timeout)
        return not self._thread.is_alive()

    def text(self) -> tuple[str, int, int]:
        """(decoded head and tail, bytes dropped between them, lines dropped between them)."""
        kept = bytes(self.head) + bytes(self.tail)
        return _decode(kept), self.total - len(kept), self.lines - kept.count(b"\n")

    def last_lines(self) -> list[str]:
        if not self.total:
            return []
        end = (bytes(self.head[-8192:]) + bytes(self.tail))[-8192:]
        return _decode(end).rstrip("\n").split("\n")[-TAIL_LINES:]


def _decode(data: bytes) -> str:
    return data.decode("utf-8", errors="replace").replace("\r\n", "\n")


@dataclass
class CommandOutcome:
    stdout: str
    stderr: str
    returncode: int
    dropped: int = 0  # bytes of output between the kept heads and tails
    dropped_lines: int = 0  # lines in those bytes
    timed_out: bool = False
    interrupted: bool = False
    elapsed: float = 0.0
    tail: str = ""  # last lines of output (for timeouts and interrupts)
    stragglers_killed: bool = False
    escaped: bool = False  # a process that left the group (setsid) still holds the output


def _exited(pid: int) -> bool:
    """Has the process exited? Does not reap it (WNOWAIT), so its pid stays reserved."""
    try:
        return os.waitid(os.P_PID, pid, os.WEXITED | os.WNOHANG | os.WNOWAIT) is not None
    except ChildProcessError:  # already reaped elsewhere
        return True


def _signal_group(pgid: int, sig: int) -> None:
    try:
        os.killpg(pgid, sig)
    except (ProcessLookupError, PermissionError):
        pass


def _kill_group(proc: subprocess.Popen[bytes]) -> None:
    """SIGTERM the whole group, give it a moment, then SIGKILL whatever is left."""
    _signal_group(proc.pid, signal.SIGTERM)
    deadline = time.monotonic() + KILL_GRACE
    while not _exited(proc.pid) and time.monotonic() < deadline:
        time.sleep(0.02)
    _signal_group(proc.pid, signal.SIGKILL)


def run_command(
    command: str,
    cwd: str | Path,
    timeout: float,
    cancel: threading.Event,
    *,
    limit_bytes: int,
    env: Mapping[str, str] | None = None,
    secret_values: Sequence[str] = (),
    progress: Progress | None = None,
) -> CommandOutcome:
    """Run `command` with `/bin/sh -c` under the rules in the module docstring. `progress`
    gets the output (stdout and stderr, decoded) as it arrives, from the reader threads."""
    started = time.monotonic()
    proc = subprocess.Popen(
        [SHELL, "-c", command],
        cwd=cwd,
        stdin=subprocess.DEVNULL,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        env=scrub_env(os.environ if env is None else env, secret_values),
        start_new_session=True,
    )
    assert proc.stdout is not None and proc.stderr is not None
    out = _Capture(proc.stdout, limit_bytes, progress)
    err = _Capture(proc.stderr, limit_bytes, progress)
    timed_out = interrupted = stragglers = False
    deadline = started + timeout
    while not _exited(proc.pid):
        if cancel.is_set():
            interrupted = True
        elif time.monotonic() >= deadline:
            timed_out = True
        if interrupted or timed_out:
            _kill_group(proc)
            break
        cancel.wait(min(0.02, max(deadline - time.monotonic(), 0.001)))
    if not (out.join(DRAIN_WAIT) and err.join(DRAIN_WAIT)):
        stragglers = True  # background children still hold the pipes
        _kill_group(proc)
        out.join(DRAIN_WAIT)
        err.join(DRAIN_WAIT)
    returncode = proc.wait()
    out.progress = err.progress = None  # a process left running reports to nobody after this
    escaped = not (out.join(0) and err.join(0))
    if not escaped:  # else a process outside the group still holds a pipe: leave it be
        proc.stdout.close()
        proc.stderr.close()
    (stdout, drop_out, lines_out), (stderr, drop_err, lines_err) = out.text(), err.text()
    tail = "\n".join(out.last_lines() + (["STDERR:", *err.last_lines()] if err.total else []))
    return CommandOutcome(
        stdout=stdout,
        stderr=stderr,
        returncode=returncode,
        dropped=drop_out + drop_err,
        dropped_lines=lines_out + lines_err,
        timed_out=timed_out,
        interrupted=interrupted,
        elapsed=time.monotonic() - started,
        tail=tail,
        stragglers_killed=stragglers and not escaped,
        escaped=escaped,
    )


_STRAGGLERS_NOTE = "[background processes still holding the output were stopped]"
_ESCAPED_NOTE = (
    "[a background process left the command's process group (setsid) and still holds its "
    "output; it was not stopped]"
)


def format_outcome(outcome: CommandOutcome, timeout: float, max_chars: int) -> ToolResult:
    """The tool result in CountBot's format, with the timed_out / interrupted flags."""
    if outcome.timed_out or outcome.interrupted:
        what = (
            f"timed out after {timeout:g} seconds"
            if outcome.timed_out
            else f"interrupted after {outcome.elapsed:.1f} seconds"
        )
        text = f"Command {what}; its process group was killed."
        if outcome.tail.strip():
            text += "\nLast output:\n" + outcome.tail
        if outcome.escaped:
            text += "\n" + _ESCAPED_NOTE
        return ToolResult.failure(
            text, timed_out=outcome.timed_out, interrupted=outcome.interrupted
        )
    parts = [outcome.stdout.rstrip("\n")] if outcome.stdout.strip() else []
    if outcome.stderr.strip():
        parts.append("STDERR:\n" + outcome.stderr.rstrip("\n"))
    whole = "\n".join(parts) or "(no output)"
    body = elide_middle(whole, max_chars, outcome.dropped, outcome.dropped_lines)
    notes = [_STRAGGLERS_NOTE] * outcome.stragglers_killed + [_ESCAPED_NOTE] * outcome.escaped
    body, whole = "\n".join([body, *notes]), "\n".join([whole, *notes])
    full = whole if body != whole else None  # the screen's /last-tool shows it all
    rc = outcome.returncode
    if rc != 0:
        wrap = f"COMMAND FAILED (exit code {rc})\n{{}}\nExit code: {rc}"
        return ToolResult(
            wrap.format(body),
            ok=False,
            error=f"command failed with exit code {rc}",
            full=wrap.format(full) if full is not None else None,
        )
    return ToolResult(body, full=full)


def elide_middle(text: str, max_chars: int, dropped: int = 0, dropped_lines: int = 0) -> str:
    """`text` whole when it fits (and nothing was dropped), else its head (2/5 of `max_chars`)
    and tail (3/5), cut at line ends when one is near, around one line counting what was left
    out, `dropped` characters and `dropped_lines` lines never captured included."""
    if len(text) <= max_chars and not dropped:
        return text
    head_end = _near_line_end(text, max_chars * 2 // 5, back=True)
    tail_start = max(_near_line_end(text, len(text) - (max_chars - head_end), back=False), head_end)
    middle = text[head_end:tail_start]
    chars = len(middle) + dropped
    lines = middle.count("\n") + dropped_lines
    head, tail = text[:head_end].rstrip("\n"), text[tail_start:].lstrip("\n")
    note = f"[… {lines:,} lines / {chars:,} chars elided …]"
    return "\n".join(part for part in (head, note, tail) if part)


def _near_line_end(text: str, pos: int, *, back: bool) -> int:
    """`pos` moved to just after a newline within 200 characters (backwards or forwards)."""
    pos = min(max(pos, 0), len(text))
    if back:
        nl = text.rfind("\n", max(pos - 200, 0), pos)
        return nl + 1 if nl >= 0 else pos
    nl = text.find("\n", pos, min(pos + 200, len(text)))
    return nl + 1 if nl >= 0 else pos


def failed_stderr_tail(result: ToolResult, lines: int = 5) -> list[str]:
    """The last lines of a failed command's stderr, from its result text (this module's format),
    for the screen; [] for a success or a command that wrote nothing to stderr."""
    text = result.content
    if result.ok or not text.startswith("COMMAND FAILED") or "STDERR:\n" not in text:
        return []
    stderr = text.rsplit("STDERR:\n", 1)[1].rsplit("\nExit code: ", 1)[0]
    notes = (_ESCAPED_NOTE, _STRAGGLERS_NOTE)
    kept = [
        ln
        for ln in stderr.split("\n")
        if ln.strip() and ln not in notes and not ln.startswith("[… ")
    ]
    return kept[-lines:]


@contextmanager
def _cwd(args: dict[str, Any], ctx: ToolContext) -> Iterator[str | Path]:
    """Where the command starts: the workspace, or working_dir opened without following a
    symlink swapped in after the check (`confined.cwd_for`)."""
    if not args.get("working_dir"):
        yield ctx.workspace.resolve()
        return
    place = place_arg(args, ctx, "working_dir")
    try:
        fd = open_folder(place)
    except (FileNotFoundError, NotADirectoryError):
        raise ToolError(
            f"working_dir '{args['working_dir']}' is not an existing directory"
        ) from None
    try:
        yield cwd_for(fd, place)
    finally:
        os.close(fd)


def _command(args: dict[str, Any]) -> str:
    """The command to run; ToolError for one that cannot run (or be shown) as sent."""
    command = str(args["command"])
    if not command.strip():
        raise ToolError("command is empty; send the shell command to run")
    if "\x00" in command:
        raise ToolError("command contains a NUL byte, which a shell cannot run; remove it")
    if len(command) > MAX_COMMAND_CHARS:
        raise ToolError(
            f"command is {len(command)} characters (limit {MAX_COMMAND_CHARS}); write a script "
            "with write_file and run that instead"
        )
    return command


def run_exec(args: dict[str, Any], ctx: ToolContext, cancel: threading.Event) -> ToolResult:
    timeout = float(args.get("timeout") or ctx.shell_timeout)
    command = _command(args)
    with _cwd(args, ctx) as cwd:
        outcome = run_command(
            command,
            cwd,
            timeout,
            cancel,
            limit_bytes=max(4 * ctx.max_output_chars + 4, KEEP_BYTES),
            secret_values=ctx.secret_values,
            progress=ctx.progress,
        )
    return format_outcome(outcome, timeout, ctx.max_output_chars)


def preview_exec(args: dict[str, Any], ctx: ToolContext, may_read: bool) -> str:
    cwd = (
        resolve_arg(args, ctx, "working_dir", confine=False)
        if args.get("working_dir")
        else ctx.workspace.resolve()
    )
    timeout = float(args.get("timeout") or ctx.shell_timeout)
    first, *rest = _command(args).split("\n")
    lines = [f"$ {first}", *(f"> {line}" for line in rest)]  # continuation lines, as a shell
    if rest:
        lines.append(f"(one command of {len(lines)} lines)")
    return "\n".join([*lines, f"(in {cwd}, timeout {timeout:g} s)"])


def exec_tool() -> ToolSpec:
    return ToolSpec(
        name="exec",
        description=(
            "Run a shell command (/bin/sh -c) in the workspace or in working_dir. stdin is closed; "
            "output is stdout then STDERR:, capped; a non-zero exit is reported with its code. "
            "The user approves each command."
        ),
        parameters={
            "type": "object",
            "properties": {
                "command": {"type": "string", "description": "The shell command to run."},
                "working_dir": {"type": "string", "description": "Folder to run it in."},
                "timeout": {
                    "type": "integer",
                    "minimum": 1,
                    "maximum": 3600,
                    "description": "Seconds before the command is killed.",
                },
            },
            "required": ["command"],
            "additionalProperties": False,
        },
        run=run_exec,
        kind=KIND_EXEC,
        path_args=("working_dir",),
        preview=preview_exec,
    )
