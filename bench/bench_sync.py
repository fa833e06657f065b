"""Two machines sharing one sessions folder and one MEMORY.md through a simulated file sync.

Machines A and B are two homes (each its own config, cache folder and copy of the shared
folder `sync/`, which holds `sessions/` and `MEMORY.md`). A sync copies what changed on one side
to the other (a new file each time, the mtime kept, as sync tools do); a file changed on both
sides since the last sync is a conflict: one version keeps the name, the other is written beside
it on both machines as a conflict copy, named as Syncthing names them (the older version
becomes the copy) or as Dropbox does (the later one does), in turn; a file changed on one side
and deleted on the other comes back. Turns alternate between A and B (`countbot ask -s ID
--remember`, on the scriptable loopback server: each question names a locker number and the
remembered line carries it); after a turn the machines sync, except after an "offline" one
(10 %), so the next turn on the other machine works on a stale copy. At the end both machines
run `countbot sessions list` and `memory show` and sync until nothing is left to merge.

Printed: turns, offline turns, conflicts made by tool; questions and answers lost or duplicated,
memory lines lost or duplicated [want 0 / 0 / 0]; conflict copies left unmerged and derived
files written into the shared folder [want 0 / 0]; then the cost of a search after a sync
brought 100 changed sessions (of 2,000), against a warm search and a cold build, interleaved,
medians.

Run: .venv/bin/python bench/bench_sync.py [--turns 1000] [--offline 0.1] [--seed 1]
     (`--tree DIR --no-search`: the same turns with another checkout's countbot, say an older one)
"""

from __future__ import annotations

import argparse
import collections
import json
import os
import random
import re
import statistics
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "tests" / "helpers"))

import fakeserver as fs  # noqa: E402

from countbot_cli.config.home import derived_dir  # noqa: E402
from countbot_cli.config.own_files import SEARCH_INDEX_FILE  # noqa: E402
from countbot_cli.conflicts import original_name  # noqa: E402
from countbot_cli.conversation.sessions.listing import is_session_file  # noqa: E402

COUNTBOT = str(Path(sys.executable).parent / "countbot")
LOCKER = re.compile(r"locker (\d+)")
DEVICES = {"A": "AAAAAAA", "B": "BBBBBBB"}


@dataclass
class Machine:
    name: str
    home: Path
    env: dict[str, str]

    @property
    def shared(self) -> Path:
        return self.home / "sync"

    def run(self, *args: str) -> subprocess.CompletedProcess[str]:
        return subprocess.run(
            [COUNTBOT, *args],
            cwd=self.home,
            env=self.env,
            capture_output=True,
            text=True,
            timeout=300,
            stdin=subprocess.DEVNULL,
        )


def machine(tmp: Path, name: str, base_url: str, tree: Path | None) -> Machine:
    home = tmp / name
    (home / "sync").mkdir(parents=True)
    env = {
        "PATH": os.environ.get("PATH", ""),
        "HOME": str(home),
        "XDG_CONFIG_HOME": str(home / ".config"),
        "XDG_CACHE_HOME": str(home / ".cache"),
        "LANG": "C.UTF-8",
        **{k: v for k, v in os.environ.items() if k in ("PYTHONPATH", "TMPDIR")},
        **({"PYTHONPATH": str(tree)} if tree else {}),
    }
    config = {
        "default_provider": "t",
        "providers": {"t": {"type": "openai", "api_base": base_url, "api_key": "sk-bench"}},
        "tools": {"enabled": False},
        "sessions_dir": "sync/sessions",
        "memory": {
            "file": "sync/MEMORY.md",
            "inject": "off",
            "auto_memory": False,
            "overflow_summary": False,
            "session_summary": False,
        },
    }
    config["providers"]["t"]["model"] = "test-model"  # type: ignore[index]
    (home / "config.yaml").write_text(json.dumps(config), encoding="utf-8")
    m = Machine(name, home, env)
    trusted = m.run("config", "trust", "--yes", str(home / "config.yaml"))
    assert trusted.returncode == 0, trusted.stderr
    return m


def responder(body: dict[str, Any]) -> fs.Reply:
    """A turn's answer names its locker; the --remember call gets the line to keep."""
    msgs = body["messages"]
    text = json.dumps(msgs[-1]["content"], ensure_ascii=False)
    found = LOCKER.findall(text)
    n = found[-1] if found else "0"
    if msgs[0]["role"] == "system":
        return fs.text(f"Noted: your locker is {n}.")
    return fs.text(f"User keeps locker {n} at the gym")


# ---- the simulated sync ----


class Sync:
    """Two folders kept alike, with the last synced version of each file (the base)."""

    def __init__(self, a: Machine, b: Machine) -> None:
        self.a, self.b = a, b
        self.base: dict[str, bytes | None] = {}
        self.conflicts: collections.Counter[str] = collections.Counter()
        self.n = 0

    def files(self) -> set[str]:
        out: set[str] = set()
        for m in (self.a, self.b):
            for p in m.shared.rglob("*"):
                if p.is_file() and not (p.name.startswith(".") and p.name.endswith(".tmp")):
                    out.add(str(p.relative_to(m.shared)))
        return out

    def __call__(self) -> None:
        for rel in sorted(self.files()):
            a, b = _read(self.a.shared / rel), _read(self.b.shared / rel)
            base = self.base.get(rel)
            if a == b:
                self.base[rel] = a
            elif b == base:
                self._put(self.b, rel, self.a)
            elif a == base:
                self._put(self.a, rel, self.b)
            elif a is None or b is None:  # changed on one side, deleted on the other: back
                self._put(self.a if a is None else self.b, rel, self.b if a is None else self.a)
            else:
                self._conflict(rel)

    def _put(self, dst: Machine, rel: str, src: Machine) -> None:
        data = _read(src.shared / rel)
        if data is None:
            (dst.shared / rel).unlink(missing_ok=True)
        else:
            _write(dst.shared / rel, data, (src.shared / rel).stat().st_mtime_ns)
        self.base[rel] = data

    def _conflict(self, rel: str) -> None:
        """One version keeps the name, the other goes beside it on both machines."""
        self.n += 1
        pa, pb = self.a.shared / rel, self.b.shared / rel
        older_a = pa.stat().st_mtime_ns <= pb.stat().st_mtime_ns
        tool = "Syncthing" if self.n % 2 else "Dropbox"
        # Syncthing makes the older version the copy; Dropbox the one that came second (newer)
        copy_from_a = older_a if tool == "Syncthing" else not older_a
        loser, winner = (pa, pb) if copy_from_a else (pb, pa)
        loser_name = self.a.name if copy_from_a else self.b.name
        copy_rel = _copy_name(rel, tool, loser_name, self.n)
        data, mtime = loser.read_bytes(), loser.stat().st_mtime_ns
        kept, kept_mtime = winner.read_bytes(), winner.stat().st_mtime_ns
        for m in (self.a, self.b):
            _write(m.shared / copy_rel, data, mtime)
            _write(m.shared / rel, kept, kept_mtime)
        self.base[rel], self.base[copy_rel] = kept, data
        self.conflicts[tool] += 1


def _copy_name(rel: str, tool: str, device: str, n: int) -> str:
    folder, _, name = rel.rpartition("/")
    stem, _, ext = name.rpartition(".")
    when = time.gmtime()
    if tool == "Syncthing":
        stamp = time.strftime("%Y%m%d-%H%M%S", when)
        copy = f"{stem}.sync-conflict-{stamp}-{DEVICES[device]}.{ext}"
    else:
        copy = f"{stem} ({device}'s conflicted copy {time.strftime('%Y-%m-%d', when)} ({n})).{ext}"
    return f"{folder}/{copy}" if folder else copy


def _read(path: Path) -> bytes | None:
    try:
        return path.read_bytes()
    except FileNotFoundError:
        return None


def _write(path: Path, data: bytes, mtime_ns: int) -> None:
    """As a sync tool writes: a temporary file renamed over the old one, the mtime kept."""
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(f".syncing-{path.name}.tmp")
    tmp.write_bytes(data)
    os.utime(tmp, ns=(mtime_ns, mtime_ns))
    os.replace(tmp, path)


# ---- the run ----


def converse(args: argparse.Namespace, a: Machine, b: Machine, sync: Sync) -> dict[str, Any]:
    rng = random.Random(args.seed)
    sids = []
    for k in range(args.sessions):
        proc = a.run("ask", "--json", f"start {k}: my locker {10_000 + k} is by the door")
        assert proc.returncode == 0, proc.stderr
        sids.append(json.loads(proc.stdout)["session_id"])
    sync()
    asked = [f"start {k}: my locker {10_000 + k} is by the door" for k in range(args.sessions)]
    offline = failed = 0
    t0 = time.perf_counter()
    for i in range(args.turns):
        m = (a, b)[i % 2]
        question = f"turn {i}: I keep locker {i} at the gym"
        proc = m.run("ask", "-s", rng.choice(sids), "--remember", question)
        if proc.returncode == 0:
            asked.append(question)
        else:
            failed += 1
            print(f"turn {i} on {m.name} failed: {proc.stderr.strip()}", file=sys.stderr)
        if rng.random() < args.offline:
            offline += 1
        else:
            sync()
        if (i + 1) % 100 == 0:
            print(f"  {i + 1} turns, {time.perf_counter() - t0:.0f} s", file=sys.stderr)
    for _round in range(6):  # both machines read everything, then sync, until settled
        for m in (a, b):
            for cmd in (("sessions", "list", "--json"), ("memory", "show", "--json")):
                assert m.run(*cmd).returncode == 0
        sync()
        if not _copies(a) and not _copies(b) and _same(a, b):
            break
    return {"asked": asked, "offline": offline, "failed": failed}


def _copies(m: Machine) -> list[str]:
    return [p.name for p in m.shared.rglob("*") if original_name(p.name) is not None]


def _same(a: Machine, b: Machine) -> bool:
    files = {str(p.relative_to(a.shared)) for p in a.shared.rglob("*") if p.is_file()}
    files |= {str(p.relative_to(b.shared)) for p in b.shared.rglob("*") if p.is_file()}
    return all(_read(a.shared / f) == _read(b.shared / f) for f in files)


def count(m: Machine, asked: list[str]) -> dict[str, int]:
    said: collections.Counter[str] = collections.Counter()
    sessions = [p for p in (m.shared / "sessions").glob("*.json") if is_session_file(p.name)]
    for path in sessions:  # what countbot lists (a conflict copy is not a session)
        doc = json.loads(path.read_bytes())
        for msg in [*doc.get("archived", []), *doc.get("messages", [])]:
            said[msg["content"]] += 1
    answers = [f"Noted: your locker is {LOCKER.search(q).group(1)}." for q in asked]  # type: ignore[union-attr]
    lines = [ln for ln in (m.shared / "MEMORY.md").read_text().splitlines() if "|" in ln]
    kept = collections.Counter(int(n) for ln in lines for n in LOCKER.findall(ln))
    want = [int(LOCKER.search(q).group(1)) for q in asked if q.startswith("turn")]  # type: ignore[union-attr]
    extra = [
        p.name
        for p in m.shared.rglob("*")
        if p.is_file()
        and not (p.suffix == ".json" and p.parent.name == "sessions")
        and not p.name.startswith("MEMORY.")
        and ".merged-" not in p.name
    ]
    return {
        "questions lost": sum(1 for q in asked if said[q] == 0),
        "questions twice": sum(1 for q in asked if said[q] > 1),
        "answers lost": sum(1 for a in answers if said[a] == 0),
        "memory lines lost": sum(1 for n in want if kept[n] == 0),
        "memory lines twice": sum(1 for n in want if kept[n] > 1),
        "conflict copies left": len(_copies(m)),
        "derived files in the shared folder": len(extra),
        "sessions": len(sessions),
    }


# ---- the search after a sync ----


def search_after_sync(a: Machine, b: Machine, sync: Sync, runs: int, many: int) -> dict[str, float]:
    """`many` more sessions written on B; then, `runs` times: a warm search on A, a search on
    A after a sync brought 100 of them changed on B, and a cold build (A's index deleted)."""
    from countbot_cli.conversation.sessions.listing import dumps
    from countbot_cli.conversation.sessions.session import new_session
    from countbot_cli.messages import Message, utc_now

    words = [
        "kangaroo",
        "wallaby",
        "wombat",
        "echidna",
        "platypus",
        "quokka",
        "numbat",
        "dingo",
        "bilby",
    ]
    made: dict[str, Any] = {}
    for i in range(many):
        s = new_session(provider="t", model="test-model", title=f"notes {i}")
        s.messages = [
            Message(
                role="user" if k % 2 == 0 else "assistant",
                content=f"{words[(i + k) % 9]} number {i} point {k} " * 8,
            )
            for k in range(20)
        ]
        made[s.id] = s
        (b.shared / "sessions" / f"{s.id}.json").write_bytes(dumps(s.to_dict()))
    sync()
    rng = random.Random(7)

    def timed_search() -> float:
        t0 = time.perf_counter()
        proc = a.run("sessions", "search", "--json", "kangaroo")
        assert proc.returncode == 0, proc.stderr
        return time.perf_counter() - t0

    timed_search()  # builds A's index
    out: dict[str, list[float]] = {"warm": [], "100 changed": [], "cold": []}
    for r in range(runs):
        out["warm"].append(timed_search())
        for sid in rng.sample(sorted(made), 100):  # B's countbot continues 100 of them
            s = made[sid]
            s.messages.append(Message("user", f"kangaroo again {r}"))
            s.updated_at = utc_now()
            (b.shared / "sessions" / f"{sid}.json").write_bytes(dumps(s.to_dict()))
        sync()
        out["100 changed"].append(timed_search())
        index = derived_dir(a.shared / "sessions", a.env) / SEARCH_INDEX_FILE
        for suffix in ("", "-wal", "-shm"):
            Path(f"{index}{suffix}").unlink(missing_ok=True)
        out["cold"].append(timed_search())
    return {k: statistics.median(v) for k, v in out.items()}


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--turns", type=int, default=1000)
    parser.add_argument("--offline", type=float, default=0.10)
    parser.add_argument("--sessions", type=int, default=5)
    parser.add_argument("--seed", type=int, default=1)
    parser.add_argument("--runs", type=int, default=5)
    parser.add_argument("--many", type=int, default=2000, help="sessions for the search figure")
    parser.add_argument("--tree", type=Path, help="run another checkout's countbot (e.g. main)")
    parser.add_argument("--no-search", action="store_true", help="skip the search figure")
    args = parser.parse_args()
    tmp = Path(tempfile.mkdtemp(prefix="cb-bench-sync-"))
    print(f"load average at start: {os.getloadavg()[0]:.1f}")
    with fs.FakeServer() as server:
        server.responder = responder
        a, b = (machine(tmp, n, server.base_url, args.tree) for n in "AB")
        sync = Sync(a, b)
        t0 = time.perf_counter()
        run = converse(args, a, b, sync)
        took = time.perf_counter() - t0
        print(
            f"{args.turns} turns alternating A/B ({took:.0f} s), {run['offline']} offline, "
            f"{run['failed']} failed; conflicts made: {dict(sync.conflicts)}"
        )
        for m in (a, b):
            print(f"machine {m.name}: {count(m, run['asked'])}")
        print(f"the two machines' shared folders are the same: {_same(a, b)}")
        if args.no_search:
            return
        times = search_after_sync(a, b, sync, args.runs, args.many)
    print(
        "search on A (of {n} sessions), medians of {r}: warm {warm:.2f} s; after a sync brought "
        "100 changed sessions {ch:.2f} s ({ratio:.2f}x warm); cold build {cold:.2f} s "
        "({cr:.2f}x the changed one)".format(
            n=args.many + args.sessions,
            r=args.runs,
            warm=times["warm"],
            ch=times["100 changed"],
            ratio=times["100 changed"] / times["warm"],
            cold=times["cold"],
            cr=times["cold"] / times["100 changed"],
        )
    )
    print(f"load average at end: {os.getloadavg()[0]:.1f}")


if __name__ == "__main__":
    main()
