"""Entry point of `countbot` and `python -m countbot_cli`.

`--version` is answered before typer is imported; everything else goes through the typer app
in cli/main.py, once SIGTERM and SIGHUP stop countbot as Ctrl-C does (interrupts.py) and the
process is non-dumpable (keyguard.py). The garbage collector is off for the first
START_UP_SECONDS (what start-up made is then frozen), and the `countbot` command (`entry`)
leaves without the interpreter's teardown (speedups/quick_exit.py). The imports inside `main` are the start-up order itself. Why, with the figures:
docs/design/startup.md.
"""

from __future__ import annotations

import gc
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
    """The `countbot` command: `main`, then a quick exit (speedups/quick_exit.py)."""
    try:
        main()
        code: object = 0
    except SystemExit as exc:
        code = exc.code
    # here, not at the top: what it imports (typing) would load before SIGTERM's handler
    from countbot_cli.speedups.quick_exit import leave

    leave(code)


if __name__ == "__main__":
    entry()
