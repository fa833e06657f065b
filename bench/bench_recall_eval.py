"""Benchmark: recall and session search measured through `countbot ask` / `countbot sessions
search`, on the probe recall was tuned on and on probes it never saw, before and after.

Probes (`--probe`, repeatable):

- `tuned`: bench/recall_probe.py (300 lines, 120 questions; what recall was tuned on) and its
  sessions (bench_recall.build_sessions: each fact said in a past session among small talk);
- `heldout`: bench/probes/memory_heldout.json and sessions_heldout.json, written apart from
  countbot's recall code. Never tune on them: read the figures, do not chase them.

Trees (`--tree NAME=PATH|REV`, repeatable; default `before=BASELINE` and `after=.`): a path is a
checkout whose `countbot_cli` is run, a revision is extracted with `git archive` and run with
PYTHONPATH. For each probe and tree this writes the probe's MEMORY.md (once for a probe whose
questions share one memory, else once per question), runs `countbot ask --no-save --plain
QUESTION` against the loopback server (tests/helpers/fakeserver.py), reads the request the server
got, and scores per kind of question:

- sent: the answering line is among the recalled lines;
- unmarked: ... and not marked `(older)`;
- stale: the superseded line (update questions) sent unmarked;
- tokens: the recalled block's tokens (gpt-4o's encoding) a question, and lines a question.

Sessions: the probe's sessions saved as countbot saves them, then `countbot sessions search
--json -n 5 QUESTION`: the answering session in the top 5, per kind. Each tree's asks run in its
own home, its vector cache filled first by one ask that waits for every line's vector
(`memory.recall_wait` raised for that ask alone): the figures are with a warm cache, as a
user's asks are once the lines are embedded (a cold cache recalls by words what is not embedded
within a second: bench_recall_cost.py). The trees' runs are interleaved question by question,
so the machine's load falls on both alike.

    .venv/bin/python bench/bench_recall_eval.py [--probe tuned] [--probe heldout] [--tree ...]
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import random
import shutil
import statistics
import subprocess
import sys
import tarfile
import tempfile
import time
from collections.abc import Iterator
from dataclasses import dataclass, field
from datetime import datetime, timedelta, timezone
from io import BytesIO
from pathlib import Path

HERE = Path(__file__).resolve().parent
ROOT = HERE.parent
sys.path.insert(0, str(HERE))
sys.path.insert(0, str(ROOT / "tests" / "helpers"))

import fakeserver as fs  # noqa: E402
from bench_startup import recall_waits  # noqa: E402

BASELINE = "9696383"  # main before recall's rewrite (the budget, the ranking, the dates)
WARM_WAIT = 3600  # seconds the warm-up ask may wait for every line's vector (a hang bound)
PROBES = HERE / "probes"
RECALL_END = "[end of memory]"


@dataclass
class Question:
    kind: str
    text: str
    answers: list[str]  # contents of the lines that answer it
    superseded: list[str] = field(default_factory=list)  # contents it makes out of date
    every: bool = False  # every answer is needed (else any one is enough)
    rows: list[tuple[str, str, str]] | None = None  # its own memory, when not the probe's


@dataclass
class Past:
    """A past session: its id in the probe, when it started, what was said (role, text)."""

    key: str
    started: datetime | None
    said: list[tuple[str, str]]


@dataclass
class Search:
    kind: str
    text: str
    answers: list[str]  # the keys of the sessions that answer it (all of them needed)


@dataclass
class Probe:
    name: str
    rows: list[tuple[str, str, str]]  # (date, source, content): the memory its questions share
    questions: list[Question]
    sessions: list[Past] = field(default_factory=list)
    searches: list[Search] = field(default_factory=list)


# ---- the probes ----


def tuned_probe() -> Probe:
    import bench_recall as br
    from recall_probe import FILLER, ITEMS

    rows = [(d, "user", c) for d, c in br.probe_rows()]
    questions = [
        Question(it.kind, it.question, [it.answer], [it.old] if it.old else []) for it in ITEMS
    ]
    sessions, searches = [], []
    rng = random.Random(5)  # bench_recall.build_sessions' sessions and questions
    for k, item in br.session_items():
        said = rng.sample(FILLER, 2)
        said.insert(rng.randint(0, 2), item.answer)
        sessions.append(Past(f"fact{k:04d}", None, _exchange(said)))
        searches.append(Search(item.kind, item.question, [f"fact{k:04d}"]))
    for n in range(40):
        sessions.append(Past(f"talk{n:04d}", None, _exchange(rng.sample(FILLER, 3))))
    return Probe("tuned", rows, questions, sessions, searches)


def _exchange(said: list[str]) -> list[tuple[str, str]]:
    out: list[tuple[str, str]] = []
    for text in said:
        out += [("user", text), ("assistant", "Noted.")]
    return out


def heldout_probe() -> Probe:
    """bench/probes/memory_heldout.json and sessions_heldout.json (their README.md)."""
    memory = json.loads((PROBES / "memory_heldout.json").read_text("utf-8"))
    rows = []
    for line in memory["memory"]:
        if line.strip() and not line.startswith("#"):
            day, source, content = line.split("|", 2)
            rows.append((day, source, content))
    questions = [
        Question(q["kind"], q["question"], q["answers"], q.get("stale", []), q["match"] == "all")
        for q in memory["questions"]
    ]
    past = json.loads((PROBES / "sessions_heldout.json").read_text("utf-8"))
    sessions = [
        Past(
            key,
            datetime.strptime(when[:10] + when[-6:], "%Y/%m/%d %H:%M"),
            [(turn["role"], turn["content"]) for turn in turns],
        )
        for key, when, turns in zip(
            past["haystack_session_ids"],
            past["haystack_dates"],
            past["haystack_sessions"],
            strict=True,
        )
    ]
    searches = [
        Search(q["kind"], q["question"], q["answer_session_ids"]) for q in past["questions"]
    ]
    return Probe("heldout", rows, questions, sessions, searches)


# ---- the trees ----


def tree_path(spec: str, tmp: Path) -> Path | None:
    """None for this checkout (run as installed), else a folder holding `countbot_cli`."""
    if spec == ".":
        return None
    if Path(spec).is_dir():
        return Path(spec).resolve()
    dest = tmp / f"tree-{spec}"
    data = subprocess.run(
        ["git", "-C", str(ROOT), "archive", spec, "countbot_cli"], capture_output=True, check=True
    ).stdout
    with tarfile.open(fileobj=BytesIO(data)) as tar:
        tar.extractall(dest, filter="data")
    return dest


class Home:
    """One tree's home: its config (pointing at the server), MEMORY.md, sessions, caches."""

    def __init__(self, root: Path, pythonpath: Path | None, base_url: str) -> None:
        self.root = root
        self.memory = root / "MEMORY.md"
        self.sessions = root / "sessions"
        self.tree = (pythonpath or ROOT) / "countbot_cli"
        self.config = root / "xdg" / "countbot" / "config.yaml"
        self.config.parent.mkdir(parents=True)
        self.config.write_text(
            "default_provider: bench\nproviders:\n  bench:\n    type: openai\n"
            f"    api_base: {base_url}\n    api_key: sk-bench\n    model: gpt-4o\n"
            "tools:\n  enabled: false\nmemory:\n  overflow_summary: false\n"
            f"  auto_memory: false\n  inject: relevant\n  file: {self.memory}\n"
            f"sessions_dir: {self.sessions}\n",
            encoding="utf-8",
        )
        self.env = {
            "PATH": os.environ.get("PATH", ""),
            "HOME": str(root),
            "LANG": "C.UTF-8",
            "XDG_CONFIG_HOME": str(root / "xdg"),
            "XDG_CACHE_HOME": str(root / "cache"),  # not the runner's ~/.cache
        }
        if pythonpath is not None:
            self.env["PYTHONPATH"] = str(pythonpath)
        self.written: object = None

    def write_memory(self, rows: list[tuple[str, str, str]]) -> None:
        if self.written is rows:
            return
        lines = ["# MEMORY"] + [f"{d}|{s}|{c}" for d, s, c in rows]
        self.memory.write_text("\n".join(lines) + "\n", encoding="utf-8")
        self.written = rows

    def warm_up(self) -> None:
        """One ask that embeds every line: with `memory.recall_wait` raised for it (then the
        config put back), or as it is for a tree that does not know the key (its first ask
        waits for every line)."""
        knows = "recall_wait" in (self.tree / "config" / "settings.py").read_text("utf-8")
        with recall_waits(self.config, WARM_WAIT) if knows else contextlib.nullcontext():
            self.run("ask", "--no-save", "--plain", "warm up")

    def run(self, *args: str) -> str:
        cmd = [sys.executable, "-m", "countbot_cli", *args]
        res = subprocess.run(cmd, env=self.env, cwd=self.root, capture_output=True, text=True)
        if res.returncode != 0:
            raise SystemExit(f"{' '.join(args[:2])} failed: {res.stderr[-800:]}")
        return res.stdout


def recalled_block(message: str) -> tuple[str, list[tuple[bool, str]]]:
    """(the block as sent, its lines as (marked older, content)) of a current message."""
    if RECALL_END not in message:
        return "", []
    block = message.split(RECALL_END, 1)[0] + RECALL_END
    lines = []
    for line in block.splitlines()[1:-1]:
        head, _sep, content = line.removeprefix("- ").partition(": ")
        lines.append((head.endswith("(older)"), content))
    return block, lines


# ---- measuring ----


@dataclass
class Tally:
    sent: dict[str, list[bool]] = field(default_factory=dict)
    unmarked: dict[str, list[bool]] = field(default_factory=dict)
    stale: list[bool] = field(default_factory=list)
    tokens: list[int] = field(default_factory=list)
    lines: list[int] = field(default_factory=list)
    top5: dict[str, list[bool]] = field(default_factory=dict)  # every answer session
    any5: dict[str, list[bool]] = field(default_factory=dict)  # one of them at least
    seconds: list[float] = field(default_factory=list)

    def add(self, q: Question, found: list[tuple[bool, str]], tokens: int, secs: float) -> None:
        contents = {c for _old, c in found}
        fresh = {c for old, c in found if not old}
        holds = all if q.every else any
        self.sent.setdefault(q.kind, []).append(holds(a in contents for a in q.answers))
        self.unmarked.setdefault(q.kind, []).append(holds(a in fresh for a in q.answers))
        if q.superseded:
            self.stale.append(any(s in fresh for s in q.superseded))
        self.tokens.append(tokens)
        self.lines.append(len(found))
        self.seconds.append(secs)


def measure(probe: Probe, homes: dict[str, Home], server: fs.FakeServer) -> dict[str, Tally]:
    from countbot_cli.conversation.tokens import TokenCounter

    count = TokenCounter("gpt-4o").count_text
    tallies = {name: Tally() for name in homes}
    for home in homes.values():  # fills each tree's vector cache (not counted)
        home.write_memory(probe.rows)
        home.warm_up()
    for k, q in enumerate(probe.questions):
        for name, home in homes.items():
            home.write_memory(q.rows if q.rows is not None else probe.rows)
            t0 = time.perf_counter()
            home.run("ask", "--no-save", "--plain", q.text)
            secs = time.perf_counter() - t0
            message = server.chat_bodies()[-1]["messages"][-1]["content"]
            block, found = recalled_block(message)
            tallies[name].add(q, found, count(block) if block else 0, secs)
        if (k + 1) % 20 == 0:
            print(f"  {probe.name}: {k + 1}/{len(probe.questions)} questions", file=sys.stderr)
    if probe.sessions:
        ids = build_sessions(probe, homes)
        for search in probe.searches:
            want = {ids[key] for key in search.answers}
            for name, home in homes.items():
                hits = json.loads(home.run("sessions", "search", "--json", "-n", "5", search.text))
                top = {h["id"] for h in hits}
                tallies[name].top5.setdefault(search.kind, []).append(want <= top)
                tallies[name].any5.setdefault(search.kind, []).append(bool(want & top))
    return tallies


def build_sessions(probe: Probe, homes: dict[str, Home]) -> dict[str, str]:
    """The probe's sessions saved by this checkout's SessionStore once (a message a minute
    from the session's start), copied to each home; the probe's keys -> the sessions' ids."""
    from countbot_cli.conversation.sessions.session import new_session, title_from
    from countbot_cli.conversation.sessions.store import SessionStore
    from countbot_cli.messages import Message

    first = next(iter(homes.values()))
    store = SessionStore(first.sessions)
    ids = {}
    for past in probe.sessions:
        s = new_session(provider="bench", model="m", title=title_from(past.said[0][1]))
        s.messages = [Message(role=r, content=t) for r, t in past.said]  # type: ignore[arg-type]
        if past.started is not None:
            for k, m in enumerate(s.messages):
                m.created_at = _utc(past.started + timedelta(minutes=k))
            s.created_at, s.updated_at = s.messages[0].created_at, s.messages[-1].created_at
        store.create(s)
        ids[past.key] = s.id
    for home in list(homes.values())[1:]:
        shutil.copytree(first.sessions, home.sessions)
    return ids


def _utc(when: datetime) -> str:
    return when.replace(tzinfo=timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ")


def share(values: list[bool]) -> str:
    return f"{sum(values) / len(values):.2f}" if values else "  - "


def report(probe: Probe, tallies: dict[str, Tally]) -> None:
    kinds = list(dict.fromkeys(q.kind for q in probe.questions))
    first = next(iter(tallies.values()))

    def row(label: str, cells: list[str], n: int | str = "") -> None:
        print(f"  {label:26}" + "".join(f"{c:>16}" for c in cells) + f"{n:>6}")

    print(f"\n{probe.name}: {len(probe.questions)} questions; sent / sent and not marked (older)")
    row("", list(tallies), "n")
    for kind in kinds:
        row(
            kind,
            [f"{share(t.sent[kind])} / {share(t.unmarked[kind])}" for t in tallies.values()],
            len(first.sent[kind]),
        )
    row("superseded sent unmarked", [share(t.stale) for t in tallies.values()], len(first.stale))
    row("lines a question", [f"{sum(t.lines) / len(t.lines):.1f}" for t in tallies.values()])
    row("tokens a question", [f"{sum(t.tokens) / len(t.tokens):.0f}" for t in tallies.values()])
    row("ask, median seconds", [f"{statistics.median(t.seconds):.2f}" for t in tallies.values()])
    if first.top5:
        print("  session search, top 5: every answering session / at least one")
        for kind in first.top5:
            cells = [f"{share(t.top5[kind])} / {share(t.any5[kind])}" for t in tallies.values()]
            row(kind, cells, len(first.top5[kind]))


def probes(names: list[str]) -> Iterator[Probe]:
    for name in names:
        yield tuned_probe() if name == "tuned" else heldout_probe()


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--probe", action="append", choices=("tuned", "heldout"))
    ap.add_argument("--tree", action="append", help="NAME=PATH|REV (default before, after)")
    ap.add_argument("--every", type=int, default=1, help="only every Nth question (a quick look)")
    args = ap.parse_args()
    trees = args.tree or [f"before={BASELINE}", "after=."]
    print(f"load average {os.getloadavg()[0]:.1f} at the start", file=sys.stderr)
    with tempfile.TemporaryDirectory(prefix="cb-recall-eval-") as t, fs.FakeServer() as server:
        tmp = Path(t)
        server.default = fs.text("fine")
        paths = {n: tree_path(p, tmp) for n, p in (spec.split("=", 1) for spec in trees)}
        for probe in probes(args.probe or ["tuned"]):
            probe.questions = probe.questions[:: args.every]
            probe.searches = probe.searches[:: args.every]
            homes = {n: Home(tmp / probe.name / n, p, server.base_url) for n, p in paths.items()}
            report(probe, measure(probe, homes, server))
    print(f"load average {os.getloadavg()[0]:.1f} at the end", file=sys.stderr)


if __name__ == "__main__":
    main()
