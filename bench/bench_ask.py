"""`ask --plain` against the standard-library floor client, side by side in one run (issue 25
point 2: countbot <= 2.5x the floor; 3.3x when the issue was filed).

Interleaved rounds (floor, then each countbot given) against one instant loopback server; for
each command the median wall time and the CPU time (user+sys of the reaped process), and each
countbot's ratio to the floor. `--importtime` also prints the self times of `ask --plain`'s
imports by package, each countbot side by side (`python -X importtime`, medians of
`--importtime-runs` runs; the standard library's under the package that imported it). `--instructions` also counts the
instructions each command executes (valgrind's callgrind, one run each, ~30 s): a figure the
load of a shared machine does not move, where CPU times do by 10-20 %. Under valgrind a run
takes seconds, so countbot's collector comes back on during it (`__main__.START_UP_SECONDS`).

Run: .venv/bin/python bench/bench_ask.py --countbot today=/tmp/base/.venv/bin/countbot \\
         --countbot now=.venv/bin/countbot [-n 15] [--importtime] [--instructions]
"""

from __future__ import annotations

import argparse
import os
import re
import resource
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from collections import Counter
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "bench"))

from bench_startup import bench_env, start_server, write_config  # noqa: E402

FLOOR = ROOT / "bench" / "floor_client.py"
PROMPT = "hi"


def run(cmd: list[str], env: dict[str, str], cwd: Path) -> tuple[float, float]:
    """(wall ms, CPU ms) of one run of `cmd`."""
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    t0 = time.perf_counter()
    res = subprocess.run(cmd, env=env, cwd=cwd, stdin=subprocess.DEVNULL, capture_output=True)
    wall = (time.perf_counter() - t0) * 1000
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    if res.returncode != 0 or b"Hello" not in res.stdout:
        raise SystemExit(f"{cmd[:2]} failed ({res.returncode}): {res.stderr.decode()[-400:]}")
    cpu = (after.ru_utime - before.ru_utime + after.ru_stime - before.ru_stime) * 1000
    return wall, cpu


def instructions(cmd: list[str], env: dict[str, str], cwd: Path) -> int | None:
    """Instructions `cmd` executes (valgrind's Ir), or None without valgrind."""
    if shutil.which("valgrind") is None:
        return None
    res = subprocess.run(
        ["valgrind", "--tool=callgrind", "--callgrind-out-file=/dev/null", *cmd],
        env=env,
        cwd=cwd,
        stdin=subprocess.DEVNULL,
        capture_output=True,
        text=True,
    )
    found = re.search(r"Collected : (\d+)", res.stderr)
    if res.returncode != 0 or "Hello" not in res.stdout or found is None:
        raise SystemExit(f"{cmd[:2]} under valgrind failed: {res.stderr[-400:]}")
    return int(found.group(1))


def importtime(countbot: str, env: dict[str, str], cwd: Path) -> Counter[str]:
    """The self times (µs) of one `ask --plain`'s imports (`python -X importtime`) by package:
    countbot's own by subpackage (`countbot_cli.config`), another library by its top-level
    name, and a standard-library module under the package that first imported it
    (`stdlib <- typer`; `stdlib <- start-up` for the interpreter's own and site's)."""
    python = str(Path(countbot).parent / "python")
    code = "import sys; from countbot_cli.__main__ import main; sys.exit(main())"
    res = subprocess.run(
        [python, "-X", "importtime", "-c", code, "ask", "--no-save", "--plain", PROMPT],
        env=env,
        cwd=cwd,
        capture_output=True,
        text=True,
    )
    rows = re.findall(r"import time:\s+(\d+) \|\s+\d+ \|( *)(\S+)", res.stderr)
    groups: Counter[str] = Counter()
    above: list[tuple[int, str | None]] = []  # (depth, package) of the importers, innermost last
    for self_us, indent, name in reversed(rows):  # a module's importer is printed after it
        depth = len(indent)
        while above and above[-1][0] >= depth:
            above.pop()
        package = _package(name)
        if package is None:
            importer = next((p for _, p in reversed(above) if p is not None), "start-up")
            groups[f"stdlib <- {importer}"] += int(self_us)
        else:
            groups[package] += int(self_us)
        above.append((depth, package))
    return groups


def _package(module: str) -> str | None:
    """The group of `module` (see importtime); None for the standard library's."""
    parts = module.split(".")
    if parts[0] == "countbot_cli":
        return ".".join(parts[:2])
    if parts[0] in sys.stdlib_module_names or parts[0] in ("_frozen_importlib_external",):
        return None
    return parts[0]


def importtime_table(
    clients: list[tuple[str, str]], env: dict[str, str], cwd: Path, runs: int
) -> list[str]:
    """Each countbot's median self times by package (ms) side by side, largest first."""
    medians: dict[str, dict[str, float]] = {}
    for label, path in clients:
        got = [importtime(path, env, cwd) for _ in range(runs)]
        names = set().union(*got)
        medians[label] = {n: statistics.median(g.get(n, 0) for g in got) / 1000 for n in names}
    names = sorted(
        set().union(*medians.values()), key=lambda n: -max(m.get(n, 0) for m in medians.values())
    )
    labels = [label for label, _ in clients]
    out = [f"{'package (self times, ms)':44}" + "".join(f"{label:>10}" for label in labels)]
    for title, keep in (
        ("all imports", lambda n: True),
        ("countbot_cli (own modules)", lambda n: n.startswith("countbot_cli")),
    ):
        out.append(
            f"{title:44}"
            + "".join(
                f"{sum(v for n, v in medians[label].items() if keep(n)):10.1f}" for label in labels
            )
        )
    for name in names:
        if max(medians[label].get(name, 0) for label in labels) >= 0.3:
            out.append(
                f"  {name:42}" + "".join(f"{medians[label].get(name, 0):10.1f}" for label in labels)
            )
    return out


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--countbot", action="append", default=[], help="LABEL=PATH")
    ap.add_argument("-n", type=int, default=15)
    ap.add_argument("--importtime", action="store_true")
    ap.add_argument("--importtime-runs", type=int, default=7)
    ap.add_argument("--instructions", action="store_true")
    args = ap.parse_args()
    clients = [(c.split("=", 1)[0], os.path.abspath(c.split("=", 1)[1])) for c in args.countbot]
    if not clients:
        clients = [("countbot", str(Path(sys.executable).parent / "countbot"))]
    python = shutil.which("python3") or sys.executable
    real = subprocess.run(
        [python, "-c", "import sys; print(sys.executable)"], capture_output=True, text=True
    )
    python = real.stdout.strip() or python  # the interpreter itself, not a shim
    server, base = start_server()
    tmp = Path(tempfile.mkdtemp(prefix="cb-ask-"))
    try:
        work = tmp / "work"
        work.mkdir()
        write_config(tmp, base)
        env = bench_env(tmp)
        cmds = {"floor": [python, str(FLOOR), base, PROMPT]}
        for label, path in clients:
            cmds[label] = [path, "ask", "--no-save", "--plain", PROMPT]
        for cmd in cmds.values():  # warm the page cache (and any cache of the server's facts)
            run(cmd, env, work)
        got: dict[str, list[tuple[float, float]]] = {k: [] for k in cmds}
        for _ in range(args.n):
            for label, cmd in cmds.items():
                got[label].append(run(cmd, env, work))
        floor_wall = statistics.median(w for w, _ in got["floor"])
        floor_cpu = statistics.median(c for _, c in got["floor"])
        print(f"ask --plain {PROMPT!r}, {args.n} interleaved rounds, medians (min-max)")
        print(f"{'command':10} {'wall ms':>22} {'cpu ms':>22} {'x floor wall':>13} {'x cpu':>7}")
        for label, runs in got.items():
            walls, cpus = [w for w, _ in runs], [c for _, c in runs]
            w, c = statistics.median(walls), statistics.median(cpus)
            print(
                f"{label:10} {w:8.0f} ({min(walls):5.0f}-{max(walls):5.0f})"
                f" {c:8.0f} ({min(cpus):5.0f}-{max(cpus):5.0f})"
                f" {w / floor_wall:12.2f}x {c / floor_cpu:6.2f}x"
            )
        print(f"floor: {' '.join(cmds['floor'][:2])} BASE {PROMPT}")
        if args.instructions:
            counts = {label: instructions(cmd, env, work) for label, cmd in cmds.items()}
            if counts["floor"]:
                print("instructions executed (valgrind, one run each):")
                for label, n in counts.items():
                    print(f"{label:10} {(n or 0) / 1e6:8.0f} M {(n or 0) / counts['floor']:6.2f}x")
        if args.importtime:
            print(
                f"-X importtime of ask --plain by package, medians of {args.importtime_runs} runs:"
            )
            print("\n".join(importtime_table(clients, env, work, args.importtime_runs)))
    finally:
        server.terminate()
        server.wait(5)
        shutil.rmtree(tmp, ignore_errors=True)


if __name__ == "__main__":
    main()
