"""How long after it starts a SIGTERM still kills countbot by the signal (status 143) instead
of ending it the way countbot ends on one (exit 130): the window before countbot's handler is
installed (countbot_cli/interrupts.py), which is mostly Python's own start.

For each delay from 0 to --max ms (in --step ms steps), --runs times: start `countbot --help`
(stdout a pipe, an empty home), sleep the delay after exec returned, send SIGTERM, and note how
it ended: 143 (the signal killed it: inside the window), 130 (countbot's handler), 0 (done
before the signal), anything else (a signal no handler expected: a bug) as "other". Prints,
per countbot, the share of each ending at each delay and the window: the shares killed by the
signal times the step, summed (the expected length of the window), and the last delay at which
at least half the runs died by the signal. Several `--countbot NAME=PATH` run in the same
rounds, alternating, so a loaded machine hits them alike. Also
prints the interpreter's own start (`python -I -S -c pass`, and with its site: `python -c
pass`) for the same venv as the first countbot, by CPU time (user + system).

Usage: python bench/bench_sigterm_window.py [--countbot NAME=PATH ...] [--runs N] [--max MS]
"""

from __future__ import annotations

import argparse
import os
import resource
import signal
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent


def ending(countbot: str, delay_ms: float, env: dict[str, str]) -> int:
    """How `countbot --help` ended when SIGTERM came `delay_ms` after its start: its status
    (143 for killed by SIGTERM)."""
    proc = subprocess.Popen(
        [countbot, "--help"],
        stdin=subprocess.DEVNULL,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
        env=env,
    )
    time.sleep(delay_ms / 1000)
    try:
        proc.send_signal(signal.SIGTERM)
    except ProcessLookupError:
        pass
    code = proc.wait(30)
    return 128 - code if code < 0 else code


def cpu_ms(cmd: list[str], runs: int) -> float:
    """Median CPU time (user + system) of `cmd` in ms."""
    took = []
    for _ in range(runs):
        before = resource.getrusage(resource.RUSAGE_CHILDREN)
        subprocess.run(cmd, stdout=subprocess.DEVNULL, check=True)
        after = resource.getrusage(resource.RUSAGE_CHILDREN)
        took.append((after.ru_utime - before.ru_utime + after.ru_stime - before.ru_stime) * 1000)
    return statistics.median(took)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--countbot", action="append", default=[], metavar="NAME=PATH")
    ap.add_argument("--runs", type=int, default=10)
    ap.add_argument("--max", type=float, default=40.0, help="largest delay, ms")
    ap.add_argument("--step", type=float, default=2.0, help="delay step, ms")
    args = ap.parse_args()
    named = [c.partition("=")[::2] for c in args.countbot] or [
        ("this", str(ROOT / ".venv" / "bin" / "countbot"))
    ]
    home = tempfile.mkdtemp(prefix="cb-sigterm-")
    env = {"PATH": os.environ.get("PATH", "/usr/bin:/bin"), "HOME": home}
    delays = [n * args.step for n in range(int(args.max / args.step) + 1)]
    seen: dict[tuple[str, float], list[int]] = {}
    for r in range(args.runs):
        for delay in delays:
            order = named if r % 2 == 0 else list(reversed(named))
            for name, path in order:
                seen.setdefault((name, delay), []).append(ending(path, delay, env))
    print(f"load average {os.getloadavg()[0]:.2f}; {args.runs} runs a delay")
    print(f"{'delay ms':>9}  " + "  ".join(f"{n:>32}" for n, _ in named))
    window = dict.fromkeys((n for n, _ in named), 0.0)
    area = dict.fromkeys((n for n, _ in named), 0.0)
    for delay in delays:
        cells = []
        for name, _ in named:
            got = seen[(name, delay)]
            share = {c: got.count(c) / len(got) for c in (143, 130, 0)}
            other = 1 - sum(share.values())
            area[name] += share[143] * args.step
            if share[143] >= 0.5:
                window[name] = delay
            cell = f"143 {share[143]:4.0%} 130 {share[130]:4.0%} 0 {share[0]:4.0%}"
            cells.append(cell + (f" other {other:4.0%}" if other > 0 else ""))
        print(f"{delay:9.1f}  " + "  ".join(f"{c:>32}" for c in cells))
    for name, _ in named:
        print(
            f"{name}: window {area[name]:.1f} ms (the delays' share killed by the signal, "
            f"summed); last delay with >= 50% killed: {window[name]:.1f} ms"
        )
    py = str(Path(named[0][1]).parent / "python")
    print(f"python -I -S -c pass: {cpu_ms([py, '-I', '-S', '-c', 'pass'], 15):.1f} ms CPU")
    print(f"python -c pass:       {cpu_ms([py, '-c', 'pass'], 15):.1f} ms CPU (with site)")


if __name__ == "__main__":
    sys.exit(main())
