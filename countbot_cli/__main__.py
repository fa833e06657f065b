"""Entry point of `countbot` and `python -m countbot_cli`.

`--version` is answered before typer is imported (it is asked by scripts in loops); everything
else goes through the typer app in cli/main.py, once SIGTERM and SIGHUP stop countbot as
Ctrl-C does (interrupts.py: exit 130 whenever they arrive) and the process is non-dumpable
(keyguard.py: the commands it runs cannot read its environment through /proc).

The `countbot` command (`entry`) leaves without the interpreter's teardown once the command is
done (issue 25 point 4): tearing down the modules and collecting a few hundred thousand objects
took 100-300 ms after an answer's last token on a loaded 2-core machine, against a few ms for
the exit itself. Before leaving, the atexit handlers run (the embedded model's process and MCP
servers are stopped there) and the standard streams are flushed; while a non-daemon thread is
still running the normal exit is taken instead, which waits for it. `main` itself returns or
raises SystemExit as usual, for callers that go on afterwards (tests, benches).

The cyclic garbage collector is off while countbot starts (issue 25 point 2): importing the
commands, httpx and the settings makes a few hundred thousand objects that live until exit, and
the collector scanned them some 70 times, 8-20 ms of a 150 ms `ask`. It comes back on
START_UP_SECONDS after the start, from a timer thread, for anything that runs longer (the REPL,
an answer that takes its time): by then countbot is mostly waiting for a server or a keystroke.
What start-up made is frozen first (`gc.freeze`, issue 25 point 4): else the first collection
after it comes back scans all of it (15-30 ms on a pty, in the middle of a streamed answer) and
two more move it up the generations; start-up's own garbage cycles, if any, stay with it.
"""

from __future__ import annotations

import atexit
import gc
import os
import sys
import threading

START_UP_SECONDS = 0.5


def main(argv: list[str] | None = None) -> None:
    args = sys.argv[1:] if argv is None else argv
    if args in (["--version"], ["-V"]):
        from countbot_cli import __version__

        sys.stdout.write(f"countbot {__version__}\n")
        raise SystemExit(0)
    try:  # a signal from the moment the handler is in place (its return included) is 130
        from countbot_cli import interrupts

        interrupts.stop_on_termination()  # first: a SIGTERM while importing is exit 130 too
        collector_off_while_starting()
        from countbot_cli.keyguard import undumpable

        undumpable()
        from countbot_cli.cli.main import run

        run(args)
    except KeyboardInterrupt:  # a signal before a command handles it (importing, parsing)
        sys.stderr.write("\ncountbot: interrupted\n")
        raise SystemExit(130) from None


def collector_off_while_starting() -> threading.Timer:
    """Turn the garbage collector off now and on again START_UP_SECONDS later (a daemon
    timer, returned); a collector already off (a caller's choice) stays off."""
    timer = threading.Timer(START_UP_SECONDS, _collector_on if gc.isenabled() else lambda: None)
    timer.daemon = True
    gc.disable()
    timer.start()
    return timer


def _collector_on() -> None:
    """The collector on again, over what is made from now on: start-up's objects frozen (once
    a process: `main` run again in the same process, as tests do, freezes nothing more)."""
    if not gc.get_freeze_count():
        gc.freeze()
    gc.enable()


def entry() -> None:
    """The `countbot` command: `main`, then a quick exit (see the module docstring)."""
    try:
        main()
        code: object = 0
    except SystemExit as exc:
        code = exc.code
    others = [t for t in threading.enumerate() if t is not threading.main_thread()]
    if any(t.is_alive() and not t.daemon for t in others):
        raise SystemExit(code)
    atexit._run_exitfuncs()
    status = _status(code)
    for stream in (sys.stdout, sys.stderr):
        try:
            stream.flush()
        except (OSError, ValueError):  # a closed pipe (`countbot ask … | head`): nothing to add
            pass
    os._exit(status)


def _status(code: object) -> int:
    """The exit status SystemExit(code) would give: None 0, an int itself, else 1 (printed)."""
    if code is None:
        return 0
    if isinstance(code, int):
        return code & 0xFF
    sys.stderr.write(f"{code}\n")
    return 1


if __name__ == "__main__":
    entry()
