"""Benchmark of hostile config files (issue 9): time and peak memory to reject them. Targets in
brackets.

- the YAML alias bomb ("billion laughs", 9 levels of 10 aliases: 10**9 strings once expanded)
  and a 30-level one (10**30) [< 1 s, < 10 MB peak];
- a 10,000-deep flow collection and a 1,000-deep block mapping [< 1 s, < 10 MB];
- a valid config of the example's size, for comparison.

Each case is loaded in-process with `load_settings` (the path every command takes) under
tracemalloc; the median of --runs is printed. Run: .venv/bin/python bench/bench_config.py
"""

from __future__ import annotations

import argparse
import statistics
import sys
import tempfile
import time
import tracemalloc
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from countbot_cli.config.example import EXAMPLE_CONFIG  # noqa: E402
from countbot_cli.config.settings import load_settings  # noqa: E402
from countbot_cli.errors import ConfigError  # noqa: E402


def alias_bomb(levels: int, width: int = 10) -> str:
    body = ["bomb:", '  - &l0 "lol"']
    for n in range(1, levels + 1):
        body.append(f"  - &l{n} [" + ", ".join(f"*l{n - 1}" for _ in range(width)) + "]")
    return "\n".join(body) + "\n"


CASES = {
    "alias bomb 10^9": alias_bomb(9),
    "alias bomb 10^30": alias_bomb(30),
    "flow 10,000 deep": "tools: " + "[" * 10_000 + "]" * 10_000 + "\n",
    "block 1,000 deep": "".join("  " * i + f"k{i}:\n" for i in range(1000)) + "  " * 1000 + "v\n",
    "example config (valid)": EXAMPLE_CONFIG,
}


def measure(path: Path, runs: int) -> tuple[float, int, str]:
    """(median seconds, peak bytes of the last run, outcome)."""
    times: list[float] = []
    peak, outcome = 0, ""
    env = {"HOME": str(path.parent), "OPENAI_API_KEY": "sk-bench"}
    for _ in range(runs):
        tracemalloc.start()
        started = time.perf_counter()
        try:
            load_settings(config_path=path, env=env, cwd=path.parent)
            outcome = "loaded"
        except ConfigError as e:
            outcome = f"exit {e.exit_code}: {e.user_message()[:70]}"
        times.append(time.perf_counter() - started)
        peak = tracemalloc.get_traced_memory()[1]
        tracemalloc.stop()
    return statistics.median(times), peak, outcome


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=5)
    args = parser.parse_args()
    import yaml  # noqa: F401  (imported once up front: its import time is not the bound's)

    with tempfile.TemporaryDirectory() as tmp:
        for name, text in CASES.items():
            path = Path(tmp) / "config.yaml"
            path.write_text(text, encoding="utf-8")
            seconds, peak, outcome = measure(path, args.runs)
            print(f"{name:<24} {seconds * 1000:8.1f} ms  peak {peak / 1e6:6.2f} MB  {outcome}")
    print("targets: each hostile file refused in < 1 s with < 10 MB peak")


if __name__ == "__main__":
    main()
