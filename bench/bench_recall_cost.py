"""What recall by meaning costs `countbot ask`, side by side in one run: each countbot given
(`--countbot NAME=PATH`, e.g. the tree before a change and after it) gets a home of its own
(config with `memory.inject: relevant`, a generated MEMORY.md of `--lines` lines, a cache
folder) and one loopback server answers them all. Sections (`--only` picks some):

- warm: `ask --plain --no-save` with recall on, with `memory.recall_keep: 0` ("fresh": each
  ask loads the encoders, as the first after an idle pause; for a countbot that knows the key)
  and with `memory.inject: off` (same memory, interleaved, after a warm-up that embeds every
  line, `warm_up`): median wall, and peak RSS of countbot's own process and of its largest
  child (sampled from /proc every 5 ms: VmHWM); the encoder process kept between asks, VmRSS;
- cold: the vector cache removed (the recall model's cache kept), then `ask` again and again
  until one says nothing about embedding: the first answer's wall, the runs, their total wall;
- 1mb: a MEMORY.md of a dozen lines and one line of 1 MB (cold): the wall of `ask` asking
  about the line's start (cut at `--timeout`) and whether the line's start reached the request;
- sigterm: a cold build under way (`--sigterm-after` seconds into an `ask` whose answer is
  slow), SIGTERM: seconds until the process is gone, its exit code, the vector cache's size
  after it and whether the next run embeds fewer lines than all;
- repl: the REPL idle on a pseudo-terminal with that memory (vectors warm): VmRSS of countbot's
  process and of its children after `--wait` seconds.

Run: .venv/bin/python bench/bench_recall_cost.py --countbot before=/tmp/before/cb \\
         --countbot after=.venv/bin/countbot [--lines 2000] [-n 7] [--only warm,cold]
"""

from __future__ import annotations

import argparse
import json
import os
import random
import shutil
import signal
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "bench"))

from bench_rss import repl_idle  # noqa: E402
from bench_startup import bench_env, recall_waits, start_server  # noqa: E402

sys.path.insert(0, str(ROOT / "tests" / "helpers"))
from lingering import end_serving, serving_pid  # noqa: E402

QUESTION = "which instrument do I play?"
BIG_START = "the kumquat deploy log of the night the payments cluster fell over"
PEOPLE = ["my sister", "my landlord", "Tom from the club", "our CTO", "the dentist", "my mother"]
THINGS = [
    "the production database",
    "the staging cluster",
    "the espresso machine",
    "the bike",
    "the flat in Lisbon",
    "the cello",
    "the book club",
    "the garden",
    "the quarterly report",
    "the VPN",
]
ACTS = [
    "needs {n} minutes of care every {d}",
    "was moved to {p} on {d}",
    "costs {n} euros a month since {d}",
    "is looked after by {p}",
    "broke twice in {d}",
    "should be checked before {d}",
]
ZH = [
    "父母住在杭州西湖边",
    "每周一早上开周会",
    "周末去望京吃火锅",
    "孩子在学钢琴",
    "新手机是华为的",
]
DAYS = ["Monday", "Friday", "March", "the summer", "2023", "the holidays"]


def memory_lines(n: int) -> list[str]:
    """`n` varied memory lines (a fifth Chinese), the same every run; one about the cello."""
    rng = random.Random(7)
    out = ["has taken cello lessons on Tuesdays since 2019"]
    while len(out) < n:
        if rng.random() < 0.2:
            out.append(f"{rng.choice(ZH)}，第{len(out)}条，{rng.choice(DAYS)}")
            continue
        act = rng.choice(ACTS).format(
            n=rng.randint(2, 900), d=rng.choice(DAYS), p=rng.choice(PEOPLE)
        )
        out.append(f"{rng.choice(THINGS)} {act} (note {len(out)})")
    return out


def write_home(tmp: Path, base: str, lines: list[str], inject: str = "relevant") -> Path:
    """Config, memory (in notes/) and sessions under tmp; the memory file."""
    cfg = tmp / "xdg" / "countbot" / "config.yaml"
    cfg.parent.mkdir(parents=True, exist_ok=True)
    memory = tmp / "notes" / "MEMORY.md"
    cfg.write_text(
        "default_provider: bench\nproviders:\n  bench:\n    type: openai\n"
        f"    api_base: {base}\n    api_key: sk-bench\n    model: test-model\n"
        "    context_window: 32768\n"
        "tools:\n  enabled: false\nmemory:\n  overflow_summary: false\n  auto_memory: false\n"
        f"  inject: {inject}\n  file: {json.dumps(str(memory))}\n",
        encoding="utf-8",
    )
    memory.parent.mkdir(exist_ok=True)
    body = "".join(
        f"2025-{1 + i % 12:02d}-{1 + i % 28:02d}|user|{c}\n" for i, c in enumerate(lines)
    )
    memory.write_text("# MEMORY\n" + body, encoding="utf-8")
    return memory


def _tree(pid: int) -> list[int]:
    """`pid` and its descendants (through /proc/PID/task/*/children)."""
    out, todo = [], [pid]
    while todo:
        p = todo.pop()
        out.append(p)
        try:
            for task in os.listdir(f"/proc/{p}/task"):
                text = Path(f"/proc/{p}/task/{task}/children").read_text()
                todo.extend(int(c) for c in text.split())
        except OSError:
            pass
    return out


def _hwm(pid: int) -> float | None:
    try:
        for line in Path(f"/proc/{pid}/status").read_text().splitlines():
            if line.startswith("VmHWM:"):
                return int(line.split()[1]) / 1024  # kB -> MiB
    except OSError:
        return None
    return None


class Run:
    """One command, its wall time, exit code, stderr and sampled peak RSS per process."""

    def __init__(self, cmd: list[str], env: dict[str, str], cwd: Path, timeout: float = 600):
        self.peaks: dict[int, float] = {}
        t0 = time.perf_counter()
        self.proc = subprocess.Popen(
            cmd,
            env=env,
            cwd=cwd,
            stdin=subprocess.DEVNULL,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
        )
        done = threading.Event()
        sampler = threading.Thread(target=self._sample, args=(done,), daemon=True)
        sampler.start()
        try:
            out, err = self.proc.communicate(timeout=timeout)
            self.timed_out = False
        except subprocess.TimeoutExpired:
            for p in _tree(self.proc.pid):
                with _quiet():
                    os.kill(p, signal.SIGKILL)
            out, err = self.proc.communicate()
            self.timed_out = True
        self.wall = time.perf_counter() - t0
        done.set()
        sampler.join()
        self.code = self.proc.returncode
        self.stdout = out.decode("utf-8", "replace")
        self.stderr = err.decode("utf-8", "replace")

    def _sample(self, done: threading.Event) -> None:
        while not done.is_set():
            for p in _tree(self.proc.pid):
                if (v := _hwm(p)) is not None:
                    self.peaks[p] = max(v, self.peaks.get(p, 0.0))
            done.wait(0.005)

    @property
    def own_peak(self) -> float:
        return self.peaks.get(self.proc.pid, 0.0)

    @property
    def child_peak(self) -> float:
        return max((v for p, v in self.peaks.items() if p != self.proc.pid), default=0.0)


class _quiet:
    def __enter__(self) -> None:
        return None

    def __exit__(self, *exc: object) -> bool:
        return exc[0] is not None and issubclass(exc[0], OSError)  # type: ignore[arg-type]


def ask(path: str, question: str = QUESTION) -> list[str]:
    return [path, "ask", "--plain", "--no-save", question]


def embedding_said(stderr: str) -> bool:
    """Whether a run said anything about recall by meaning: lines embedded, still to embed,
    or its encoders not ready (a run that says nothing had every line's vector)."""
    return "embedd" in stderr or "by meaning" in stderr


def remove_vectors(tmp: Path) -> None:
    """Every vector cache of the home (beside MEMORY.md, or in the cache folder); the recall
    model's cache stays."""
    for folder in (tmp / "notes", tmp / "cache"):
        for f in folder.rglob("*vectors*") if folder.exists() else ():
            if f.is_file():
                f.unlink()


def vectors_size(tmp: Path) -> int:
    return sum(
        f.stat().st_size
        for folder in (tmp / "notes", tmp / "cache")
        if folder.exists()
        for f in folder.rglob("*vectors*")
        if f.is_file()
    )


def off_env(tmp: Path, env: dict[str, str]) -> dict[str, str]:
    """The same home with `memory.inject: off` (a config folder of its own)."""
    shutil.copytree(tmp / "xdg", tmp / "xdg-off", dirs_exist_ok=True)
    cfg = tmp / "xdg-off" / "countbot" / "config.yaml"
    cfg.write_text(cfg.read_text().replace("inject: relevant", "inject: off"))
    return {**env, "XDG_CONFIG_HOME": str(tmp / "xdg-off")}


def warm_up(name: str, path: str, tmp: Path, env: dict[str, str]) -> None:
    """Every line embedded: one ask that waits for all of them (`memory.recall_wait` raised
    for it alone, then the config put back), then asks until one says nothing about embedding
    (a countbot that does not know the key: a cold build spanning runs)."""
    with recall_waits(tmp / "xdg" / "countbot" / "config.yaml", 900):
        Run(ask(path), env, tmp, timeout=1800)
    for _ in range(1000):
        r = Run(ask(path), env, tmp, timeout=1800)
        if r.code:
            raise SystemExit(f"{name}: warm-up failed: {r.stderr[-500:]}")
        if not embedding_said(r.stderr):
            break


def fresh_env(tmp: Path, env: dict[str, str]) -> dict[str, str]:
    """The same home with `memory.recall_keep: 0`: each ask loads the encoders itself, as the
    first ask after an idle pause does (a config folder of its own)."""
    shutil.copytree(tmp / "xdg", tmp / "xdg-fresh", dirs_exist_ok=True)
    cfg = tmp / "xdg-fresh" / "countbot" / "config.yaml"
    cfg.write_text(
        cfg.read_text().replace("inject: relevant\n", "inject: relevant\n  recall_keep: 0\n")
    )
    return {**env, "XDG_CONFIG_HOME": str(tmp / "xdg-fresh")}


def kept_rss(env: dict[str, str]) -> tuple[float, float]:
    """VmRSS and RssAnon (MiB) of the encoder process a countbot left serving this home's cache
    folder (memory.recall_keep): what it holds, and how much of that is its own rather than
    pages of the model files the kernel can drop and read again; zeros when none serves."""
    pid = serving_pid(Path(env["XDG_CACHE_HOME"]) / "countbot")
    if not pid:
        return 0.0, 0.0
    fields = dict(
        line.split(":", 1) for line in Path(f"/proc/{pid}/status").read_text().splitlines()
    )
    return int(fields["VmRSS"].split()[0]) / 1024, int(fields["RssAnon"].split()[0]) / 1024


def section_warm(bots: list[tuple[str, str, Path, dict[str, str]]], n: int) -> None:
    print(f"\n## warm ask: median of {n} interleaved rounds (wall s; peak RSS MiB, sampled)")
    print("(on: as configured, the encoders kept by an earlier ask when the countbot keeps them;")
    print(" fresh: `recall_keep: 0`, each ask loads them, as the first ask after an idle pause)")
    print(f"{'countbot':10} {'recall':7} {'wall':>7} {'own peak':>9} {'child peak':>11}")
    rows: dict[tuple[str, str], list[Run]] = {}
    envs = {}
    modes: dict[str, list[str]] = {}
    for name, path, tmp, env in bots:
        envs[(name, "on")], envs[(name, "off")] = env, off_env(tmp, env)
        envs[(name, "fresh")] = fresh_env(tmp, env)
        warm_up(name, path, tmp, env)
        knows_keep = Run(ask(path), envs[(name, "fresh")], tmp).code == 0  # an older: no key
        modes[name] = ["on", "fresh", "off"] if knows_keep else ["on", "off"]
        for mode in modes[name]:
            rows[(name, mode)] = []
    for _ in range(n):
        for name, path, tmp, _env in bots:
            for mode in modes[name]:
                r = Run(ask(path), envs[(name, mode)], tmp)
                if r.code:
                    raise SystemExit(f"{name} {mode}: {r.stderr[-500:]}")
                rows[(name, mode)].append(r)
    for (name, mode), runs in rows.items():
        wall = statistics.median(r.wall for r in runs)
        own = statistics.median(r.own_peak for r in runs)
        child = statistics.median(r.child_peak for r in runs)
        print(f"{name:10} {mode:7} {wall:7.3f} {own:9.1f} {child:11.1f}")
    for name, _path, _tmp, env in bots:
        off = rows[(name, "off")]
        for mode in modes[name][:-1]:
            on = rows[(name, mode)]
            ratio = statistics.median(r.wall for r in on) / statistics.median(r.wall for r in off)
            own = statistics.median(r.own_peak for r in on) - statistics.median(
                r.own_peak for r in off
            )
            both = statistics.median(r.own_peak + r.child_peak for r in on) - statistics.median(
                r.own_peak + r.child_peak for r in off
            )
            print(
                f"{name:10} {mode}/off: wall {ratio:.2f}x; own peak {own:+.1f} MiB; "
                f"own + child peaks {both:+.1f} MiB"
            )
        rss, anon = kept_rss(env)
        print(
            f"{name:10} encoder process kept between asks: {rss:.1f} MiB resident, "
            f"{anon:.1f} MiB of it its own (the rest: model file pages)"
        )


def section_cold(
    bots: list[tuple[str, str, Path, dict[str, str]]], limit: float, delay: float
) -> None:
    print(
        "\n## cold vector cache (the recall model's cache warm): asks until one is quiet; "
        f"the answer takes {6 * delay:.1f} s"
    )
    print(f"{'countbot':10} {'first answer s':>15} {'runs':>5} {'all embedded s':>15}")
    for name, path, tmp, env in bots:
        remove_vectors(tmp)
        total, runs, first = 0.0, 0, None
        while total < limit:
            r = Run(ask(path), env, tmp, timeout=max(limit - total, 1))
            runs += 1
            total += r.wall
            if first is None:
                first = r.wall
            if r.code or r.timed_out:
                print(f"{name:10} run {runs}: exit {r.code} {r.stderr[-300:]!r}")
                break
            if not embedding_said(r.stderr):
                total -= r.wall  # the quiet run embedded nothing
                runs -= 1
                break
        else:
            runs = -runs
        done = f"{total:15.1f}" if runs > 0 else f">{limit:.0f} (cut)"
        print(f"{name:10} {first or 0:15.2f} {abs(runs):5d} {done:>15}")


def section_big(
    bots: list[tuple[str, str, Path, dict[str, str]]], base_dir: Path, timeout: float
) -> None:
    print(f"\n## a 1 MB memory line, cold (cut at {timeout:.0f} s)")
    print(f"{'countbot':10} {'wall s':>8} {'exit':>5} {'line start sent':>16}")
    rng = random.Random(3)
    words = ["alpha", "beta", "gamma", "delta", "error", "retry", "timeout", "node", "shard"]
    filler = " ".join(rng.choice(words) for _ in range(180_000))[:1_000_000]
    lines = memory_lines(12) + [f"{BIG_START}: {filler}"]
    for name, path, _tmp, env in bots:
        tmp = base_dir / f"{name}-big"
        tmp.mkdir()
        record = tmp / "requests.jsonl"
        server, base = start_server("--record", str(record))
        try:
            write_home(tmp, base, lines)
            e = {
                **env,
                "XDG_CONFIG_HOME": str(tmp / "xdg"),
                "XDG_CACHE_HOME": env["XDG_CACHE_HOME"],
            }
            r = Run(
                ask(path, "what happened the night the payments cluster fell over?"),
                e,
                tmp,
                timeout=timeout,
            )
        finally:
            server.kill()
        sent = record.exists() and BIG_START in record.read_text("utf-8", "replace")
        wall = f">{timeout:.0f}" if r.timed_out else f"{r.wall:.2f}"
        print(f"{name:10} {wall:>8} {r.code!s:>5} {sent!s:>16}")


def section_sigterm(
    bots: list[tuple[str, str, Path, dict[str, str]]], base_dir: Path, after: float
) -> None:
    print(f"\n## SIGTERM {after:.1f} s into an ask with a cold vector cache (slow answer)")
    print(f"{'countbot':10} {'exit s':>7} {'code':>5} {'cache bytes':>12} {'next run':>30}")
    server, base = start_server("--delay", "1")
    try:
        for name, path, tmp, env in bots:
            home = base_dir / f"{name}-term"
            shutil.copytree(tmp / "xdg", home / "xdg")
            shutil.copytree(tmp / "notes", home / "notes")
            cfg = home / "xdg" / "countbot" / "config.yaml"
            text = cfg.read_text().replace(str(tmp / "notes"), str(home / "notes"))
            cfg.write_text(text.replace(text.split("api_base: ")[1].split("\n")[0], base))
            remove_vectors(home)
            e = {**env, "XDG_CONFIG_HOME": str(home / "xdg")}
            proc = subprocess.Popen(
                ask(path),
                env=e,
                cwd=home,
                stdin=subprocess.DEVNULL,
                stdout=subprocess.DEVNULL,
                stderr=subprocess.DEVNULL,
            )
            time.sleep(after)
            t0 = time.perf_counter()
            proc.send_signal(signal.SIGTERM)
            try:
                code: int | str = proc.wait(30)
                gone = f"{time.perf_counter() - t0:7.2f}"
            except subprocess.TimeoutExpired:
                for p in _tree(proc.pid):
                    with _quiet():
                        os.kill(p, signal.SIGKILL)
                proc.wait()
                code, gone = "KILL", "    >30"
            size = vectors_size(home)
            nxt = Run(ask(path), e, home, timeout=5)
            said = [ln for ln in nxt.stderr.splitlines() if "embedd" in ln][:1]
            print(f"{name:10} {gone:>7} {code!s:>5} {size:12d} {(said or ['(quiet)'])[0][-60:]}")
    finally:
        server.kill()


def section_repl(bots: list[tuple[str, str, Path, dict[str, str]]], wait: float, reps: int) -> None:
    print(f"\n## REPL idle with that memory (vectors warm), VmRSS after {wait:.0f} s, MB")
    print(f"{'countbot':10} {'own':>7} {'children':>9}")
    for _ in range(reps):
        for name, path, tmp, env in bots:
            e = {**env, "TERM": "xterm-256color", "COLUMNS": "100", "LINES": "40"}
            rss = repl_idle([path], e, tmp, wait)
            print(f"{name:10} {rss['VmRSS']:7.1f} {rss['children']:9.1f}")


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--countbot", action="append", required=True, help="NAME=PATH")
    ap.add_argument("--lines", type=int, default=2000)
    ap.add_argument("-n", type=int, default=7)
    ap.add_argument("--only", default="cold,warm,repl,1mb,sigterm")
    ap.add_argument(
        "--answer-delay", type=float, default=0.0, help="seconds between the answer's 6 chunks"
    )
    ap.add_argument("--timeout", type=float, default=120.0, help="1 MB line: cut after this")
    ap.add_argument("--cold-limit", type=float, default=900.0)
    ap.add_argument("--sigterm-after", type=float, default=3.0)
    ap.add_argument("--wait", default="8,30", help="REPL idle: seconds, comma-separated")
    args = ap.parse_args()
    only = set(args.only.split(","))
    print(f"load average at start: {os.getloadavg()}")
    server, base = start_server("--delay", str(args.answer_delay))
    top = Path(tempfile.mkdtemp(prefix="bench-recall-cost-"))
    try:
        bots = []
        for spec in args.countbot:
            name, path = spec.split("=", 1)
            tmp = top / name
            tmp.mkdir()
            write_home(tmp, base, memory_lines(args.lines))
            env = bench_env(tmp, XDG_CACHE_HOME=str(tmp / "cache"))
            bots.append((name, os.path.abspath(path), tmp, env))
        if "cold" in only:  # first: it leaves every vector embedded for the next ones
            section_cold(bots, args.cold_limit, args.answer_delay)
        if "warm" in only:
            section_warm(bots, args.n)
        if "repl" in only:
            for wait in args.wait.split(","):
                section_repl(bots, float(wait), 1)
        if "1mb" in only:
            section_big(bots, top, args.timeout)
        if "sigterm" in only:
            section_sigterm(bots, top, args.sigterm_after)
    finally:
        server.kill()
        for spec in args.countbot:  # the encoders a countbot kept for the next ask
            end_serving(top / spec.split("=", 1)[0] / "cache" / "countbot")
        shutil.rmtree(top, ignore_errors=True)
    print(f"\nload average at end: {os.getloadavg()}")


if __name__ == "__main__":
    main()
