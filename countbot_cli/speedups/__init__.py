"""Speed-ups that reach into a library's internals, walled off from the rest of countbot.

Outside this folder countbot calls its libraries as they document themselves. A speed-up that
needs more (a private module or name, a `sys.modules` write, a socket option, httpcore, another
package's resource files) lives here as an adapter with the library's own interface and a
plain fallback, and says in its first docstring line the figure a user notices that it buys,
measured by a `bench/` script beside the plain path. A test gives each adapter the same inputs
as its fallback and expects the same answers; when a library upgrade breaks one, the adapter
falls back or is deleted, nothing else changes. This folder imports nothing from countbot.
`COUNTBOT_SPEEDUPS=off` in the environment sends every adapter down its plain path.
"""

from __future__ import annotations

import os

SWITCH = "COUNTBOT_SPEEDUPS"  # "off": every adapter takes its plain path


def enabled() -> bool:
    """False when the environment turns the speed-ups off (to compare, or after an upgrade)."""
    return os.environ.get(SWITCH, "").lower() != "off"
