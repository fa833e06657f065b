"""`LoopTask`: an MCP server's task on `McpHub`'s event loop, as the threads outside the loop
see it: cancelled (once, and never while it stops its server on its own) and waited for until
it has unwound (`ended`), which is when its transport has stopped the server and reaped it.
"""

from __future__ import annotations

import asyncio
import threading
from collections.abc import Callable, Coroutine
from typing import Any


class LoopTask:
    """One server's task on the hub's loop, cancelled and waited for from other threads.

    `ended` is set once the task is done: its transport has stopped the server (the SDK's
    stop sequence) and reaped it. Cancelling the future `run_coroutine_threadsafe` returns
    would mark it done at once while the task still unwinds, so a restart or countbot's end
    could go on while the old process is still exiting, or stop the loop in the middle of
    its stop sequence (a crashed server that is still running then outlives countbot).

    A native cancel also cuts that stop sequence short (the SDK shields it from anyio's
    cancellation, not from `Task.cancel`), leaving the server running: so the task is
    cancelled once, and not once it is `stopping` its server on its own (a failed start, a
    stop asked for), which its coroutine says (`coro_for` is handed this LoopTask).
    """

    def __init__(
        self,
        loop: asyncio.AbstractEventLoop,
        coro_for: Callable[[LoopTask], Coroutine[Any, Any, None]],
    ) -> None:
        self.loop = loop
        self.ended = threading.Event()
        self.stopping = False  # set in the loop by the coroutine: its transport stops the server
        self._task: asyncio.Task[None] | None = None
        self._cancelled = False
        loop.call_soon_threadsafe(self._create, coro_for(self))

    def _create(self, coro: Coroutine[Any, Any, None]) -> None:
        self._task = self.loop.create_task(coro)
        self._task.add_done_callback(lambda _task: self.ended.set())

    def cancel(self) -> None:
        """Cancel the task (from any thread) unless it stops on its own; `ended` says when it
        has unwound."""
        if not (self._cancelled or self.stopping):
            self._cancelled = True
            self.loop.call_soon_threadsafe(self._cancel)

    def _cancel(self) -> None:  # in the loop, after `_create` (callbacks run in order)
        if self._task is not None and not self.stopping:  # between the coroutine's steps
            self._task.cancel()
