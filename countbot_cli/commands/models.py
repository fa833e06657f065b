"""The bodies of `countbot models pull` and `models rm`, and the pulled models `countbot models`
lists beside the provider's (config/local_models.py has the catalogue and the folder).

`pull` shows a progress bar (tqdm, which huggingface_hub brings) on a terminal, two lines
otherwise, and ends with the command that uses the model. Ctrl-C or a kill keeps what was
fetched: the next pull goes on from there.
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterator
from pathlib import Path
from typing import Any, TextIO

from countbot_cli.config.local_models import (
    CATALOGUE,
    PULLED_CONTEXT_WINDOW,
    models_dir,
    pulled_models,
)
from countbot_cli.errors import EXIT_OK
from countbot_cli.textsafe import sanitize_line
from countbot_cli.ui.terminal import isatty

LOCAL_HINT = "pip install 'countbot-cli[local]'"


def _gb(n: int) -> str:
    return f"{n / 1e9:.2f} GB" if n >= 1e8 else f"{n / 1e6:.0f} MB"


def pulled_rows(folder: Path, *, everything: bool) -> list[str]:
    """The text `countbot models` adds: what is pulled, and (`everything`: on a terminal)
    what the catalogue has that is not."""
    pulled = pulled_models(folder)
    rows: list[str] = []
    if pulled:
        rows.append(f"pulled, for `countbot -p local -m NAME` ({folder}):")
        width = max(len(p.name) for p in pulled)
        rows += [
            f"  {p.name.ljust(width)}  {_gb(p.size):>8}  {sanitize_line(p.source)}" for p in pulled
        ]
    names = {p.name for p in pulled}
    rest = [e for e in CATALOGUE if e.name not in names]
    if everything and rest:
        rows.append("to pull (`countbot models pull NAME`, or any GGUF file's URL):")
        width = max(len(e.name) for e in rest)
        rows += [
            f"  {e.name.ljust(width)}  {_gb(e.size):>8}  {e.licence}: {e.good_for}" for e in rest
        ]
    return rows


def pulled_json(folder: Path) -> dict[str, Any]:
    return {
        "models_dir": str(folder),
        "pulled": [
            {
                "name": p.name,
                "path": str(p.path),
                "size": p.size,
                "source": p.source,
                "sha256": p.sha256,
            }
            for p in pulled_models(folder)
        ],
        "catalogue": [
            {
                "name": e.name,
                "repo": e.repo,
                "file": e.file,
                "size": e.size,
                "licence": e.licence,
                "good_for": e.good_for,
            }
            for e in CATALOGUE
        ],
    }


@contextlib.contextmanager
def progress_on(err: TextIO, source: Any) -> Iterator[Any]:
    """tqdm's bar on a terminal; otherwise a line when it starts and one when it ends."""
    from tqdm import tqdm

    tty = isatty(err)
    if not tty:
        size = f" ({_gb(source.size)})" if source.size else ""
        err.write(f"countbot: pulling {source.described}{size}\n")
        err.flush()
    bar = tqdm(
        total=source.size,
        unit="B",
        unit_scale=True,
        unit_divisor=1000,
        desc=source.name,
        file=err,
        disable=not tty,
        dynamic_ncols=True,
        mininterval=0.2,
    )
    try:
        yield bar
    finally:
        bar.close()


def pull_command(target: str, name: str | None, err: TextIO) -> int:
    """`countbot models pull NAME|URL [--name NAME]`."""
    from countbot_cli.commands.model_pull import pull  # pull/rm only, not the listing

    folder = models_dir()
    found, seconds = pull(target, folder, lambda s: progress_on(err, s), name=name)
    err.write(
        f"countbot: {found.name} is ready ({_gb(found.size)} in {seconds:.1f} s, sha256 "
        f"{found.sha256[:12]}…; it runs with {PULLED_CONTEXT_WINDOW:,} tokens of context): "
        f"countbot -p local -m {found.name}\n"
    )
    return EXIT_OK


def rm_command(name: str, err: TextIO) -> int:
    """`countbot models rm NAME`."""
    from countbot_cli.commands.model_pull import remove  # pull/rm only, not the listing

    gone = remove(name, models_dir())
    err.write(f"countbot: removed {gone.name} ({_gb(gone.size)})\n")
    return EXIT_OK
