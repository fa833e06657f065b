"""`ask --plain` starts ~20 ms sooner (of ~160): httpx is imported without its command-line client.

httpx's `__init__` imports its private `httpx._main` whenever click is installed (typer brings
it), and with it click, rich.console and pygments, for httpx's own command line, which countbot
never runs. A None for that module in `sys.modules` makes its import fail as Python documents
(ImportError), and httpx keeps the `main` it defines for an install without click. Measured by
`bench/bench_startup.py --speedups-off`. Plain path: `import httpx`, taken when the speed-ups
are off or httpx is imported already; either way the caller gets the same httpx module.
"""

from __future__ import annotations

import sys
from types import ModuleType

from countbot_cli.speedups import enabled


def import_httpx() -> ModuleType:
    """httpx, imported without its command-line client when the speed-ups are on."""
    if enabled() and "httpx" not in sys.modules:
        sys.modules.setdefault("httpx._main", None)  # type: ignore[arg-type]
    import httpx

    return httpx
