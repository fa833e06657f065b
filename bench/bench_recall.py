"""Benchmark: does recall send the line that answers the question? Today's code beside ours.

Builds its own probe (bench/recall_probe.py: 300 MEMORY.md lines about one invented user, a
quarter in Chinese, some facts updated later; 120 questions of four kinds), writes it as a
MEMORY.md and asks every question through the real `MemoryKeeper.recall` (what
`memory.inject: relevant` sends with the message). Prints per kind the fraction of questions
whose answering line was sent, for this checkout and for the code before issue 21 (commit
BASELINE, extracted with `git archive` and run in a child process), plus:

- superseded-sent: update questions whose older, superseded line was sent alongside;
- recalled tokens a turn (average, every question);
- session search: the probe's facts said in 90 past sessions (among 40 others), the
  question's session in the top 5 of `SessionSearch.search`, per kind;
- cost: a warm recall over 2,000 lines, writing one new line (embedded as it is written)
  and the recall after it, the cold build of 2,000 lines, and `countbot ask --plain` with
  2,000 memory lines against a loopback server (median; ours and today's runs interleaved).

    .venv/bin/python bench/bench_recall.py [--runs N] [--baseline REV] [--no-cost]
"""

from __future__ import annotations

import argparse
import json
import os
import random
import statistics
import subprocess
import sys
import tarfile
import tempfile
import time
from dataclasses import replace
from datetime import date, timedelta
from io import BytesIO
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))
from recall_probe import FILLER, ITEMS, Item  # noqa: E402

ROOT = Path(__file__).resolve().parent.parent
BASELINE = "6da7ab7"  # main before issue 21
KINDS = ("lexical", "paraphrase", "cross", "update")
SESSION_KINDS = ("lexical", "paraphrase", "cross")
BIG = 2000  # memory lines for the cost figures


class _Model:
    name = "bench"
    model = "gpt-4o"
    context_window = None


def probe_rows() -> list[tuple[str, str]]:
    """(date, content) of every probe line, oldest first; an update's old line is dated in
    the first half of the year, its new line in the second, everything else anywhere."""
    rng = random.Random(21)
    start = date(2025, 1, 1)

    def day(lo: int, hi: int) -> str:
        return (start + timedelta(days=rng.randint(lo, hi))).isoformat()

    rows = []
    for item in ITEMS:
        if item.old:
            rows += [(day(0, 170), item.old), (day(190, 360), item.answer)]
        else:
            rows.append((day(0, 360), item.answer))
    rows += [(day(0, 360), line) for line in FILLER]
    return sorted(rows)


def write_memory(path: Path, rows: list[tuple[str, str]]) -> None:
    lines = ["# MEMORY"] + [f"{d}|user|{c}" for d, c in rows]
    path.write_text("\n".join(lines) + "\n", encoding="utf-8")


def make_keeper(memory_file: Path, home: Path) -> Any:
    from countbot_cli.config.settings import load_settings
    from countbot_cli.memory.keeper import MemoryKeeper
    from countbot_cli.memory.store import MemoryStore

    env = {"HOME": str(home), "XDG_CONFIG_HOME": str(home / "xdg"), "PATH": ""}
    settings = load_settings(env=env, cwd=home, require_provider=False, require_model=False)
    settings = replace(settings, memory=settings.memory._replace(inject="relevant"))
    return MemoryKeeper(settings, _Model(), None, MemoryStore(memory_file))  # type: ignore[arg-type]


def measure_recall(work: Path) -> dict[str, Any]:
    memory_file = work / "MEMORY.md"
    write_memory(memory_file, probe_rows())
    keeper = make_keeper(memory_file, work)
    keeper.recall("warm up")  # loads models and builds the vector cache (not a question)
    found: dict[str, list[bool]] = {k: [] for k in KINDS}
    stale: list[bool] = []
    marked: list[bool] = []
    tokens: list[int] = []
    for item in ITEMS:
        sent = keeper.recall(item.question)
        contents = {s.split(": ", 1)[1] for s in sent}
        unmarked = {s.split(": ", 1)[1] for s in sent if " (older): " not in s}
        found[item.kind].append(item.answer in contents)
        if item.old:
            stale.append(item.old in unmarked)
            marked.append(item.old in contents and item.old not in unmarked)
        tokens.append(sum(keeper.counter.count_text(s) + 2 for s in sent))
    return {
        "found": {k: sum(v) / len(v) for k, v in found.items()},
        "superseded_sent": sum(stale) / len(stale),
        "superseded_marked": sum(marked) / len(marked),
        "tokens": statistics.mean(tokens),
        "lines": len(probe_rows()),
        "questions": len(ITEMS),
    }


def _sessions_api() -> tuple[Any, Any]:
    """(new_session, SessionStore) where this checkout keeps them (conversation/sessions/ since
    issue 20; conversation/ in the baseline)."""
    try:
        from countbot_cli.conversation.sessions.session import new_session
        from countbot_cli.conversation.sessions.store import SessionStore
    except ImportError:
        from countbot_cli.conversation.session import new_session  # type: ignore[no-redef]
        from countbot_cli.conversation.store import SessionStore  # type: ignore[no-redef]
    return new_session, SessionStore


def session_items() -> list[tuple[int, Item]]:
    return [(k, it) for k, it in enumerate(ITEMS) if it.kind in SESSION_KINDS]


def build_sessions(root: Path) -> None:
    """One past session per fact (the user says it, among small talk), and 40 of small talk."""
    from countbot_cli.messages import Message

    new_session, SessionStore = _sessions_api()

    rng = random.Random(5)
    store = SessionStore(root)

    def save(sid: str, said: list[str]) -> None:
        s = new_session(provider="bench", model="m", title=said[0][:60])
        s.id = sid
        for text in said:
            s.messages += [Message(role="user", content=text), Message("assistant", "Noted.")]
        store.create(s)

    for k, item in session_items():
        said = rng.sample(FILLER, 2)
        said.insert(rng.randint(0, 2), item.answer)
        save(f"fact{k:04d}", said)
    for n in range(40):
        save(f"talk{n:04d}", rng.sample(FILLER, 3))


def measure_sessions(work: Path) -> dict[str, float]:
    _new, SessionStore = _sessions_api()
    try:  # by words and by meaning (issue 21); today's code has words only
        from countbot_cli.memory.session_meaning import MeaningSearch as Search
    except ImportError:
        from countbot_cli.conversation.search import SessionSearch as Search  # type: ignore[no-redef]

    root = work / "sessions"
    build_sessions(root)
    search = Search(SessionStore(root), on_notice=lambda _m: None)
    found: dict[str, list[bool]] = {k: [] for k in SESSION_KINDS}
    for k, item in session_items():
        try:
            hits = search.search(item.question, limit=5, per_session=0).hits
        except Exception:  # today's code: a question with nothing searchable raises
            hits = []
        found[item.kind].append(f"fact{k:04d}" in {h.id for h in hits})
    return {k: sum(v) / len(v) for k, v in found.items()}


def big_rows(english: bool = False) -> list[tuple[str, str]]:
    """The probe plus generated lines up to BIG (for the cost figures; about 16 % of them
    Chinese), or (english) only its English lines and generated English ones."""
    rng = random.Random(9)
    rows = probe_rows()
    words = [w for line in FILLER for w in line.split()]
    if english:
        rows = [r for r in rows if r[1].isascii()]
        words = [w for w in words if w.isascii()]
    while len(rows) < BIG:
        rows.append(("2024-06-01", " ".join(rng.sample(words, 8)) + f" #{len(rows)}"))
    return rows


def measure_cost(work: Path) -> dict[str, float]:
    """Warm recall, one new line, cold build (this checkout only)."""
    memory_file = work / "BIG.md"
    write_memory(memory_file, big_rows())
    keeper = make_keeper(memory_file, work)
    t0 = time.perf_counter()
    keeper.recall("what car do I drive now")
    cold = time.perf_counter() - t0
    warm = []
    for item in ITEMS[:40]:
        t0 = time.perf_counter()
        keeper.recall(item.question)
        warm.append(time.perf_counter() - t0)
    t0 = time.perf_counter()
    keeper.memory.add("bought a second-hand harp in Ghent", "user")  # embedded as written
    written = time.perf_counter() - t0
    t0 = time.perf_counter()
    keeper.recall("which harp did I buy")
    after = time.perf_counter() - t0
    return {
        "cold_build_s": cold,
        "warm_recall_ms": statistics.median(warm) * 1000,
        "line_written_ms": written * 1000,
        "recall_after_it_ms": after * 1000,
    }


def measure_child(work: Path) -> dict[str, Any]:
    return {"recall": measure_recall(work), "sessions": measure_sessions(work)}


def baseline_tree(rev: str, dest: Path) -> Path:
    data = subprocess.run(
        ["git", "-C", str(ROOT), "archive", rev, "countbot_cli"], capture_output=True, check=True
    ).stdout
    with tarfile.open(fileobj=BytesIO(data)) as tar:
        tar.extractall(dest, filter="data")
    return dest


def run_child(pythonpath: Path | None, work: Path) -> dict[str, Any]:
    env = dict(os.environ)
    if pythonpath is not None:
        env["PYTHONPATH"] = str(pythonpath)
    out = subprocess.run(
        [sys.executable, __file__, "--child", str(work)],
        env=env,
        capture_output=True,
        text=True,
        check=False,
    )
    if out.returncode != 0:
        raise SystemExit(f"measuring failed:\n{out.stderr[-3000:]}")
    result: dict[str, Any] = json.loads(out.stdout.splitlines()[-1])
    return result


def ask_home(pythonpath: Path | None, tmp: Path, base_url: str, english: bool) -> dict[str, str]:
    """A home with BIG memory lines (`big_rows`) for `countbot ask`; the environment to run it."""
    home = tmp / f"ask-{'today' if pythonpath else 'ours'}{'-en' if english else ''}"
    (home / "xdg" / "countbot").mkdir(parents=True)
    memory_file = home / "MEMORY.md"
    write_memory(memory_file, big_rows(english))
    (home / "xdg" / "countbot" / "config.yaml").write_text(
        "default_provider: bench\nproviders:\n  bench:\n    type: openai\n"
        f"    api_base: {base_url}\n    api_key: sk-bench\n    model: test-model\n"
        "tools:\n  enabled: false\nmemory:\n  overflow_summary: false\n"
        f"  auto_memory: false\n  inject: relevant\n  file: {memory_file}\n",
        encoding="utf-8",
    )
    env = {
        "PATH": os.environ.get("PATH", ""),
        "HOME": str(home),
        "LANG": "C.UTF-8",
        "XDG_CONFIG_HOME": str(home / "xdg"),
    }
    if pythonpath is not None:
        env["PYTHONPATH"] = str(pythonpath)
    return env


def time_asks(setups: list[tuple[Path | None, bool]], tmp: Path, runs: int) -> list[float]:
    """Median seconds of `countbot ask --no-save --plain` for each (PYTHONPATH, English
    lines only) setup, the setups' runs interleaved (a shared machine's load changes from one
    minute to the next: each round times every setup once). A first run of each builds its
    caches (vectors, the recall model's) and is not counted."""
    sys.path.insert(0, str(ROOT / "tests" / "helpers"))
    import fakeserver as fs

    cmd = [sys.executable, "-m", "countbot_cli", "ask", "--no-save", "--plain"]
    times: list[list[float]] = [[] for _ in setups]
    with fs.FakeServer() as server:
        server.default = fs.text("fine")
        envs = [ask_home(path, tmp, server.base_url, english) for path, english in setups]
        for n in range(runs + 1):
            for env, out in zip(envs, times, strict=True):
                t0 = time.perf_counter()
                res = subprocess.run(
                    [*cmd, "what car do I drive now"], env=env, cwd=env["HOME"], capture_output=True
                )
                if res.returncode != 0:
                    raise SystemExit(f"ask failed: {res.stderr.decode()[-800:]}")
                if n:
                    out.append(time.perf_counter() - t0)
    return [statistics.median(t) for t in times]


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--child", type=Path, help=argparse.SUPPRESS)
    ap.add_argument("--baseline", default=BASELINE)
    ap.add_argument("--runs", type=int, default=7, help="ask --plain runs per side")
    ap.add_argument("--no-cost", action="store_true")
    args = ap.parse_args()
    if args.child is not None:
        print(json.dumps(measure_child(args.child)))
        return
    with tempfile.TemporaryDirectory(prefix="cb-recall-") as t:
        tmp = Path(t)
        os.environ["XDG_CACHE_HOME"] = str(
            tmp / "cache"
        )  # not the runner's ~/.cache (children too)
        old = baseline_tree(args.baseline, tmp / "baseline")
        for name in ("today", "ours", "cost"):
            (tmp / name).mkdir()
        today = run_child(old, tmp / "today")
        ours = run_child(None, tmp / "ours")
        report(today, ours, args.baseline)
        if not args.no_cost:
            cost = measure_cost(tmp / "cost")
            setups = [(old, False), (None, False), (old, True), (None, True)]
            ask_today, ask_ours, en_today, en_ours = time_asks(setups, tmp, args.runs)
            print(f"\ncost ({BIG:,} memory lines)")
            print(f"  warm recall a turn        {cost['warm_recall_ms']:8.1f} ms")
            print(f"  a new line written        {cost['line_written_ms']:8.1f} ms (embedded)")
            print(f"  the recall after it       {cost['recall_after_it_ms']:8.1f} ms")
            print(f"  cold build                {cost['cold_build_s']:8.1f} s")
            print(f"  ask --plain today         {ask_today * 1000:8.0f} ms (median)")
            print(
                f"  ask --plain ours          {ask_ours * 1000:8.0f} ms ({ask_ours / ask_today:.2f}x)"
                "  (16 % of the lines Chinese)"
            )
            print(f"  ask --plain today, en     {en_today * 1000:8.0f} ms (English lines only)")
            print(
                f"  ask --plain ours, en      {en_ours * 1000:8.0f} ms ({en_ours / en_today:.2f}x)"
            )


def report(today: dict[str, Any], ours: dict[str, Any], rev: str) -> None:
    r0, r1 = today["recall"], ours["recall"]
    print(f"recall probe: {r1['lines']} lines, {r1['questions']} questions; today = {rev}")
    print(f"{'':26}{'today':>8}{'ours':>8}")
    for kind in KINDS:
        print(f"  {kind + ' found':24}{r0['found'][kind]:8.2f}{r1['found'][kind]:8.2f}")
    print(f"  {'superseded sent':24}{r0['superseded_sent']:8.2f}{r1['superseded_sent']:8.2f}")
    m0, m1 = r0.get("superseded_marked", 0.0), r1["superseded_marked"]
    print(f"  {'... sent marked (older)':24}{m0:8.2f}{m1:8.2f}")
    print(f"  {'tokens a turn':24}{r0['tokens']:8.0f}{r1['tokens']:8.0f}")
    print("session search, answering session in the top 5")
    for kind in SESSION_KINDS:
        print(f"  {kind:24}{today['sessions'][kind]:8.2f}{ours['sessions'][kind]:8.2f}")


if __name__ == "__main__":
    main()
