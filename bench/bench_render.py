"""Streaming render cost of countbot's StreamView against the naive approaches (prints figures).

A ~10.5k-token markdown answer (gen_doc.py) is streamed at 100 tokens/s on a simulated clock:
each token is fed, then the clock advances 10 ms; CPU is measured with time.process_time. The
console writes to /dev/null as a 100x40 truecolor terminal. Targets (issue "The REPL", item 5):
renderer CPU <= 8 % of the stream duration, finish() <= 100 ms, per-token cost over the last
1,000 tokens <= 1.5x the first 1,000, first feed on screen <= 20 ms.

The naive approaches are estimated from timed samples (the full runs take minutes):
  naive  = `live.update(Markdown(whole_text), refresh=True)` on every token;
  full10 = a full `Markdown(whole_text)` re-render at most 10 times a second.

usage: python bench/bench_render.py [TOKENS] [--full]   (--full also runs full10 for real)
       python bench/bench_render.py [TOKENS] --pty [--reps N] [--countbot LABEL=PATH ...] [--breakdown]
           [--chunked] [--tls]
--pty measures the real terminal path instead (bench/pty_stream.py): `countbot ask --no-save hi`
on a pseudo-terminal against a loopback server streaming the doc at 100 tokens/s, its CPU % of
the stream and the time from the last token to its exit (issue 25 point 4: <= 3 %, <= 20 ms).
Several `--countbot` (e.g. an older checkout's) run interleaved in the same run. `--breakdown`
adds, in the same rounds, each one's `ask --plain` (start-up, HTTP and SSE, no markdown: the
difference is the renderer's share) and the stdlib floor client (bench/floor_client.py, raw).
`--chunked` has the server send a chunked body on a kept-alive connection, one HTTP chunk an
event, as OpenAI's, llama.cpp's and Ollama's servers do (default: close-delimited, one read a
segment; h11 then hands on a chunked body one chunk at a time). `--tls` serves it over TLS, as
remote providers do (a read then takes one TLS record, an event).

       python bench/bench_render.py [TOKENS] --instructions [--tree LABEL=CHECKOUT ...]
--instructions counts the renderer's instructions (valgrind's callgrind), which the load of a
shared machine does not change: each checkout's StreamView streams the doc in a fresh interpreter
(no preload(): the first fence of each language pays pygments' set-up, as in `ask`), minus the
same interpreter that only imports it. The frame throttle's own timing is taken as zero there,
so every checkout draws its frames on the 10 fps schedule alone (valgrind is ~50x slower).
"""

from __future__ import annotations

import os
import statistics
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path[:0] = [str(HERE), str(HERE.parent), str(HERE.parent / "tests" / "helpers")]

from gen_doc import make_doc, token_chunks, token_counter  # noqa: E402
from rich.console import Console  # noqa: E402
from rich.live import Live  # noqa: E402
from rich.markdown import Markdown  # noqa: E402

from countbot_cli.ui.stream import StreamView, preload  # noqa: E402

RATE = 100.0  # tokens per second
STEP = 1.0 / RATE
WIDTH, HEIGHT = 100, 40


class NullTerm:
    """A /dev/null terminal that counts the bytes written."""

    def __init__(self) -> None:
        self._f = open(os.devnull, "w")  # noqa: SIM115
        self.bytes = 0

    def write(self, s: str) -> int:
        self.bytes += len(s.encode())
        return self._f.write(s)

    def flush(self) -> None:
        self._f.flush()

    def isatty(self) -> bool:
        return True


def term_console(out: NullTerm) -> Console:
    return Console(
        file=out,  # type: ignore[arg-type]
        force_terminal=True,
        width=WIDTH,
        height=HEIGHT,
        color_system="truecolor",
        legacy_windows=False,
    )


class FakeClock:
    def __init__(self) -> None:
        self.now = 0.0

    def __call__(self) -> float:
        return self.now


def run_streamview(chunks: list[str]) -> dict[str, float]:
    out, clock = NullTerm(), FakeClock()
    view = StreamView(term_console(out), clock=clock, max_fps=10.0)
    costs: list[float] = []
    cpu0 = time.process_time()
    for i, tok in enumerate(chunks):
        clock.now = i * STEP
        t = time.process_time()
        view.feed(tok)
        costs.append(time.process_time() - t)
    clock.now = len(chunks) * STEP
    t_wall = time.perf_counter()
    view.finish()
    finish_s = time.perf_counter() - t_wall
    cpu = time.process_time() - cpu0
    n = min(1000, len(costs) // 2)
    return {
        "cpu": cpu,
        "finish_ms": finish_s * 1e3,
        "first": sum(costs[:n]),
        "last": sum(costs[-n:]),
        "n": n,
        "frames": view.frames,
        "max_feed_ms": max(costs) * 1e3,
        "mb": out.bytes / 1e6,
    }


def first_feed_latency(first: str, reps: int = 21) -> float:
    """Wall ms from the first feed() to its frame written (modules preloaded), median."""
    times = []
    for _ in range(reps):
        view = StreamView(term_console(NullTerm()))
        t = time.perf_counter()
        view.feed(first)
        times.append(time.perf_counter() - t)
        view.finish()
    return statistics.median(times) * 1e3


def cold_first_feed(first: str) -> float:
    """The same in a fresh interpreter, including the import of rich (no preload())."""
    code = (
        "import time, io, sys; t0 = time.perf_counter()\n"
        "from countbot_cli.ui.stream import StreamView\n"
        "from rich.console import Console\n"
        "c = Console(file=io.StringIO(), force_terminal=True, width=100, height=40)\n"
        "t1 = time.perf_counter(); StreamView(c).feed(sys.argv[1]); t2 = time.perf_counter()\n"
        "print((t2 - t1) * 1e3, (t1 - t0) * 1e3)"
    )
    res = subprocess.run(
        [sys.executable, "-c", code, first], capture_output=True, text=True, cwd=HERE.parent
    )
    return float(res.stdout.split()[0])


def sample_full_render(chunks: list[str], points: int = 21) -> tuple[list[int], list[float]]:
    """CPU seconds of one Live update with Markdown(prefix) at `points` prefix lengths."""
    prefix, acc = [], ""
    for tok in chunks:
        acc += tok
        prefix.append(acc)
    n = len(chunks)
    ks = sorted({1, *(n * j // (points - 1) for j in range(1, points))})
    out = NullTerm()
    live = Live(console=term_console(out), auto_refresh=False, redirect_stdout=False)
    live.start()
    costs = []
    for k in ks:
        rep = []
        for _ in range(3):
            t = time.process_time()
            live.update(Markdown(prefix[k - 1]), refresh=True)
            rep.append(time.process_time() - t)
        costs.append(statistics.median(rep))
    live.stop()
    return ks, costs


def interpolator(ks: list[int], costs: list[float]) -> Callable[[int], float]:
    def cost(k: int) -> float:
        for a, b, ca, cb in zip(ks, ks[1:], costs, costs[1:], strict=False):
            if a <= k <= b:
                return ca + (cb - ca) * (k - a) / (b - a)
        return costs[-1]

    return cost


def naive_estimate(n: int, cost: Callable[[int], float]) -> tuple[float, float]:
    """(total CPU, lag after the last token) of a per-token full re-render."""
    total = sum(cost(k) for k in range(1, n + 1))
    busy_until = 0.0
    for i in range(n):
        busy_until = max(busy_until, i * STEP) + cost(i + 1)
    return total, busy_until - (n - 1) * STEP


def full10_estimate(n: int, cost: Callable[[int], float]) -> tuple[float, int, float]:
    """(total CPU, frames, slowest frame) of full re-renders at <= 10 fps, coalescing tokens."""
    clock, i, total, frames, slowest = 0.0, 0, 0.0, 0, 0.0
    next_at = 0.0
    while i < n:
        clock = max(clock, i * STEP)
        while i < n and i * STEP <= clock:
            i += 1  # every token that has arrived by now
        if clock >= next_at or i == n:
            c = cost(i)
            total, frames, slowest = total + c, frames + 1, max(slowest, c)
            next_at = clock + 0.1
            clock += c
    return total, frames, slowest


def full10_real(chunks: list[str]) -> float:
    out, text, next_at, cpu0 = NullTerm(), "", 0.0, time.process_time()
    live = Live(console=term_console(out), auto_refresh=False, redirect_stdout=False)
    live.start()
    for i, tok in enumerate(chunks):
        text += tok
        if i * STEP >= next_at or i == len(chunks) - 1:
            live.update(Markdown(text), refresh=True)
            next_at = i * STEP + 0.1
    live.stop()
    return time.process_time() - cpu0


def pty_main(chunks: list[str]) -> None:
    import pty_stream

    argv = sys.argv[1:]
    reps = int(argv[argv.index("--reps") + 1]) if "--reps" in argv else 2
    given = [argv[i + 1] for i, a in enumerate(argv) if a == "--countbot"]
    if not given:
        given = [f"countbot={Path(sys.executable).parent / 'countbot'}"]
    clients = []
    for spec in given:
        label, path = spec.split("=", 1)
        clients.append((label, [os.path.abspath(path), "ask", "--no-save", "hi"]))
        if "--breakdown" in argv:
            plain = [os.path.abspath(path), "ask", "--plain", "--no-save", "hi"]
            clients.append((f"{label} --plain", plain))
    if "--breakdown" in argv:
        floor = [sys.executable, str(HERE / "floor_client.py"), pty_stream.BASE_URL, "hi"]
        clients.append(("floor (raw)", floor))
    pty_stream.run(clients, chunks, RATE, reps, chunked="--chunked" in argv, tls="--tls" in argv)


_COUNT_CHILD = """
import io, sys, time, types
tree, helpers, tokens, stream = sys.argv[1], sys.argv[2], int(sys.argv[3]), sys.argv[4] == "1"
sys.path[:0] = [tree, helpers]
from gen_doc import make_doc, token_chunks, token_counter
from rich.console import Console
from countbot_cli.ui import stream as st
from countbot_cli.ui.stream import StreamView
st.time = types.SimpleNamespace(perf_counter=lambda: 0.0, monotonic=time.monotonic)
chunks = token_chunks(make_doc(tokens, 1, token_counter()))  # in both runs: not counted
chunks = chunks if stream else []
class Tty(io.StringIO):
    def isatty(self): return True
now = [0.0]
c = Console(file=Tty(), force_terminal=True, width=100, height=40, color_system="truecolor",
            legacy_windows=False)
view = StreamView(c, clock=lambda: now[0], max_fps=10.0)
for i, tok in enumerate(chunks):
    now[0] = i / 100
    view.feed(tok)
view.finish()
print("frames", view.frames)
"""


def _callgrind(tree: str, tokens: int, stream: bool) -> tuple[int, str]:
    """(instructions, the child's output) of _COUNT_CHILD under callgrind."""
    res = subprocess.run(
        [
            "valgrind",
            "--tool=callgrind",
            "--callgrind-out-file=/dev/null",
            sys.executable,
            "-c",
            _COUNT_CHILD,
            tree,
            str(HERE.parent / "tests" / "helpers"),  # gen_doc
            str(tokens),
            "1" if stream else "0",
        ],
        capture_output=True,
        text=True,
        check=True,
    )
    collected = [ln for ln in res.stderr.splitlines() if "Collected :" in ln]
    return int(collected[-1].rsplit(":", 1)[1]), res.stdout.strip()


def instructions_main(tokens: int) -> None:
    argv = sys.argv[1:]
    trees = [argv[i + 1].split("=", 1) for i, a in enumerate(argv) if a == "--tree"]
    trees = trees or [["this", str(HERE.parent)]]
    print(f"# renderer instructions for gen_doc's {tokens}-token answer at 100 tok/s (callgrind)")
    for label, tree in trees:
        base, _ = _callgrind(os.path.abspath(tree), tokens, False)
        total, out = _callgrind(os.path.abspath(tree), tokens, True)
        print(f"{label:10} {(total - base) / 1e9:6.3f} G instructions; {out}")


def main() -> None:
    argv = sys.argv[1:]
    args = [a for i, a in enumerate(argv) if a.isdigit() and (i == 0 or argv[i - 1] != "--reps")]
    target = int(args[0]) if args else (2_000 if "--pty" in sys.argv else 10_551)
    doc = make_doc(target, 1, token_counter())
    chunks = token_chunks(doc)
    if "--pty" in sys.argv:
        pty_main(chunks)
        return
    if "--instructions" in sys.argv:
        instructions_main(target)
        return
    n, dur = len(chunks), len(chunks) * STEP
    print(
        f"# doc: {n} tokens, {len(doc)} chars, {doc.count(chr(10))} lines, "
        f"{doc.count('```') // 2} ``` fences; {RATE:g} tok/s -> stream lasts {dur:.1f} s"
    )
    preload()
    r = run_streamview(chunks)
    ratio = r["last"] / r["first"] if r["first"] else float("inf")
    print(
        f"StreamView    CPU {r['cpu']:6.2f} s = {100 * r['cpu'] / dur:5.2f} % of the stream "
        f"(target <= 8 %); frames {r['frames']:.0f}; slowest feed {r['max_feed_ms']:.1f} ms; "
        f"{r['mb']:.2f} MB written"
    )
    print(f"StreamView    finish() {r['finish_ms']:6.1f} ms (target <= 100 ms)")
    print(
        f"StreamView    per-token cost last {r['n']:.0f} / first {r['n']:.0f} tokens: "
        f"{1e3 * r['last']:.0f} ms / {1e3 * r['first']:.0f} ms = x{ratio:.2f} (target <= 1.5)"
    )
    first = "".join(chunks[:2])  # the first visible text: "# Answer"
    warm = first_feed_latency(first)
    cold = cold_first_feed(first)
    print(
        f"StreamView    first feed {first!r} -> on screen: {warm:.2f} ms with preload() (target <= 20 ms); "
        f"{cold:.1f} ms without (imports rich.markdown on first use)"
    )
    ks, costs = sample_full_render(chunks)
    cost = interpolator(ks, costs)
    tot, lag = naive_estimate(n, cost)
    print(
        f"naive         est. CPU {tot:8.1f} s = {100 * tot / dur:7.1f} % of the stream; screen "
        f"complete {lag:.1f} s after the last token; last frame {1e3 * costs[-1]:.0f} ms "
        f"(from {len(ks)} sampled prefixes)"
    )
    tot10, frames10, slow10 = full10_estimate(n, cost)
    print(
        f"full@10fps    est. CPU {tot10:8.1f} s = {100 * tot10 / dur:7.1f} % of the stream; "
        f"{frames10} frames, slowest {1e3 * slow10:.0f} ms"
    )
    if "--full" in sys.argv:
        real = full10_real(chunks)
        print(f"full@10fps    measured CPU {real:8.1f} s = {100 * real / dur:7.1f} % of the stream")


if __name__ == "__main__":
    main()
