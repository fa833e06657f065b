"""Entry point of `countbot` and `python -m countbot_cli`.

`--version` is answered before typer is imported (it is asked by scripts in loops); everything
else goes through the typer app in cli/main.py, once SIGTERM and SIGHUP stop countbot as
Ctrl-C does (interrupts.py: exit 130 whenever they arrive) and the process is non-dumpable
(keyguard.py: the commands it runs cannot read its environment through /proc).
"""

from __future__ import annotations

import sys


def main(argv: list[str] | None = None) -> None:
    args = sys.argv[1:] if argv is None else argv
    if args in (["--version"], ["-V"]):
        from countbot_cli import __version__

        sys.stdout.write(f"countbot {__version__}\n")
        raise SystemExit(0)
    from countbot_cli import interrupts

    interrupts.stop_on_termination()  # first: a SIGTERM while importing is exit 130 too
    try:
        from countbot_cli.keyguard import undumpable

        undumpable()
        from countbot_cli.cli.main import run

        run(args)
    except KeyboardInterrupt:  # a signal before a command handles it (importing, parsing)
        sys.stderr.write("\ncountbot: interrupted\n")
        raise SystemExit(130) from None


if __name__ == "__main__":
    main()
