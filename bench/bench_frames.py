"""Where StreamView's frames spend their CPU, by the kind of block being drawn (prints figures).

gen_doc's answer (bench/gen_doc.py) is streamed at 100 tokens/s on a simulated clock to a 100x40
truecolor terminal that writes to /dev/null, as `bench_render.py` does, after one warm-up stream
(modules imported, lexers compiled: the steady cost of a frame, not the first-use cost that
`bench_render.py --instructions` includes). Each redraw of the live region is timed (CPU) and
counted under the kind of the unsettled tail it draws: list, table, fence, quote, heading or
paragraph, and "settle+KIND" for the frame drawn when blocks settle; "settled blocks" is the time
of the settles themselves (the settled blocks' render, their split and that frame).

usage: python bench/bench_frames.py [TOKENS] [SEED]     (default 2000 1: the pty bench's answer)
"""

from __future__ import annotations

import sys
import time
from collections import defaultdict
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path[:0] = [str(HERE), str(HERE.parent)]

import bench_render  # noqa: E402
from gen_doc import make_doc, token_chunks, token_counter  # noqa: E402

from countbot_cli.ui.stream import StreamView, preload  # noqa: E402

_MARKS = (
    ("fence", ("```", "~~~")),
    ("table", ("|",)),
    ("list", ("- ", "* ", "+ ")),
    ("quote", (">",)),
    ("heading", ("#",)),
)


def kind(tail: str) -> str:
    """The kind of the block `tail` starts with."""
    text = tail.lstrip("\n")
    for name, marks in _MARKS:
        if text.startswith(marks):
            return name
    head = text.split(" ", 1)[0]
    return "list" if head[:-1].isdigit() and head[-1:] in ".)" else "paragraph"


def main() -> None:
    args = [int(a) for a in sys.argv[1:] if a.isdigit()]
    tokens, seed = (args + [2000, 1][len(args) :])[:2]
    chunks = token_chunks(make_doc(tokens, seed, token_counter()))
    preload()
    stats: dict[str, list[float]] = defaultdict(lambda: [0, 0.0])
    show, settle = StreamView._show, StreamView._settle

    def timed_show(view: StreamView, above: list[object] | None = None) -> None:
        name = ("settle+" if above is not None else "") + kind(view._tail)
        started = time.process_time()
        show(view, above)
        stats[name][0] += 1
        stats[name][1] += time.process_time() - started

    def timed_settle(view: StreamView, new_from: int) -> bool:
        started = time.process_time()
        settled = settle(view, new_from)
        if settled:
            stats["settled blocks"][0] += 1
            stats["settled blocks"][1] += time.process_time() - started
        return settled

    StreamView._show = timed_show  # type: ignore[method-assign, assignment]
    StreamView._settle = timed_settle  # type: ignore[method-assign, assignment]
    bench_render.run_streamview(chunks)  # warm-up
    stats.clear()
    result = bench_render.run_streamview(chunks)
    print(
        f"# {len(chunks)} tokens: {result['frames']:.0f} frames, "
        f"renderer CPU {1e3 * result['cpu']:.1f} ms (warm)"
    )
    for name, (n, cpu) in sorted(stats.items(), key=lambda item: -item[1][1]):
        print(f"{name:16} {n:4.0f} x {1e3 * cpu / n:6.3f} ms = {1e3 * cpu:6.1f} ms")


if __name__ == "__main__":
    main()
