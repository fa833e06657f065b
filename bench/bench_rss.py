"""Memory of the REPL and of resuming a long session (issue 25 point 1), side by side in one run.

For each countbot given (`--countbot LABEL=PATH`, e.g. today's checkout and this one) and, when
installed, `llm chat`:

- REPL idle: the client on a 100x40 pseudo-terminal (cursor position requests answered, as a
  terminal does), VmRSS and VmHWM of the process WAIT seconds after start, then SIGTERM;
- REPL after its first turn: the same, with `hi` typed as soon as it draws (countbot and llm);
- REPL after its first exact count: the same, with `/tokens` typed (countbot: the tokenizer is
  loaded, which the toolbar's estimate and the first turns do without);
- resume + answer: `countbot ask --plain -s ID hi` on a 200-message session (written with this
  checkout's session store), peak RSS of the reaped process (ru_maxrss); for llm, `llm -m bench
  --cid ID hi` on a 100-exchange conversation logged through llm's own API.

Rounds are interleaved (A B A B ...); medians. Targets: idle <= 60 MB (llm chat's 58.7 MB in
the measurement that filed the issue), resume + answer <= 66 MiB (llm's 66.4).

Run: .venv/bin/python bench/bench_rss.py --countbot today=/tmp/base/.venv/bin/countbot \\
         --countbot now=.venv/bin/countbot [--reps 3] [--wait 5] [--model test-model]
"""

from __future__ import annotations

import argparse
import os
import pty
import select
import shutil
import signal
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "bench"))

from bench_startup import bench_env, start_server, write_config, write_llm_config  # noqa: E402

CPR = b"\x1b[6n"
SESSION_ID = "benchrss0000"


def _status(pid: int) -> dict[str, float]:
    out: dict[str, float] = {}
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        key, _, value = line.partition(":")
        if key in ("VmRSS", "VmHWM"):
            out[key] = int(value.split()[0]) / 1000  # kB -> MB
    return out


def _children(pid: int) -> list[int]:
    """The processes `pid` started, from any of its threads."""
    out: list[int] = []
    for task in Path(f"/proc/{pid}/task").iterdir():
        try:
            out += [int(c) for c in (task / "children").read_text().split()]
        except OSError:
            pass
    return out


def repl_idle(
    cmd: list[str], env: dict[str, str], cwd: Path, wait: float, keys: bytes = b""
) -> dict[str, float]:
    """VmRSS/VmHWM (MB) of `cmd` on a pty after `wait` seconds (`keys` typed once it draws),
    and the VmRSS of the processes it started (`children`: the recall extra's encoders, an
    embedded model)."""
    master, slave = pty.openpty()
    os.set_blocking(master, False)
    proc = subprocess.Popen(
        cmd, stdin=slave, stdout=slave, stderr=slave, env=env, cwd=cwd, start_new_session=True
    )
    os.close(slave)
    end = time.monotonic() + wait
    try:
        while time.monotonic() < end:
            ready, _, _ = select.select([master], [], [], 0.05)
            if not ready:
                continue
            try:
                data = os.read(master, 65536)
            except OSError:
                break
            for _ in range(data.count(CPR)):
                os.write(master, b"\x1b[1;1R")
            if keys:
                os.write(master, keys)
                keys = b""
        kids = [_status(p).get("VmRSS", 0.0) for p in _children(proc.pid)]
        return {**_status(proc.pid), "children": sum(kids)}
    finally:
        proc.send_signal(signal.SIGTERM)
        try:
            proc.wait(5)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()
        os.close(master)


def run_peak(cmd: list[str], env: dict[str, str], cwd: Path) -> float:
    """Peak RSS (MiB) of one process, measured in a fresh child so RUSAGE_CHILDREN is its own."""
    code = (
        "import resource, subprocess, sys\n"
        "r = subprocess.run(sys.argv[1:], stdin=subprocess.DEVNULL, capture_output=True)\n"
        "if r.returncode: sys.stderr.write(r.stderr.decode()); sys.exit(r.returncode)\n"
        "print(resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss / 1024)\n"
    )
    out = subprocess.run(
        [sys.executable, "-c", code, *cmd], env=env, cwd=cwd, capture_output=True, text=True
    )
    if out.returncode:
        raise SystemExit(f"{cmd} failed: {out.stderr[-500:]}")
    return float(out.stdout)


def write_session(env: dict[str, str], cwd: Path, model: str) -> None:
    """A 200-message session (bench_store's text), written with this checkout's store."""
    from bench_store import messages

    from countbot_cli.config.settings import load_settings
    from countbot_cli.conversation.sessions.session import new_session
    from countbot_cli.conversation.sessions.store import SessionStore

    settings = load_settings(env=env, cwd=cwd)
    s = new_session(provider="bench", model=model, title="bench rss")
    s.id = SESSION_ID
    s.messages = messages(200, SESSION_ID)
    SessionStore(settings.sessions_dir).create(s)


LLM_CONVERSATION = """
import sys, llm, sqlite_utils
from llm.migrations import migrate
sys.path.insert(0, sys.argv[2])
from bench_store import TEXT
db = sqlite_utils.Database(sys.argv[1])
migrate(db)
conv = llm.get_model("bench").conversation()
for i in range(100):  # 100 exchanges: 200 messages, the user's of bench_store's text
    r = conv.prompt(f"{i}: {TEXT * 2}")
    r.text()
    r.log_to_db(db)
print(conv.id)
"""


def llm_conversation(llm: str, env: dict[str, str], home: Path) -> str:
    """A 100-exchange conversation in llm's own logs.db (llm's API, the same loopback server)."""
    py = str(Path(llm).parent / "python")
    out = subprocess.run(
        [py, "-c", LLM_CONVERSATION, str(home / "logs.db"), str(ROOT / "bench")],
        env=env,
        capture_output=True,
        text=True,
        check=True,
    )
    return out.stdout.strip()


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--countbot", action="append", default=[], help="LABEL=PATH")
    ap.add_argument("--reps", type=int, default=3)
    ap.add_argument("--wait", type=float, default=5.0)
    ap.add_argument("--model", default="test-model")
    args = ap.parse_args()
    clients = [
        (c.split("=", 1)[0], os.path.abspath(c.split("=", 1)[1])) for c in args.countbot
    ] or [("countbot", str(Path(sys.executable).parent / "countbot"))]
    llm = shutil.which("llm", path=str(Path(sys.executable).parent))
    server, base = start_server()
    tmp = Path(tempfile.mkdtemp(prefix="cb-rss-"))
    try:
        work = tmp / "work"
        work.mkdir()
        write_config(tmp, base, args.model, context_window=8192)
        llm_home = write_llm_config(tmp, base, args.model)
        env = bench_env(
            tmp,
            TERM="xterm-256color",
            LLM_USER_PATH=str(llm_home),
            LLM_LOAD_PLUGINS="",
            OPENAI_API_KEY="sk-bench",
            COLUMNS="100",
            LINES="40",
        )
        write_session(env, work, args.model)
        cid = llm_conversation(llm, env, llm_home) if llm else None
        idle: dict[str, list[dict[str, float]]] = {}
        turned: dict[str, list[dict[str, float]]] = {}
        counted: dict[str, list[dict[str, float]]] = {}
        resume: dict[str, list[float]] = {}
        for _ in range(args.reps):
            for label, path in clients:
                idle.setdefault(label, []).append(repl_idle([path], env, work, args.wait))
                after = repl_idle([path], env, work, args.wait, b"hi\r")
                turned.setdefault(label, []).append(after)
                after = repl_idle([path], env, work, args.wait, b"/tokens\r")
                counted.setdefault(label, []).append(after)
                ask = [path, "ask", "--plain", "-s", SESSION_ID, "hi"]
                resume.setdefault(label, []).append(run_peak(ask, env, work))
            if llm and cid:
                idle.setdefault("llm chat", []).append(
                    repl_idle([llm, "chat", "-m", "bench"], env, work, args.wait)
                )
                after = repl_idle([llm, "chat", "-m", "bench"], env, work, args.wait, b"hi\r")
                turned.setdefault("llm chat", []).append(after)
                ask = [llm, "-m", "bench", "--cid", cid, "hi"]
                resume.setdefault("llm chat", []).append(run_peak(ask, env, work))
        print(f"model {args.model}; {args.reps} interleaved rounds; medians (min-max)")
        print(f"{'client':12} {'REPL idle VmRSS MB':>22} {'VmHWM MB':>9} {'resume+answer MiB':>24}")
        for label in idle:
            rss = [r["VmRSS"] for r in idle[label]]
            hwm = [r["VmHWM"] for r in idle[label]]
            res = resume.get(label)
            rtxt = f"{statistics.median(res):8.1f} ({min(res):.1f}-{max(res):.1f})" if res else "-"
            print(
                f"{label:12} {statistics.median(rss):10.1f} ({min(rss):.1f}-{max(rss):.1f})"
                f" {statistics.median(hwm):9.1f} {rtxt:>24}"
            )
        print(f"\n{'client':12} {'after 1st turn VmRSS MB':>26} {'after /tokens VmRSS MB':>26}")
        for label in idle:
            cells = []
            for runs in (turned.get(label), counted.get(label)):
                rss = [r["VmRSS"] for r in runs or []]
                cells.append(
                    f"{statistics.median(rss):8.1f} ({min(rss):.1f}-{max(rss):.1f})" if rss else "-"
                )
            print(f"{label:12} {cells[0]:>26} {cells[1]:>26}")
    finally:
        server.terminate()
        server.wait(5)
        shutil.rmtree(tmp, ignore_errors=True)


if __name__ == "__main__":
    main()
