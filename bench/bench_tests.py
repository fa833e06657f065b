"""The fast test tier (`make test-fast`) of this checkout against an older checkout, back to back.

Runs, alternately (A B A B …), the older checkout's `make test-fast` and this one's, each on the
same machine in the same minutes, and prints per run the wall time, the CPU time of everything
the run started (user + system, children included), how many tests passed, and at the end the
medians and the ratios this/older. The older checkout needs its own `.venv` (run its
`make test-fast` once first); make it with

    git worktree add /tmp/pre <commit> && make -C /tmp/pre .venv/.installed-test

Usage: python bench/bench_tests.py --older /tmp/pre [-n PAIRS] [--workers N]
(--workers sets this checkout's TEST_WORKERS; 0 runs it in one process, as the older one did)
"""

from __future__ import annotations

import argparse
import os
import re
import resource
import statistics
import subprocess
import time
from dataclasses import dataclass
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent


@dataclass
class Run:
    wall: float
    cpu: float
    passed: int
    failed: int


def _children_cpu() -> float:
    usage = resource.getrusage(resource.RUSAGE_CHILDREN)
    return usage.ru_utime + usage.ru_stime


def run_tier(checkout: Path, workers: str | None) -> Run:
    """`make test-fast` in `checkout`, timed; `workers` passed as TEST_WORKERS when given."""
    cmd = ["make", "-s", "test-fast", "PYTEST_ARGS=-q -p no:cacheprovider"]
    if workers is not None:
        cmd.append(f"TEST_WORKERS={workers}")
    cpu0, t0 = _children_cpu(), time.perf_counter()
    done = subprocess.run(
        cmd, cwd=checkout, capture_output=True, text=True, env={**os.environ, "NO_COLOR": "1"}
    )
    wall, cpu = time.perf_counter() - t0, _children_cpu() - cpu0
    tail = done.stdout[-2000:]
    passed = re.search(r"(\d+) passed", tail)
    failed = re.search(r"(\d+) failed", tail)
    if passed is None:
        raise SystemExit(f"no test summary from {checkout}:\n{tail}\n{done.stderr[-2000:]}")
    return Run(wall, cpu, int(passed.group(1)), int(failed.group(1)) if failed else 0)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--older", type=Path, required=True, help="the older checkout")
    parser.add_argument("-n", type=int, default=2, help="pairs of runs (default 2)")
    parser.add_argument("--workers", default=None, help="this checkout's TEST_WORKERS")
    args = parser.parse_args()
    older: list[Run] = []
    this: list[Run] = []
    for i in range(args.n):
        for name, checkout, runs, workers in (
            ("older", args.older, older, None),
            ("this ", ROOT, this, args.workers),
        ):
            r = run_tier(checkout, workers)
            runs.append(r)
            print(
                f"pair {i + 1} {name}: wall {r.wall:6.1f} s  cpu {r.cpu:6.1f} s  "
                f"{r.passed} passed, {r.failed} failed",
                flush=True,
            )
    w_old = statistics.median(r.wall for r in older)
    w_new = statistics.median(r.wall for r in this)
    c_old = statistics.median(r.cpu for r in older)
    c_new = statistics.median(r.cpu for r in this)
    print(f"median wall: older {w_old:.1f} s, this {w_new:.1f} s, ratio {w_new / w_old:.2f}")
    print(f"median cpu:  older {c_old:.1f} s, this {c_new:.1f} s, ratio {c_new / c_old:.2f}")
    print(
        f"tests passed per run: older {older[0].passed}, this {this[0].passed}; "
        f"wall per test: older {w_old / older[0].passed * 1000:.0f} ms, "
        f"this {w_new / this[0].passed * 1000:.0f} ms"
    )


if __name__ == "__main__":
    main()
