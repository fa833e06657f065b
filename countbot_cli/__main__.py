"""Entry point of `countbot` and `python -m countbot_cli`.

`--version` is answered before typer is imported (it is asked by scripts in loops); everything
else goes through the typer app in cli/main.py, once the process is non-dumpable
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
    from countbot_cli.keyguard import undumpable

    undumpable()
    from countbot_cli.cli.main import run

    run(args)


if __name__ == "__main__":
    main()
