"""Start-up and one-shot latency of countbot against `llm`, side by side in one run.

Prints medians (ms) over N runs of:
  countbot --version / --help
  countbot ask --plain hi            (stdout a pipe; loopback test server answering at once)
  countbot ask hi on a pseudo-terminal (markdown rendering)
  countbot sessions list             (stdout a pipe; a store of --sessions saved sessions)
  llm --version / --help / llm -m <model> hi   (same loopback server; plugins off)
and the ratio llm / countbot. Targets (issue 2): --version <= 80 ms, --help <= 250 ms,
ask --plain <= 450 ms, ask on a pty <= 650 ms, each >= 3x faster than llm. The store is made
by this tree's SessionStore in a temporary folder (titles in English and Chinese, 4-40 messages,
some with a summary, updated over the last weeks).

--against DIR also runs the same countbot commands from another checkout of countbot
(DIR/.venv/bin/countbot: a worktree of an older commit with its own venv), in the same rounds as
this tree's (a round alternates who goes first; llm's runs share the rounds too), and prints a
second table: both medians and the ratio this tree / DIR, of the wall time and of the CPU time
(user + system, which a loaded machine disturbs much less). Each keeps its own home (config,
data, caches); both configs name the one sessions folder (`sessions_dir`): the session files
and index.json have the same format in both. Before timing, both must list the same sessions
(`sessions list --json`); after, the bench says whether either rewrote index.json (a tree that
could not read the other's index rows would re-read every session file each run).

--speedups-off times this tree a second time with COUNTBOT_SPEEDUPS=off instead (the plain
path of every adapter in countbot_cli/speedups/), in the same rounds, and prints that table.

Usage: python bench/bench_startup.py [-n RUNS] [--sessions N] [--against DIR | --speedups-off]
"""

from __future__ import annotations

import argparse
import functools
import json
import os
import pty
import resource
import select
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from datetime import datetime, timedelta, timezone
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
BIN = Path(sys.executable).parent


def start_server(*options: str) -> tuple[subprocess.Popen[str], str]:
    """The loopback server answering every request the same (`options`: more of its flags,
    e.g. --delay 1, --record FILE); (its process, its base URL)."""
    proc = subprocess.Popen(
        [
            sys.executable,
            str(ROOT / "tests" / "helpers" / "fakeserver.py"),
            "--port",
            "0",
            "--text",
            "Hello! **How** can I help?",
            "--default",
            *options,
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


def write_config(
    tmp: Path,
    base: str,
    model: str = "test-model",
    context_window: int = 0,
    sessions_dir: Path | None = None,
) -> None:
    """The user's own config under tmp/xdg (a ./config.yaml would need `countbot config trust`
    first): the loopback server at `base`, tools, overflow summaries and auto memory off; the
    sessions in `sessions_dir` when given (else countbot's default beside the config)."""
    cfg = tmp / "xdg" / "countbot" / "config.yaml"
    cfg.parent.mkdir(parents=True)
    window = f"    context_window: {context_window}\n" if context_window else ""
    sessions = f"sessions_dir: {json.dumps(str(sessions_dir))}\n" if sessions_dir else ""
    cfg.write_text(
        "default_provider: bench\nproviders:\n  bench:\n    type: openai\n"
        f"    api_base: {base}\n    api_key: sk-bench\n    model: {model}\n{window}"
        "tools:\n  enabled: false\nmemory:\n  overflow_summary: false\n  auto_memory: false\n"
        f"{sessions}",
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


@contextmanager
def recall_waits(config: Path, seconds: float) -> Iterator[None]:
    """Inside, the config file (written by a recall bench, `inject: relevant`) has
    `memory.recall_wait: seconds`, so one ask embeds every line; the file is put back after."""
    text = config.read_text("utf-8")
    wait = f"  inject: relevant\n  recall_wait: {seconds}\n"
    changed = text.replace("  inject: relevant\n", wait)
    if changed == text:
        raise SystemExit(f"{config}: no 'inject: relevant' line to give recall_wait to")
    config.write_text(changed, "utf-8")
    try:
        yield
    finally:
        config.write_text(text, "utf-8")


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


@dataclass
class Timing:
    """Medians (ms) of one command's runs: wall time, and the CPU time (user + system) of the
    process and the children it waited for, which a loaded machine disturbs much less."""

    wall_ms: float
    cpu_ms: float


def children_cpu() -> float:
    """CPU seconds of every child this process has waited for so far."""
    use = resource.getrusage(resource.RUSAGE_CHILDREN)
    return use.ru_utime + use.ru_stime


def interleaved(runs: list[Callable[[], float]], n: int) -> list[Timing]:
    """The medians of each of `runs` (each returns its wall seconds), all timed in the same n
    rounds: one untimed run each first (the page cache), then round i starts with run i mod
    len(runs), so none always goes first and a load spike hits them alike."""
    for run in runs:
        run()
    wall: list[list[float]] = [[] for _ in runs]
    cpu: list[list[float]] = [[] for _ in runs]
    for i in range(n):
        for k in range(len(runs)):
            j = (i + k) % len(runs)
            before = children_cpu()
            wall[j].append(runs[j]())
            cpu[j].append(children_cpu() - before)
    return [
        Timing(statistics.median(w) * 1000, statistics.median(c) * 1000)
        for w, c in zip(wall, cpu, strict=True)
    ]


SESSION_TOPICS = (
    "How do I read a CSV file with pandas",
    "把这段 Python 代码改成异步的",
    "Why does my Rust borrow checker complain here",
    "Plan a three-day trip to Kyoto",
    "解释一下 TCP 三次握手",
    "Refactor this SQL query for speed",
)
SESSION_TEXT = (
    "Here is an ordinary chat message with some `code`, a list and a link:\n- one\n- two\n"
    "https://example.org/docs 这里还有一些中文内容。\n```python\nprint('hi')\n```\n"
)


def build_store(root: Path, count: int) -> None:
    """`count` saved sessions in `root`, written by this tree's own SessionStore: 4-40 messages
    each, one in five with a summary (its gist shows in the listing), updated 3 hours apart."""
    from countbot_cli.conversation.sessions.session import new_session
    from countbot_cli.conversation.sessions.store import SessionStore
    from countbot_cli.messages import Message

    store = SessionStore(root)
    now = datetime.now(timezone.utc)
    for i in range(count):
        topic = SESSION_TOPICS[i % len(SESSION_TOPICS)]
        s = new_session(provider="bench", model="test-model", title=f"{topic} ({i})")
        s.created_at = s.updated_at = (now - timedelta(hours=3 * i)).strftime("%Y-%m-%dT%H:%M:%SZ")
        s.messages = [
            Message(role="user" if k % 2 == 0 else "assistant", content=f"{topic}? {SESSION_TEXT}")
            for k in range(4 + i % 37)
        ]
        if i % 5 == 0:
            s.summary = f"We went through {topic.lower()}. Then some details."
        store.create(s)


def listing_cache(store: Path, tmp: Path) -> Path:
    """The sessions listing cache (index.json) the trees use: beside the sessions (an older
    countbot) or in their cache folder (HOME=tmp, as `bench_env` sets it)."""
    from countbot_cli.config.home import derived_dir

    old = store / "index.json"
    return old if old.exists() else derived_dir(store, {"HOME": str(tmp)}) / "index.json"


@dataclass
class Tree:
    """One checkout of countbot to time: its countbot executable and the environment it runs in."""

    label: str
    root: Path
    countbot: str
    env: dict[str, str]


def tree_label(root: Path) -> str:
    """`root` and its commit, `+changes` when its work tree differs from it."""
    rev = subprocess.run(
        ["git", "-C", str(root), "rev-parse", "--short", "HEAD"], capture_output=True, text=True
    ).stdout.strip()
    dirty = subprocess.run(
        ["git", "-C", str(root), "status", "--porcelain", "--untracked-files=no"],
        capture_output=True,
        text=True,
    ).stdout.strip()
    return f"{root} ({rev or '?'}{'+changes' if dirty else ''})"


def check_tree(tree: Tree, work: Path) -> None:
    """Refuse a venv whose countbot_cli is not the checkout's own (an editable install made in
    another tree would time that tree instead)."""
    python = Path(tree.countbot).with_name("python")
    res = subprocess.run(
        [str(python), "-c", "import countbot_cli; print(countbot_cli.__file__)"],
        env=tree.env,
        cwd=work,
        capture_output=True,
        text=True,
    )
    found = Path(res.stdout.strip() or "?").resolve()
    if res.returncode != 0 or not found.is_relative_to(tree.root.resolve()):
        raise SystemExit(f"{tree.countbot} runs countbot_cli from {found}, not from {tree.root}")


def listed(tree: Tree, work: Path) -> list[tuple[str, str, int, str]]:
    """What `sessions list --json` shows from this tree: id, title, message count, gist."""
    res = subprocess.run(
        [tree.countbot, "sessions", "list", "--json"], env=tree.env, cwd=work, capture_output=True
    )
    if res.returncode != 0:
        raise SystemExit(f"{tree.label}: sessions list --json failed: {res.stderr.decode()[-500:]}")
    return [(h["id"], h["title"], h["message_count"], h["gist"]) for h in json.loads(res.stdout)]


def check_same_store(trees: list[Tree], work: Path, count: int) -> None:
    """Every tree lists the same `count` sessions from the shared folder."""
    first = listed(trees[0], work)
    if len(first) != count:
        raise SystemExit(f"{trees[0].label} lists {len(first)} sessions, not {count}")
    for tree in trees[1:]:
        if listed(tree, work) != first:
            raise SystemExit(f"{tree.label} lists other sessions than {trees[0].label}")


@dataclass
class Case:
    """A command timed from every tree; `llm` is llm's counterpart, if it has one."""

    name: str
    target: float | None
    argv: list[str]
    on_pty: bool = False
    llm: tuple[str, ...] | None = None


LLM_ASK = ("-m", "bench", "--no-log", "hi")


def cases(sessions: int) -> list[Case]:
    return [
        Case("--version", 80, ["--version"], llm=("--version",)),
        Case("--help", 250, ["--help"], llm=("--help",)),
        Case("ask --plain (pipe)", 450, ["ask", "--no-save", "--plain", "hi"], llm=LLM_ASK),
        Case("ask (markdown, pty)", 650, ["ask", "--no-save", "hi"], on_pty=True, llm=LLM_ASK),
        Case(f"sessions list ({sessions})", None, ["sessions", "list"]),
    ]


@dataclass
class Result:
    case: Case
    trees: list[Timing]  # in the order of the trees
    llm: float | None  # wall ms


def run_cases(
    trees: list[Tree], llm: str | None, work: Path, n: int, sessions: int
) -> list[Result]:
    """Each case's medians: every tree and llm (once per llm command) in the same rounds."""
    results: list[Result] = []
    llm_ms: dict[tuple[str, ...], float] = {}
    for case in cases(sessions):
        timer = time_pty if case.on_pty else time_pipe
        runs: list[Callable[[], float]] = [
            functools.partial(timer, [t.countbot, *case.argv], t.env, work) for t in trees
        ]
        llm_cmd = [llm, *case.llm] if llm and case.llm and case.llm not in llm_ms else None
        if llm_cmd:  # llm's ask is timed once, in the first ask case's rounds
            runs.append(functools.partial(time_pipe, llm_cmd, trees[0].env, work))
        medians = interleaved(runs, n)
        if llm_cmd and case.llm:
            llm_ms[case.llm] = medians.pop().wall_ms
        results.append(Result(case, medians, llm_ms.get(case.llm) if case.llm else None))
    return results


def print_llm_table(results: list[Result], n: int) -> None:
    print(f"start-up, median of {n} runs (ms); llm with plugins off, same loopback server")
    print(f"{'command':24} {'countbot':>9} {'target':>7} {'llm':>9} {'llm/countbot':>13}")
    for r in results:
        ours, theirs, target = r.trees[0].wall_ms, r.llm, r.case.target
        ok = "" if target is None else "ok " if ours <= target else "SLOW"
        ratio = f"{theirs / ours:12.1f}x" if theirs else "           -"
        th = f"{theirs:9.0f}" if theirs else "        -"
        tg = f"{target:7.0f}" if target is not None else "      -"
        print(f"{r.case.name:24} {ours:9.0f} {tg} {th} {ratio}  {ok}".rstrip())


def print_against_table(results: list[Result], trees: list[Tree], n: int) -> None:
    print()
    print(f"this tree: {trees[0].label}")
    print(f"against:   {trees[1].label}")
    print(f"same rounds, median of {n} runs (ms); ratio this/against < 1: this tree is faster")
    print(f"{'':24} {'wall time':^26}   {'CPU time (user + system)':^26}".rstrip())
    print(f"{'command':24} {'this':>8} {'against':>8} {'ratio':>8}", end="")
    print(f"   {'this':>8} {'against':>8} {'ratio':>8}")
    for r in results:
        ours, theirs = r.trees
        wall = f"{ours.wall_ms:8.0f} {theirs.wall_ms:8.0f} {ours.wall_ms / theirs.wall_ms:7.2f}x"
        cpu = f"{ours.cpu_ms:8.0f} {theirs.cpu_ms:8.0f} {ours.cpu_ms / theirs.cpu_ms:7.2f}x"
        print(f"{r.case.name:24} {wall}   {cpu}")


def parse_args() -> argparse.Namespace:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("-n", type=int, default=11, help="timed runs of each command (default 11)")
    ap.add_argument(
        "--sessions", type=int, default=300, help="saved sessions `sessions list` shows (300)"
    )
    ap.add_argument(
        "--against",
        type=Path,
        metavar="DIR",
        help="also time DIR/.venv/bin/countbot (another checkout) in the same rounds",
    )
    ap.add_argument(
        "--speedups-off",
        action="store_true",
        help="also time this tree with COUNTBOT_SPEEDUPS=off, in the same rounds",
    )
    args = ap.parse_args()
    if args.against is not None and args.speedups_off:
        ap.error("--against and --speedups-off: one or the other")
    if args.n < 1 or args.sessions < 1:
        ap.error("-n and --sessions must be at least 1")
    if args.against is not None and not os.access(args.against / ".venv/bin/countbot", os.X_OK):
        ap.error(f"--against {args.against}: no .venv/bin/countbot there (make .venv there first)")
    return args


def make_trees(
    tmp: Path, base: str, against: Path | None, store: Path, speedups_off: bool = False
) -> list[Tree]:
    """This tree and (with --against) the other one, or this one with its speed-ups off, each
    with its own home under tmp and config naming the shared sessions folder `store`."""
    extra = {
        "TERM": "xterm-256color",
        "LLM_USER_PATH": str(write_llm_config(tmp, base)),
        "LLM_LOAD_PLUGINS": "",
        "OPENAI_API_KEY": "sk-bench",
        "COLUMNS": "80",
        "LINES": "24",
    }
    write_config(tmp, base, sessions_dir=store)
    trees = [Tree(tree_label(ROOT), ROOT, str(BIN / "countbot"), bench_env(tmp, **extra))]
    if against is not None:
        home = tmp / "against"
        write_config(home, base, sessions_dir=store)
        bin_dir = against / ".venv" / "bin"
        trees.append(
            Tree(tree_label(against), against, str(bin_dir / "countbot"), bench_env(home, **extra))
        )
    if speedups_off:
        home = tmp / "plain"
        write_config(home, base, sessions_dir=store)
        env = bench_env(home, **extra, COUNTBOT_SPEEDUPS="off")
        trees.append(Tree(tree_label(ROOT) + " speed-ups off", ROOT, str(BIN / "countbot"), env))
    return trees


def main() -> None:
    args = parse_args()
    server, base = start_server()
    tmp = Path(tempfile.mkdtemp(prefix="cb-bench-"))
    try:
        work = tmp / "work"
        work.mkdir()
        store = tmp / "store" / "sessions"
        build_store(store, args.sessions)
        trees = make_trees(tmp, base, args.against, store, args.speedups_off)
        for tree in trees:
            check_tree(tree, work)
        check_same_store(trees, work, args.sessions)
        index = listing_cache(store, tmp).read_bytes()
        llm = shutil.which("llm", path=str(BIN)) or shutil.which("llm")
        results = run_cases(trees, llm, work, args.n, args.sessions)
        print_llm_table(results, args.n)
        if len(trees) > 1:
            print_against_table(results, trees, args.n)
        same = listing_cache(store, tmp).read_bytes() == index
        print(f"\nsessions index.json {'unchanged' if same else 'REWRITTEN'} while timed")
    finally:
        server.terminate()
        server.wait(5)
        shutil.rmtree(tmp, ignore_errors=True)


if __name__ == "__main__":
    main()
