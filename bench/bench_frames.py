"""Where StreamView's frames spend their CPU, by the kind of block being drawn (prints figures).

gen_doc's answer (tests/helpers/gen_doc.py) is streamed at 100 tokens/s on a simulated clock to a 100x40
truecolor terminal that writes to /dev/null, as `bench_render.py` does, after one warm-up stream
(modules imported, lexers compiled: the steady cost of a frame, not the first-use cost that
`bench_render.py --instructions` includes). Each redraw of the live region is timed (CPU) and
counted under the kind of the unsettled tail it draws: list, table, fence, quote, heading or
paragraph, and "settle+KIND" for the frame drawn when blocks settle; "settled blocks" is the time
of the settles themselves (the settled blocks' render, their split and that frame).

usage: python bench/bench_frames.py [TOKENS] [SEED]     (default 2000 1: the pty bench's answer)
       python bench/bench_frames.py --long-list N | --long-table N [--tree CHECKOUT]
--long-list streams an answer that is one bullet list of N items (two lines each, a bold label)
instead, the shape of a "10 tips" answer grown long; --long-table one table of N rows (three
columns, a cell of up to six words); --tree measures another checkout's package (e.g.
/work/wt/base) with this script.
"""

from __future__ import annotations

import importlib
import sys
import time
from collections import defaultdict
from pathlib import Path

HERE = Path(__file__).resolve().parent
TREE = sys.argv[sys.argv.index("--tree") + 1] if "--tree" in sys.argv else str(HERE.parent)
sys.path[:0] = [str(HERE), TREE, str(HERE.parent / "tests" / "helpers")]

importlib.import_module("countbot_cli")  # from TREE: bench_render puts its own checkout first
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


def long_list(items: int) -> str:
    """An answer that is one bullet list of `items` items, each two lines at 100 columns."""
    tip = "keep the change small, test it the way a user runs it, measure before and after, "
    body = "".join(f"- **Tip {i}**: {tip * 2}then ship it.\n" for i in range(1, items + 1))
    return f"Here is what works:\n\n{body}\nThat is all.\n"


def long_table(rows: int) -> str:
    """An answer that is one table of `rows` rows."""
    body = "".join(f"| item {i} | {i * 37} | {'note ' * (i % 7)}|\n" for i in range(rows))
    return (
        f"Here is the data:\n\n| Name | Value | Notes |\n|:---|---:|:---|\n{body}\nThat is all.\n"
    )


def main() -> None:
    argv = sys.argv[1:]
    if "--tree" in argv:
        del argv[argv.index("--tree") : argv.index("--tree") + 2]
    if "--long-list" in argv:
        doc = long_list(int(argv[argv.index("--long-list") + 1]))
    elif "--long-table" in argv:
        doc = long_table(int(argv[argv.index("--long-table") + 1]))
    else:
        args = [int(a) for a in argv if a.isdigit()]
        tokens, seed = (args + [2000, 1][len(args) :])[:2]
        doc = make_doc(tokens, seed, token_counter())
    chunks = token_chunks(doc)
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
        f"# {TREE}: {len(chunks)} tokens: {result['frames']:.0f} frames, "
        f"renderer CPU {1e3 * result['cpu']:.1f} ms (warm)"
    )
    for name, (n, cpu) in sorted(stats.items(), key=lambda item: -item[1][1]):
        print(f"{name:16} {n:4.0f} x {1e3 * cpu / n:6.3f} ms = {1e3 * cpu:6.1f} ms")


if __name__ == "__main__":
    main()
