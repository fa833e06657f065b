"""Benchmark of hostile input (issue 9): what it costs countbot to handle or refuse it.
Prints figures; targets in brackets. One function a section, each called from main().

1. SSE decoding of one `data:` line of 1, 10 and 50 MB, fed in 4 KiB network pieces: time
   [linear: 50 MB about 50x 1 MB; under 5 s] and peak traced memory, with a cap above the line
   (handled), then with the default 16 MiB cap (refused as soon as the line passes it).
2. jsonsafe.loads_bounded against plain json.loads: a 16 MB chat chunk (the largest a stream line
   may be), a 16 MB session-like document, and hostile inputs (100,000-deep brackets, an
   unterminated string of escaped quotes, 4 million empty arrays) [loads_bounded at most about
   twice json.loads; deep or malformed input refused in well under a second]. "depth scan" is
   the pre-parse scan alone (loads_bounded uses it only when brackets outnumber strings).
3. Whole `countbot ask` processes refusing endless or huge input: `-f /dev/zero`, `-f` on a FIFO
   with no writer, `< /dev/zero` on stdin, and 200 MB piped in [each refused with exit 2 in well
   under a second, peak RSS near `countbot --version`'s]. The YAML alias bomb is timed by
   bench/bench_config.py.

Run: .venv/bin/python bench/bench_hostile.py [--runs N]
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
import tracemalloc
from collections.abc import Callable
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from timing import median_of  # noqa: E402

from countbot_cli.jsonsafe import check_depth, loads_bounded  # noqa: E402
from countbot_cli.provider.sse import MAX_LINE, LineTooLong, SSEDecoder  # noqa: E402

MB = 1_000_000
PIECE = 4096


def _peak(fn: Callable[[], Any]) -> int:
    tracemalloc.start()
    try:
        fn()
        return tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()


def _decode_line(size: int, max_line: int) -> Callable[[], None]:
    """One `data:` line of `size` bytes through a decoder, 4 KiB at a time (refusal is fine)."""
    piece = b"x" * PIECE

    def run() -> None:
        decoder = SSEDecoder(max_line=max_line)
        try:
            decoder.feed(b"data: ")
            for _ in range(size // PIECE):
                decoder.feed(piece)
            decoder.feed(b"x" * (size % PIECE) + b"\n\n")
        except LineTooLong:
            pass

    return run


def bench_sse_line(runs: int) -> None:
    print("1. SSE: one line fed in 4 KiB pieces")
    print(f"   {'line':>6}  {'handled':>9}  {'peak':>8}  {'refused (16 MiB cap)':>21}  {'peak':>8}")
    first: float | None = None
    for mb in (1, 10, 50):
        size = mb * MB
        handled = _decode_line(size, max_line=size + 64)
        refused = _decode_line(size, max_line=MAX_LINE)
        t_ok = median_of(runs, handled)
        t_no = median_of(runs, refused)
        first = first or t_ok
        print(
            f"   {mb:>4} MB  {t_ok:>7.3f} s  {_peak(handled) / MB:>5.1f} MB  "
            f"{t_no:>19.3f} s  {_peak(refused) / MB:>5.1f} MB   ({t_ok / first:.0f}x the 1 MB time)"
        )
    print("   [linear; 50 MB under 5 s; memory bounded by the cap when refused]")


def _session_like(target: int) -> str:
    message = {
        "id": "msg_0123456789",
        "role": "assistant",
        "content": 'Here is the fix: `f(x) = [a, b]` and {"k": "v"}, with "quotes" \\ and\nlines.',
        "created_at": "2025-01-01T00:00:00Z",
    }
    one = len(json.dumps(message)) + 2
    return json.dumps({"schema_version": 1, "messages": [message] * (target // one)})


def bench_json_limits(runs: int) -> None:
    print("\n2. JSON: loads_bounded (depth scan + parse) against json.loads")
    chunk = json.dumps({"choices": [{"index": 0, "delta": {"content": "[x] " * (4 * MB)}}]})
    cases = [("16 MB chat chunk", chunk), ("16 MB session-like file", _session_like(16 * MB))]
    for name, text in cases:
        plain = median_of(runs, lambda t=text: json.loads(t))
        scan = median_of(runs, lambda t=text: check_depth(t))
        bounded = median_of(runs, lambda t=text: loads_bounded(t))
        print(
            f"   {name:<24} json.loads {plain:.3f} s, depth scan {scan:.3f} s, "
            f"loads_bounded {bounded:.3f} s"
        )
    hostile = [
        ("100,000-deep brackets", "[" * 100_000 + "]" * 100_000),
        ("1M escaped quotes, open", "[" * 300 + '"' + '\\"' * 1_000_000),
        ("4M empty arrays", "[" + "[]," * 4_000_000 + "[]]"),
    ]
    for name, text in hostile:
        outcome = "accepted"
        t0 = time.perf_counter()
        try:
            loads_bounded(text)
        except ValueError as e:
            outcome = f"refused: {type(e).__name__}"
        print(f"   {name:<24} {time.perf_counter() - t0:.3f} s  {outcome}")
    print("   [loads_bounded at most ~2x json.loads; deep/malformed input refused well under 1 s]")


def _run_countbot(args: list[str], stdin: Any, env: dict[str, str]) -> tuple[float, int, int]:
    """Wall time, exit code and peak RSS (MB) of one countbot process: its own VmHWM (Linux),
    not `ru_maxrss`, which a child inherits from this process across fork and exec."""
    cmd = [str(ROOT / ".venv" / "bin" / "python"), "-c", _WRAP, *args]
    t0 = time.perf_counter()
    proc = subprocess.run(cmd, stdin=stdin, capture_output=True, env=env, timeout=120)
    wall = time.perf_counter() - t0
    rss_kb = int(proc.stderr.decode().rsplit("RSS=", 1)[-1].strip() or 0)
    return wall, proc.returncode, rss_kb // 1024


# runs countbot's main in a child and reports that child's own peak RSS on stderr's last line
_WRAP = (
    "import sys\n"
    "from countbot_cli.__main__ import main\n"
    "sys.argv = ['countbot', *sys.argv[1:]]\n"
    "try:\n    code = main()\nexcept SystemExit as e:\n    code = e.code\n"
    "hwm = [ln.split()[1] for ln in open('/proc/self/status') if ln.startswith('VmHWM')]\n"
    "sys.stderr.write(f'\\nRSS={hwm[0]}\\n')\n"
    "sys.exit(code if isinstance(code, int) else 1)\n"
)


def bench_refused_input(runs: int) -> None:
    print("\n3. countbot ask refusing endless or huge input (whole process, median of runs)")
    with tempfile.TemporaryDirectory() as tmp:
        home = Path(tmp)
        env = {**os.environ, "XDG_CONFIG_HOME": str(home / "cfg"), "HOME": str(home)}
        env.update(COUNTBOT_API_BASE="http://127.0.0.1:9/v1", COUNTBOT_API_KEY="x")
        env.update(COUNTBOT_MODEL="m", COUNTBOT_NO_LOCAL_MODEL="1")
        fifo = home / "fifo"
        os.mkfifo(fifo)
        big = home / "big.txt"
        with big.open("wb") as f:
            for _ in range(200):
                f.write(b"x" * MB)
        cases: list[tuple[str, list[str], Any]] = [
            ("countbot --version", ["--version"], subprocess.DEVNULL),
            ("ask -f /dev/zero", ["ask", "-f", "/dev/zero", "q"], subprocess.DEVNULL),
            ("ask -f FIFO (no writer)", ["ask", "-f", str(fifo), "q"], subprocess.DEVNULL),
            ("ask q < /dev/zero", ["ask", "q"], "/dev/zero"),
            ("200 MB piped on stdin", ["ask", "q"], str(big)),
        ]
        for name, args, stdin in cases:
            results = []
            for _ in range(runs):
                with open(stdin, "rb") if isinstance(stdin, str) else _null() as src:
                    results.append(_run_countbot(args, src, env))
            wall = statistics.median(r[0] for r in results)
            rss = max(r[2] for r in results)
            print(f"   {name:<26} {wall:.3f} s  exit {results[0][1]}  peak RSS {rss} MB")
    print("   [exit 2 (0 for --version), well under 1 s, RSS near --version's]")


def _null() -> Any:
    return open(os.devnull, "rb")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=3)
    args = parser.parse_args()
    bench_sse_line(args.runs)
    bench_json_limits(args.runs)
    bench_refused_input(args.runs)


if __name__ == "__main__":
    main()
