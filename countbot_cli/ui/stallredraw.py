"""The stall waiter: a streamed answer's pending frame drawn when the stream pauses.

`StreamView` (stream.py) draws only when it is fed; a frame it held back for the frame rate is
drawn by the next feed. When the stream stalls there is no next feed: `StallRedraw`'s waiter
thread draws that frame once it is due. It also serialises access to the view (`lock`): the
answer's reader and the waiter both call into it.
"""

from __future__ import annotations

import threading
import time
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from countbot_cli.ui.stream import StreamView


class StallRedraw:
    """Draws a StreamView's pending frame when the stream stalls, and serialises access to it.

    StreamView redraws only when text arrives (no refresh thread: rich's races print() from
    another thread). When the stream pauses, a waiter thread draws the last pending frame once
    it is due. The one thread waits for every frame of the turn (a timer thread a frame cost a
    thread start ten times a second) and leaves after a second with nothing pending, or when
    the view is closed. While text flows it wakes by itself once a frame period, when the next
    frame is due, rather than being woken for each new pending frame and then waking again at
    its deadline to find that a token drew it (two thread switches a frame). Callers do every
    call into the view under `lock` and call `schedule()` after feeding it.
    """

    IDLE = 1.0  # seconds the waiter stays without a pending frame
    LATE = 0.005  # a stalled frame is drawn this long after it is due

    def __init__(self, stream: StreamView) -> None:
        self.stream = stream
        self.lock = threading.RLock()
        self._wake = threading.Condition(self.lock)
        self._deadline: float | None = None  # when the pending frame is drawn (monotonic)
        self._wakes_at: float | None = None  # when the waiting waiter wakes by itself, if it does
        self._fed = False  # a frame was pending since the waiter last woke
        self._waiter: threading.Thread | None = None
        self._closed = False

    def schedule(self) -> None:
        """Under `lock`: have the renderer's pending frame drawn when it is due, if any."""
        due = self.stream.due_in()
        if due is None or self._closed:
            return
        self._fed = True
        if self._deadline is not None:
            return
        self._deadline = time.monotonic() + due + self.LATE
        if self._waiter is None:
            self._waiter = threading.Thread(target=self._wait, name="stall-redraw", daemon=True)
            self._waiter.start()
        elif self._wakes_at is None or self._wakes_at > self._deadline + 0.001:
            self._wake.notify()  # idle, or asleep past this frame's deadline

    def cancel(self) -> None:
        with self.lock:
            self._deadline = None

    def close(self) -> None:
        """No more timed frames (the turn is over)."""
        with self.lock:
            self._deadline = None
            self._closed = True
            self._wake.notify()

    def _wait(self) -> None:
        with self.lock:
            try:
                while not self._closed:
                    wake_at = self._deadline if self._deadline is not None else self._next_frame()
                    self._wakes_at = wake_at
                    if wake_at is None:
                        if not self._wake.wait(self.IDLE) and self._deadline is None:
                            return
                        continue
                    left = wake_at - time.monotonic()
                    if left > 0:
                        self._wake.wait(left)
                        continue
                    if self._deadline is not None and self._deadline <= time.monotonic():
                        self._deadline = None
                        try:
                            self.stream.refresh()
                        except (OSError, ValueError):  # the terminal went away: the caller sees it
                            return
                        self.schedule()
            finally:
                self._waiter = self._wakes_at = None

    def _next_frame(self) -> float | None:
        """When to wake with no frame pending: at the next frame's time while text is flowing
        (a frame pending since the last wake-up), else never (an idle wait for schedule())."""
        fed, self._fed = self._fed, False
        gap = self.stream.next_frame_in() if fed else None
        return None if gap is None else time.monotonic() + gap + self.LATE
