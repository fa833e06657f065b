"""Start-up and one-shot latency of countbot against `llm`, side by side in one run.

Prints medians (ms) over N runs of:
  countbot --version / --help
  countbot ask --plain hi            (stdout a pipe; loopback test server answering at once)
  countbot ask hi on a pseudo-terminal (markdown rendering)
  llm --version / --help / llm -m <model> hi   (same loopback server; plugins off)
and the ratio llm / countbot. Targets (issue 2): --version <= 80 ms, --help <= 250 ms,
ask --plain <= 450 ms, ask on a pty <= 650 ms, each >= 3x faster than llm.

Usage: python bench/bench_startup.py [-n RUNS]
"""

from __future__ import annotations

import argparse
import os
import pty
import select
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
BIN = Path(sys.executable).parent


def start_server() -> tuple[subprocess.Popen[str], str]:
    proc = subprocess.Popen(
        [
            sys.executable,
            str(ROOT / "tests" / "helpers" / "fakeserver.py"),
            "--port",
            "0",
            "--text",
            "Hello! **How** can I help?",
            "--default",
        ],
        stdout=subprocess.PIPE,
        text=True,
    )
    assert proc.stdout is not None
    line = proc.stdout.readline().strip()
    if not line.startswith("READY "):
        proc.kill()
        raise SystemExit(f"fake server did not start: {line!r}")
    return proc, line.split(" ", 1)[1]


def write_config(tmp: Path, base: str, model: str = "test-model", context_window: int = 0) -> None:
    """The user's own config under tmp/xdg (a ./config.yaml would need `countbot config trust`
    first): the loopback server at `base`, tools, overflow summaries and auto memory off."""
    cfg = tmp / "xdg" / "countbot" / "config.yaml"
    cfg.parent.mkdir(parents=True)
    window = f"    context_window: {context_window}\n" if context_window else ""
    cfg.write_text(
        "default_provider: bench\nproviders:\n  bench:\n    type: openai\n"
        f"    api_base: {base}\n    api_key: sk-bench\n    model: {model}\n{window}"
        "tools:\n  enabled: false\nmemory:\n  overflow_summary: false\n  auto_memory: false\n",
        encoding="utf-8",
    )


def write_llm_config(tmp: Path, base: str, model: str = "test-model") -> Path:
    """`llm`'s home under tmp, its model `bench` pointing at the loopback server; returns it."""
    llm_home = tmp / "llm"
    llm_home.mkdir()
    (llm_home / "extra-openai-models.yaml").write_text(
        f"- model_id: bench\n  model_name: {model}\n  api_base: {base}\n", encoding="utf-8"
    )
    return llm_home


def bench_env(tmp: Path, **extra: str) -> dict[str, str]:
    """A clean environment with its home, config and data under tmp, plus `extra`."""
    return {
        "PATH": os.environ.get("PATH", ""),
        "HOME": str(tmp),
        "LANG": "C.UTF-8",
        "XDG_CONFIG_HOME": str(tmp / "xdg"),
        "XDG_DATA_HOME": str(tmp / "data"),
        **extra,
    }


def time_pipe(cmd: list[str], env: dict[str, str], cwd: Path) -> float:
    t0 = time.perf_counter()
    res = subprocess.run(
        cmd,
        env=env,
        cwd=cwd,
        stdin=subprocess.DEVNULL,
        capture_output=True,
    )
    dt = time.perf_counter() - t0
    if res.returncode != 0:
        raise SystemExit(f"{cmd} failed ({res.returncode}): {res.stderr.decode()[-500:]}")
    return dt


def time_pty(cmd: list[str], env: dict[str, str], cwd: Path) -> float:
    """Run on a pseudo-terminal, answering cursor-position queries, until the process exits."""
    t0 = time.perf_counter()
    pid, fd = pty.fork()
    if pid == 0:
        os.chdir(cwd)
        os.execvpe(cmd[0], cmd, env)
    while True:
        r, _, _ = select.select([fd], [], [], 10)
        if not r:
            break
        try:
            data = os.read(fd, 65536)
        except OSError:
            break
        if not data:
            break
        if b"\x1b[6n" in data:
            os.write(fd, b"\x1b[1;1R")
    _, status = os.waitpid(pid, 0)
    dt = time.perf_counter() - t0
    os.close(fd)
    if os.waitstatus_to_exitcode(status) != 0:
        raise SystemExit(f"{cmd} failed on the pty ({status})")
    return dt


def median_ms(fn, runs: int) -> float:  # type: ignore[no-untyped-def]
    fn()  # warm the page cache
    return statistics.median(fn() for _ in range(runs)) * 1000


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("-n", type=int, default=11)
    args = ap.parse_args()
    server, base = start_server()
    tmp = Path(tempfile.mkdtemp(prefix="cb-bench-"))
    try:
        work = tmp / "work"
        work.mkdir()
        write_config(tmp, base)
        env = bench_env(
            tmp,
            TERM="xterm-256color",
            LLM_USER_PATH=str(write_llm_config(tmp, base)),
            LLM_LOAD_PLUGINS="",
            OPENAI_API_KEY="sk-bench",
            COLUMNS="80",
            LINES="24",
        )
        cb = str(BIN / "countbot")
        llm = shutil.which("llm", path=str(BIN)) or shutil.which("llm")
        rows: list[tuple[str, float, float | None, float]] = []

        def row(name: str, target: float, ours: float, theirs: float | None) -> None:
            rows.append((name, ours, theirs, target))

        n = args.n
        row(
            "--version",
            80,
            median_ms(lambda: time_pipe([cb, "--version"], env, work), n),
            median_ms(lambda: time_pipe([llm, "--version"], env, work), n) if llm else None,
        )
        row(
            "--help",
            250,
            median_ms(lambda: time_pipe([cb, "--help"], env, work), n),
            median_ms(lambda: time_pipe([llm, "--help"], env, work), n) if llm else None,
        )
        llm_ask = (
            median_ms(lambda: time_pipe([llm, "-m", "bench", "--no-log", "hi"], env, work), n)
            if llm
            else None
        )
        row(
            "ask --plain (pipe)",
            450,
            median_ms(lambda: time_pipe([cb, "ask", "--no-save", "--plain", "hi"], env, work), n),
            llm_ask,
        )
        row(
            "ask (markdown, pty)",
            650,
            median_ms(lambda: time_pty([cb, "ask", "--no-save", "hi"], env, work), n),
            llm_ask,
        )
        print(f"start-up, median of {n} runs (ms); llm with plugins off, same loopback server")
        print(f"{'command':24} {'countbot':>9} {'target':>7} {'llm':>9} {'llm/countbot':>13}")
        for name, ours, theirs, target in rows:
            ok = "ok " if ours <= target else "SLOW"
            ratio = f"{theirs / ours:12.1f}x" if theirs else "           -"
            th = f"{theirs:9.0f}" if theirs else "        -"
            print(f"{name:24} {ours:9.0f} {target:7.0f} {th} {ratio}  {ok}")
    finally:
        server.terminate()
        server.wait(5)
        shutil.rmtree(tmp, ignore_errors=True)


if __name__ == "__main__":
    main()
