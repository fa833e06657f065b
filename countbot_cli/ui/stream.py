"""Streaming markdown output on a rich Console (SPEC §2 "Streaming", §10): `StreamView`.

A closed top-level block is printed once, into the scrollback; only the unsettled tail is
redrawn, in the live region, throttled to `max_fps`. The invariant: what `finish()` leaves on
screen is what a one-shot `Markdown(whole_text)` render prints. Plain mode writes the raw
text as it arrives; model output is untrusted, so control sequences are removed and nothing
is printed as rich markup. How blocks settle and frames are reused: docs/design/rendering.md.

Importing this module is cheap: rich is imported on first use; `preload()` imports it ahead.
"""

from __future__ import annotations

import os
import sys
import time
from collections.abc import Callable, Mapping
from typing import IO, TYPE_CHECKING, Any, TextIO

from countbot_cli.textsafe import StreamSanitizer, sanitize
from countbot_cli.ui.terminal import isatty

if TYPE_CHECKING:
    from rich.console import Console, ConsoleOptions

    from countbot_cli.ui import mdblocks
    from countbot_cli.ui.liveregion import LiveRegion

_KEEP_BELOW = 2  # rows left free under the live region (the cursor line, a margin)


def terminal_reflows(env: Mapping[str, str] | None = None) -> bool:
    """Whether the terminal re-wraps lines already on screen when its width changes (tmux, VTE,
    kitty, iTerm2, Windows Terminal, ... do; xterm and rxvt cut them instead)."""
    env = os.environ if env is None else env
    if env.get("TMUX"):
        return True
    return not (env.get("XTERM_VERSION") or env.get("TERM", "").startswith("rxvt"))


def preload() -> None:
    """Import and warm up the renderer's heavy modules (call it in a background thread)."""
    import io

    from rich.console import Console

    from countbot_cli.ui import mdblocks  # rich.markdown: what this warms up

    mdblocks.parser()
    warm = Console(file=io.StringIO(), force_terminal=True, width=80, color_system="truecolor")
    warm.print(
        mdblocks.Lines(mdblocks.render_lines(warm, _WARM_DOC, separated=True, code_theme="monokai"))
    )
    # the console's and the live region's modules too: the first answer finds them loaded
    from countbot_cli.ui import console, liveregion  # noqa: F401


_WARM_DOC = "# a\n\n- *b* `c`\n\n| d |\n|---|\n| e |\n\n```python\nx = 1\n```\n"


def is_plain_console(console: Console) -> bool:
    """True for a console made by `make_console` for a pipe or `force_plain`."""
    from countbot_cli.ui.console import OutputConsole  # rich: on first use

    return isinstance(console, OutputConsole) and console.plain


def make_console(
    *, file: TextIO | None = None, stderr: bool = False, force_plain: bool | None = None
) -> Console:
    """A Console for countbot output. Plain (raw text, no colour, no wrapping) when `force_plain`,
    or by default when the stream is not a terminal. On a terminal with `NO_COLOR` set, markdown
    is rendered without colours (styles such as bold stay)."""
    from countbot_cli.ui.console import OutputConsole  # rich: on first use

    stream = file if file is not None else (sys.stderr if stderr else sys.stdout)
    plain = force_plain
    if plain is None:
        plain = not isatty(stream)
    if not plain:
        no_color = bool(os.environ.get("NO_COLOR"))
        return OutputConsole(
            file=file, stderr=stderr, highlight=False, emoji=False, no_color=no_color
        )
    return OutputConsole(
        plain=True,
        file=file,
        stderr=stderr,
        force_terminal=False,
        color_system=None,
        no_color=True,
        highlight=False,
        emoji=False,
        soft_wrap=True,
    )


def _write_raw(stream: IO[str], text: str) -> None:
    try:
        stream.write(text)
    except UnicodeEncodeError:  # a non-UTF-8 stream: never lose the rest of the answer
        enc = getattr(stream, "encoding", None) or "ascii"
        stream.write(text.encode(enc, "replace").decode(enc))
    stream.flush()


def render_markdown(console: Console, text: str, *, code_theme: str = "monokai") -> None:
    """Print a whole markdown text at once (sanitised; raw text on a plain console), exactly as
    `StreamView` leaves it: rich's render without the invisible padding at the ends of lines."""
    text = sanitize(text)
    if is_plain_console(console):
        if text:
            _write_raw(console.file, text if text.endswith("\n") else text + "\n")
        return
    from countbot_cli.ui import mdblocks  # rich.markdown: on a rendered console only

    lines = mdblocks.render_lines(console, text, separated=False, code_theme=code_theme)
    console.print(mdblocks.Lines(mdblocks.rstrip_line(line) for line in lines))


class StreamView:
    """Renders one streamed answer on an injected rich Console."""

    def __init__(
        self,
        console: Console,
        *,
        plain: bool = False,
        max_fps: float = 10.0,
        clock: Callable[[], float] = time.monotonic,
        code_theme: str = "monokai",
        side: Console | None = None,
        reflows: bool | None = None,
    ) -> None:
        """side: where reasoning and notices go in plain mode (default: stderr); reflows:
        whether the terminal re-wraps its lines on a width change (default: `terminal_reflows`)."""
        self._console = console
        self._plain = plain or is_plain_console(console)
        self._interval = 1.0 / max_fps if max_fps > 0 else 0.0
        self._clock = clock
        self._code_theme = code_theme
        self._side = side
        self._raw: list[str] = []
        self._answer = StreamSanitizer()
        self._thoughts = StreamSanitizer()
        self._tail = ""  # sanitised answer text not yet printed into scrollback
        self._reason = ""  # sanitised reasoning text of the current, unfinished line
        self._in_reasoning = False
        self._separated = False  # rich's blank line applies before the next printed block
        self._goes_on = ""  # or the next printed block goes on a bullet list (Split.goes_on)
        self._last: str | None = None  # "answer" | "reasoning" | "notice": what was printed last
        self._plain_nl = True  # plain mode: the main stream is at the start of a line
        self._side_nl = True  # plain mode: the side stream is at the start of a line
        self._region: LiveRegion | None = None
        self._reflows = terminal_reflows() if reflows is None else reflows
        self._dirty = False
        self._next_at = float("-inf")
        self._blocks_mod: Any = None
        self._memo: Any = None  # mdblocks.RenderMemo: what a frame rendered, for the next one
        self._live_capable: bool | None = None
        self._splitter: Any = None
        self.frames = 0  # redraws of the live region (for benchmarks and tests)

    # ---- public API ----

    @property
    def text(self) -> str:
        """Everything fed so far, raw."""
        return "".join(self._raw)

    def feed(self, delta: str) -> None:
        """Text of the answer as it arrives."""
        if not delta:
            return
        self._raw.append(delta)
        text = self._answer.feed(delta)
        if self._plain:
            self._plain_answer(text)
            return
        self._end_reasoning()
        self._tail += text
        if "\n" in text and self._settle(len(self._tail) - len(text)):
            return
        if "\n" not in text and self._rows_only():
            return
        self._dirty = True
        self._maybe_frame()

    def _rows_only(self) -> bool:
        """The tail ends in a table: it is drawn a whole row at a time (its last line once
        complete). rich lays the whole table out again for every frame (1-1.5 ms, 40 % of the
        frames' cost in gen_doc's answer), and a partial row only made its columns jump."""
        return self._splitter is not None and self._splitter.in_table

    def reasoning(self, delta: str) -> None:
        """Reasoning text: shown dimmed, separately, never part of the answer."""
        text = self._thoughts.feed(delta)
        if not text:
            return
        if self._plain:
            self._side_write(text)
            self._side_nl = text.endswith("\n")
            return
        if not self._in_reasoning:
            self._close_segment()
            if self._last is not None:
                self._print_dim("")
            self._in_reasoning = True
        self._reason += text
        if "\n" in self._reason:
            done, self._reason = self._reason.rsplit("\n", 1)
            drawn = self._live_up()
            self._print_dim(done)  # with a live region, this redraws the region too
            if drawn:
                return
        self._dirty = True
        self._maybe_frame()

    def notice(self, text: str) -> None:
        """A one-line dim notice between blocks (e.g. a tool call); settles the answer first.
        Line breaks become spaces; other spacing (indentation, columns) is kept."""
        line = " ".join(sanitize(text).expandtabs(4).splitlines()).rstrip()
        if self._plain:
            if isatty(self._console.file):  # same screen: don't glue the notice to the answer
                self._plain_break()
            self._side_write(("" if self._side_nl else "\n") + line + "\n")
            self._side_nl = True
            return
        self._close_segment()
        if self._last in ("answer", "reasoning"):
            self._console.print()
        self._print_dim(line, one_line=True)
        self._last = "notice"
        self._separated, self._goes_on = True, ""

    def finish(self) -> None:
        """The stream ended: the screen now equals a one-shot render of the answer."""
        if self._plain:
            self._plain_answer(self._answer.flush())
            self._plain_break()
            return
        self._close_segment()
        self._stop_live()

    def abort(self, note: str = "interrupted") -> None:
        """Ctrl-C: print what arrived as settled, then the dim note."""
        self.finish()
        if note:
            self.notice(note)

    def refresh(self) -> None:
        """Redraw the live region now if it is out of date (call it when `due_in()` elapses)."""
        if self._dirty and not self._plain:
            self._show()

    def due_in(self) -> float | None:
        """Seconds until a pending redraw should happen (None: nothing pending)."""
        return self.next_frame_in() if self._dirty else None

    def next_frame_in(self) -> float | None:
        """Seconds until the throttle allows the next frame, pending or not (None: plain)."""
        if self._plain:
            return None
        return max(0.0, self._next_at - self._clock())

    # ---- plain mode ----

    def _plain_answer(self, text: str) -> None:
        if not self._side_nl:  # reasoning on the side stream ends before the answer starts
            self._side_write("\n")
            self._side_nl = True
        if text:
            _write_raw(self._console.file, text)
            self._plain_nl = text.endswith("\n")

    def _plain_break(self) -> None:
        if not self._plain_nl:
            _write_raw(self._console.file, "\n")
            self._plain_nl = True

    def _side_write(self, text: str) -> None:
        stream = self._side.file if self._side is not None else sys.stderr
        _write_raw(stream, text)

    # ---- rendered mode ----

    @property
    def _blocks(self) -> Any:
        if self._blocks_mod is None:
            from countbot_cli.ui import mdblocks  # rich.markdown: on first render

            self._blocks_mod = mdblocks
            self._memo = mdblocks.RenderMemo()
        return self._blocks_mod

    def _live_ok(self) -> bool:
        if self._live_capable is None:  # a terminal that can move its cursor
            c = self._console
            self._live_capable = c.is_terminal and not c.is_dumb_terminal and c.is_interactive
        return self._live_capable

    def _settle(self, new_from: int) -> bool:
        """Print the blocks of the tail that can no longer change; True if any was printed."""
        if self._splitter is None:
            self._splitter = self._blocks.Splitter()
        split: mdblocks.Split | None = self._splitter.split(self._tail, new_from)
        if split is None:
            return False
        lines = self._lines(split.settled)
        self._tail = split.rest
        self._separated = not split.ends_with_hr
        self._goes_on = split.goes_on
        self._last = "answer"
        self._show(lines)
        return True

    def _lines(self, src: str, options: ConsoleOptions | None = None) -> list[Any]:
        """`src` rendered (with `options`, else the console's), without invisible padding at line
        ends (a terminal that re-wraps its lines when it gets narrower would turn that padding
        into blank rows)."""
        blocks = self._blocks
        lines = blocks.render_lines(
            self._console,
            src,
            separated=self._separated,
            goes_on=self._goes_on,
            code_theme=self._code_theme,
            options=options,
            memo=self._memo,
        )
        return [blocks.rstrip_line(line) for line in lines]

    def _print_dim(self, text: str, *, one_line: bool = False) -> None:
        from rich.text import Text

        line = Text(text, style="dim", no_wrap=one_line, overflow="ellipsis" if one_line else None)
        if self._live_up():
            self._show(self._console.render_lines(line, pad=False))
        else:
            self._console.print(line)

    def _end_reasoning(self) -> None:
        if not self._in_reasoning:
            return
        rest = self._reason + self._thoughts.flush()
        self._reason = ""
        self._in_reasoning = False
        if rest:
            self._print_dim(rest)
        self._last = "reasoning"
        self._separated, self._goes_on = True, ""

    def _close_segment(self) -> None:
        """Print the whole unsettled tail (and any reasoning) as final; no live region is left."""
        self._end_reasoning()
        self._tail += self._answer.flush()
        tail, self._tail = self._tail, ""
        if self._splitter is not None:
            self._splitter.reset()
        self._stop_live()
        self._dirty = False
        if not self._blocks.is_blank(tail):
            self._console.print(self._blocks.Lines(self._lines(tail)))
            self._last = "answer"
            self._separated, self._goes_on = True, ""

    def _live_up(self) -> bool:
        return self._region is not None and self._region.active

    def _stop_live(self) -> None:
        """Erase the live region (the cursor goes back to where it began)."""
        if self._region is not None:
            self._region.clear()

    def _maybe_frame(self) -> None:
        if self._clock() >= self._next_at:
            self._show()

    def _show(self, above: list[Any] | None = None) -> None:
        """Redraw the live region; print `above` (lines) into scrollback over it, in one write."""
        self._dirty = False
        if not self._live_ok():
            if above is not None:
                self._console.print(self._blocks.Lines(above))
            return
        started = time.perf_counter()
        if self._region is None:
            from countbot_cli.ui.liveregion import LiveRegion  # on a terminal only (start-up)

            console = self._console
            self._region = LiveRegion(
                console, write=lambda text: _write_raw(console.file, text), reflows=self._reflows
            )
        options = self._console.options  # the terminal's size, asked once a frame (a syscall)
        self._region.show(self._region_lines(options), above, size=options.size)
        self.frames += 1
        took = time.perf_counter() - started
        self._next_at = self._clock() + max(self._interval, 4 * took)

    def _region_lines(self, options: ConsoleOptions) -> list[Any]:
        """The unsettled tail (or the current reasoning line), bottom-cropped to the terminal."""
        keep = max(1, options.size.height - _KEEP_BELOW)
        if self._in_reasoning:
            from rich.text import Text

            text = Text(self._reason, style="dim")
            lines = self._console.render_lines(text, options, pad=False) if self._reason else []
            return self._blocks.bottom(lines, keep) if lines else []
        if self._blocks.is_blank(self._tail):
            return []
        src = self._blocks.fence_window(self._tail, keep)
        if self._rows_only():
            src = src[: src.rfind("\n") + 1]
        return self._blocks.bottom(self._lines(src, options), keep)
