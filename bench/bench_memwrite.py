"""Memory written right by any model, measured side by side on two countbot trees. For information.

Each part runs every tree given with `--tree NAME=DIR` (default: this one; add
`--tree main=/work/main` for the code before a change), alternating the order between rounds,
each in its own interpreter (DIR/.venv/bin/python) or its own `countbot` (DIR/.venv/bin/countbot):

- `facts`: a scripted 60-turn conversation (window of 16 messages) in which the user states 12
  facts and the assistant gives 4 (a recommendation, a figure, a plan, a product), through
  countbot's own Conversation as the chat runs it (upkeep after each turn). The chat's answers
  are scripted; the summary calls go to (a) a summariser that answers junk (`… 2.`), (b) one
  that invents a name (`Ferrum`), (c) the bundled SmolLM2-135M-Instruct under its own name and
  (c') under another name (so it is asked for summaries) — both through llama-cpp-python's
  server with the bundled GGUF. Printed per case: facts kept (user /12, assistant /4), lines
  written, lines naming what was never said (a capitalised word or a number the conversation
  does not hold), junk lines (no word shared with the conversation), the rolling summary.
- `backlog`: `countbot ask -s ID QUESTION` on a saved session with 7 steps of backlog, against a
  summariser that takes 0.5 s a call: time to the answer's first byte on stdout, requests the
  server got before the answer's, summary calls, time to exit.
- `filter`: the two filters on cases they were tuned on and on held-out ones, in process. Tuned:
  this bench's conversation and a paraphrase of each of its facts as a summariser writes it.
  Dev: bench/probes/statements_dev.json, chat turns labelled durable or not before the
  statements' filter was tuned on them: durable turns kept with the words that make them
  durable, the others kept (false keeps), and the longest line. Held-out:
  bench/probes/sessions_heldout.json (written by someone who never read this code): how many of
  its evidence turns the statements' filter keeps as said (user turns, assistant turns), how
  many of its reference answers pass the grounding check against the sessions that hold them,
  and how many pass once a name or number in them is swapped for an invented one.
- `embedded`: 40 turns on the embedded model with the chat's worker (the REPL's upkeep after
  each answer, `--pause` seconds of "typing" between turns, 2 by default), window 16: the first-token time of the turn right
  after a window step against the median of the others (target at most 1.5x), and the time a
  turn waited for the upkeep; with the bundled model under its name and under another (asked for
  summaries).

Run: .venv/bin/python bench/bench_memwrite.py [--part facts|backlog|embedded|filter] [--tree NAME=DIR]
(no capable model is reachable here: case (d) of the issue is not run)
"""

from __future__ import annotations

import argparse
import json
import os
import re
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve()
ROOT = HERE.parent.parent

USER_FACTS = [  # (what the user says, what shows it was kept)
    ("My name is Ada and I live in Lyon.", "Lyon"),
    ("I play the cello on weekends.", "cello"),
    ("My project is called ferrox and it is written in Rust.", "ferrox"),
    ("I'm allergic to peanuts.", "peanut"),
    ("My daughter Mia turns 7 in May.", "Mia"),
    ("I prefer green tea to coffee.", "green tea"),
    ("We decided to deploy ferrox on Hetzner.", "Hetzner"),
    ("My flight to Osaka is next Friday.", "Osaka"),
    ("I switched my editor to Helix last week.", "Helix"),
    ("我住在上海，在一家银行工作。", "上海"),
    ("我的猫叫豆豆。", "豆豆"),
    ("I sold my old Corolla yesterday.", "Corolla"),
]
ASSISTANT_FACTS = [  # (the user's question, the assistant's answer, what shows it was kept)
    ("Which database should ferrox use?", "I recommend PostgreSQL 16 for ferrox.", "PostgreSQL"),
    (
        "How much will the Osaka trip cost?",
        "The trip comes to about 2,400 euros in total.",
        "2,400",
    ),
    (
        "What should my running plan be?",
        "The plan is three 5 km runs a week, then a 10 km race in June.",
        "10 km",
    ),
    ("Which laptop should I buy?", "I'd recommend the ThinkPad X1 Carbon for travel.", "ThinkPad"),
]
JUNK = "MEMORY: … 2.\nSUMMARY: …"
INVENTED = (
    "MEMORY: the user's project is called Ferrum; uses Rust\nSUMMARY: The user builds Ferrum."
)
TURNS = 60


def script() -> list[str]:
    """The user's 60 messages: the facts and the questions spread among fillers."""
    said = [s for s, _ in USER_FACTS] + [q for q, _, _ in ASSISTANT_FACTS]
    out = [f"Tell me one thing about topic number {k}." for k in range(TURNS)]
    for i, text in enumerate(said):
        out[2 + i * 3] = text
    return out


def answer_for(question: str) -> str:
    for q, a, _ in ASSISTANT_FACTS:
        if question.endswith(q):
            return a
    return "Here is a short answer."


# ---------------------------------------------------------------- the children


def child_facts(case: str, llama: str | None) -> dict[str, Any]:
    import fakeserver as fs
    from cbenv import make_cb

    from countbot_cli import app
    from countbot_cli.config.settings import load_settings
    from countbot_cli.conversation.view import SilentView

    calls: list[str] = []

    def responder(body: dict[str, Any]) -> fs.Reply:
        msgs = body["messages"]
        if msgs[0]["role"] == "system":
            return fs.text(answer_for(msgs[-1]["content"]))
        calls.append(msgs[0]["content"])
        if case == "junk":
            return fs.text(JUNK)
        if case == "invent":
            return fs.text(INVENTED)
        return fs.text(smollm(llama, body))

    model = "SmolLM2-135M-Instruct" if case == "bundled" else "tiny-model"
    with tempfile.TemporaryDirectory() as tmp, fs.FakeServer(responder=responder) as server:
        cb = make_cb(
            Path(tmp),
            server.base_url,
            provider={
                "model": model,
                "max_retries": 0,
                "read_timeout": 120,
                "context_window": 8192,
            },
            persona={"max_history_messages": 16},
            memory={"inject": "off"},
        )
        settings = load_settings(config_path=cb.config_file, env=cb.env, cwd=cb.work)
        provider = app.make_provider(settings)
        convo = app.build_conversation(
            settings,
            app.make_store(settings),
            provider_for=lambda _s: provider,
            tools_enabled=False,
            yes=True,
        )
        for text in script():
            convo.send(text, SilentView())
        memory = cb.memory_file.read_text("utf-8") if cb.memory_file.exists() else ""
        session = json.loads((cb.sessions_dir / f"{convo.session.id}.json").read_text("utf-8"))
        provider.close()
    lines = [ln.split("|", 2)[2] for ln in memory.splitlines() if ln and not ln.startswith("#")]
    said = " ".join(script() + [a for _, a, _ in ASSISTANT_FACTS])
    return {
        "user": sum(any(k.casefold() in ln.casefold() for ln in lines) for _, k in USER_FACTS),
        "assistant": sum(
            any(k.replace(",", "") in ln.replace(",", "") for ln in lines)
            for _, _, k in ASSISTANT_FACTS
        ),
        "lines": len(lines),
        "invented": sum(bool(invented(ln, said)) for ln in lines),
        "junk": sum(is_junk(ln, said) for ln in lines),
        "calls": len(calls),
        "summary": session.get("rolling_summary", ""),
    }


def smollm(llama: str | None, body: dict[str, Any]) -> str:
    """The summary call answered by llama-cpp-python's server (the bundled GGUF)."""
    import httpx

    assert llama is not None
    fwd = {k: body[k] for k in ("messages", "temperature", "max_tokens") if k in body}
    r = httpx.post(f"{llama}/chat/completions", json={**fwd, "model": "smollm2"}, timeout=300)
    return str(r.json()["choices"][0]["message"]["content"] or "")


_NAME = re.compile(r"(?<=\w[ ,;:])[A-Z][\w-]+|\d{4}-\d\d(?:-\d\d)?|\d[\d,.]*\d|\d")
_DATE = re.compile(r"\d{4}-\d\d(?:-\d\d)?")  # a relative date resolved: not invented
_CONTENT = re.compile(r"[a-zA-Z]{4,}|[\u4e00-\u9fff]{2}")


def invented(line: str, said: str) -> list[str]:
    """Capitalised words (not first in the line) and numbers the conversation does not hold."""
    low = said.casefold().replace(",", "")
    found = [w for w in _NAME.findall(line) if not _DATE.fullmatch(w)]
    return [w for w in found if w.casefold().replace(",", "") not in low]


def is_junk(line: str, said: str) -> bool:
    """No word of four letters (or CJK pair) the conversation holds."""
    low = said.casefold()
    return not any(w.casefold() in low for w in _CONTENT.findall(line))


def child_embedded(case: str, turns: int, pause: float) -> dict[str, Any]:
    from cbenv import make_cb

    from countbot_cli import app
    from countbot_cli.config.settings import load_settings
    from countbot_cli.conversation.view import SilentView
    from countbot_cli.provider.local import bundled_model_path

    class FirstText(SilentView):
        def __init__(self) -> None:
            self.started = time.monotonic()
            self.first: float | None = None

        def text(self, delta: str) -> None:
            if self.first is None and delta:
                self.first = time.monotonic() - self.started

    gguf = bundled_model_path()
    assert gguf is not None, "the local extra is not installed"
    out: dict[str, list[float]] = {"after": [], "other": [], "waits": [], "steps": []}
    with tempfile.TemporaryDirectory() as tmp:
        local: dict[str, Any] = {"context_window": 4096}
        if case == "renamed":  # the same file under a name that is not the smoke-test model's
            local["model_path"] = str(Path(tmp) / "tiny-instruct.gguf")
            os.symlink(gguf, local["model_path"])
        cb = make_cb(Path(tmp), None)
        cb.write_config(
            {
                "default_provider": "local",
                "providers": {"local": {"type": "local", **local}},
                "tools": {"enabled": False},
                "persona": {"max_history_messages": 16},
                "memory": {"inject": "off", "auto_memory": True},
                "temperature": 0,
                "max_tokens": 32,
            }
        )
        settings = load_settings(config_path=cb.config_file, env=cb.env, cwd=cb.work)
        convo = app.build_conversation(
            settings,
            app.make_store(settings),
            provider_for=lambda s: app.make_provider(s),
            tools_enabled=False,
            yes=True,
        )
        convo.upkeep_in_background()
        archived = 0
        texts = script()
        for i in range(turns):
            convo.settle()
            stepped = len(convo.session.archived) > archived
            archived = len(convo.session.archived)
            view = FirstText()
            result = convo.send(texts[i % len(texts)], view)
            waited = getattr(result, "upkeep_wait", None)
            if view.first is not None and i > 0:
                out["after" if stepped else "other"].append(view.first)
                if stepped:
                    out["steps"].append(float(i))
            if waited:
                out["waits"].append(waited)
            time.sleep(pause)  # the user reads and types; the worker runs the upkeep meanwhile
        convo.wait_upkeep()
        convo.close()
    return out


# ---------------------------------------------------------------- the parent


PARAPHRASES = [  # a summariser's line for each fact of the script (the tuned positives)
    "User's name is Ada; lives in Lyon",
    "Plays the cello on weekends",
    "User's project ferrox is written in Rust",
    "User is allergic to peanuts",
    "User's daughter Mia turns 7 in May",
    "Prefers green tea over coffee",
    "Decided to deploy ferrox on Hetzner",
    "Flight to Osaka next Friday",
    "Switched editor to Helix last week",
    "用户住在上海，在银行工作",
    "用户的猫叫豆豆",
    "Sold the old Corolla yesterday",
    "The assistant recommended PostgreSQL 16 for ferrox",
    "The assistant estimated the Osaka trip at about 2,400 euros",
    "Plan agreed: three 5 km runs a week, then a 10 km race in June",
    "The assistant recommended a ThinkPad X1 Carbon for travel",
]
_SWAP_NUMBER = re.compile(r"\d+")
_SWAP_NAME = re.compile(r"(?<=\w[ ,;:])[A-Z][a-z]+")
_SWAP_CJK = re.compile(r"[\u4e00-\u9fff]{2}")


def swapped(line: str) -> str | None:
    """`line` with one thing it names replaced by an invented one (None: it names nothing)."""
    for pattern, new in ((_SWAP_NAME, "Quenby"), (_SWAP_NUMBER, "4711"), (_SWAP_CJK, "澜沧")):
        if pattern.search(line):
            return pattern.sub(new, line, count=1)
    return None


def grounding_rates(cases: list[tuple[str, list[str], list[Any]]]) -> tuple[int, int, int, int]:
    """(positives passed, positives, negatives rejected, negatives) of (line, texts, days)."""
    from countbot_cli.memory.grounding import Grounds
    from countbot_cli.memory.summary_prompts import overflow_summary_prompt

    allowed = overflow_summary_prompt("", "en")
    passed = rejected = negatives = 0
    for line, texts, days in cases:
        g = Grounds(texts, days, allowed)
        passed += not g.missing(line)
        bad = swapped(line)
        if bad is not None:
            negatives += 1
            rejected += bool(g.missing(bad))
    return passed, len(cases), rejected, negatives


def kept_as_said(turns: list[tuple[str, str]]) -> tuple[int, int, int, int]:
    """(user turns kept, user turns, assistant turns kept, assistant turns) by the statements
    filter, each turn alone."""
    from countbot_cli.memory.statements import statements
    from countbot_cli.messages import Message

    out = [0, 0, 0, 0]
    for role, text in turns:
        i = 0 if role == "user" else 2
        out[i + 1] += 1
        out[i] += bool(statements([Message(role=role, content=text)], "en"))  # type: ignore[arg-type]
    return out[0], out[1], out[2], out[3]


def dev_rates(turns: list[dict[str, Any]]) -> dict[str, tuple[int, int, int, int, int]]:
    """By role: (durable turns kept with their `keep` words, durable turns, other turns kept,
    other turns, the longest line) of bench/probes/statements_dev.json's turns, each alone."""
    from countbot_cli.memory.statements import statements
    from countbot_cli.messages import Message

    out = {}
    for role in ("user", "assistant"):
        kept = [0, 0, 0, 0, 0]
        for t in (t for t in turns if t["role"] == role):
            found = statements([Message(role=role, content=t["text"])], "en")
            line = found[0].text if found else ""
            kept[4] = max(kept[4], len(line))
            if t["durable"]:
                kept[1] += 1
                kept[0] += t["keep"].replace(",", "") in line.replace(",", "")
            else:
                kept[3] += 1
                kept[2] += bool(line)
        out[role] = (kept[0], kept[1], kept[2], kept[3], kept[4])
    return out


def part_filter() -> None:
    from datetime import date, datetime

    today = date(2026, 12, 4)
    said = [s for s in script()] + [a for _, a, _ in ASSISTANT_FACTS]
    tuned_turns = [("user", s) for s, _ in USER_FACTS] + [
        ("assistant", a) for _, a, _ in ASSISTANT_FACTS
    ]
    tuned = grounding_rates([(p, said, [today]) for p in PARAPHRASES])
    probe = json.loads((ROOT / "bench" / "probes" / "sessions_heldout.json").read_text("utf-8"))
    by_id = dict(zip(probe["haystack_session_ids"], probe["haystack_sessions"], strict=True))
    when = {
        sid: datetime.strptime(d[:10], "%Y/%m/%d").date()
        for sid, d in zip(probe["haystack_session_ids"], probe["haystack_dates"], strict=True)
    }
    cases = []
    turns: list[tuple[str, str]] = []
    for q in probe["questions"]:
        sids = q["answer_session_ids"]
        texts = [t["content"] for sid in sids for t in by_id[sid]]
        cases.append((q["answer"], texts, [when[sid] for sid in sids]))
        turns += [
            (by_id[sid][k]["role"], by_id[sid][k]["content"]) for sid, k in q["evidence_turns"]
        ]
    held = grounding_rates(cases)
    turns = list(dict.fromkeys(turns))
    print(
        "filter: tuned (this bench's facts) | dev (bench/probes/statements_dev.json) | "
        "held-out (bench/probes/sessions_heldout.json)"
    )
    for label, (a, n, b, m) in (("tuned", tuned), ("held-out", held)):
        print(
            f"  grounding, {label:<8}: grounded lines passed {a}/{n} ({a / n:.0%}); "
            f"a name or number swapped, rejected {b}/{m} ({b / m:.0%})"
        )
    dev = dev_rates(
        json.loads((ROOT / "bench/probes/statements_dev.json").read_text("utf-8"))["turns"]
    )
    rows = (
        ("tuned", kept_as_said(tuned_turns)),
        ("dev", dev["user"][:2] + dev["assistant"][:2]),
        ("held-out", kept_as_said(turns)),
    )
    for label, (u, un, a, an) in rows:
        print(
            f"  kept as said, {label:<8}: user turns {u}/{un} ({u / un:.0%}), assistant turns "
            f"{a}/{an} ({a / an:.0%})"
        )
    (_, _, fu, nu, lu), (_, _, fa, na, la) = dev["user"], dev["assistant"]
    print(
        f"  false keeps,  dev     : user turns {fu}/{nu} ({fu / nu:.0%}), assistant turns "
        f"{fa}/{na} ({fa / na:.0%}); longest line: user {lu}, assistant {la} characters"
    )


def run_child(tree: Path, *args: str) -> Any:
    python = tree / ".venv" / "bin" / "python"
    env = {**os.environ, "PYTHONPATH": f"{tree}{os.pathsep}{tree / 'tests' / 'helpers'}"}
    proc = subprocess.run(
        [str(python), str(HERE), "--child", *args, "--at", str(tree)],
        capture_output=True,
        text=True,
        env=env,
        timeout=3600,
    )
    if proc.returncode != 0:
        sys.exit(f"{tree}: child {args} failed:\n{proc.stderr[-3000:]}")
    return json.loads(proc.stdout.strip().splitlines()[-1])


def start_llama() -> tuple[subprocess.Popen[bytes], str]:
    sys.path.insert(0, str(ROOT / "bench"))
    from bench_local import start_server

    from countbot_cli.provider.local import bundled_model_path

    gguf = bundled_model_path()
    if gguf is None:
        sys.exit("the local extra is not installed: no bundled model")
    proc, port, _ = start_server(gguf, 8192)
    return proc, f"http://127.0.0.1:{port}/v1"


def part_facts(trees: dict[str, Path]) -> None:
    proc, llama = start_llama()
    try:
        print(f"facts: {TURNS} turns, window 16, 12 user facts, 4 assistant facts")
        print(f"  {'case':<34} {'tree':<6} user  asst lines invented junk calls  summary")
        for case, label in (
            ("junk", "(a) junk summariser"),
            ("invent", "(b) invents a name"),
            ("bundled", "(c) bundled SmolLM2, own name"),
            ("tiny", "(c') bundled SmolLM2, other name"),
        ):
            names = list(trees)
            for name in names if case in ("junk", "bundled") else names[::-1]:
                r = run_child(trees[name], "facts", case, llama)
                print(
                    f"  {label:<34} {name:<6} {r['user']:>2}/12 {r['assistant']:>2}/4 "
                    f"{r['lines']:>5} {r['invented']:>8} {r['junk']:>4} {r['calls']:>5}  "
                    f"{r['summary'][:60]!r}",
                    flush=True,
                )
        print("  (d) a capable model: none is reachable here, not run")
    finally:
        proc.terminate()
        proc.wait()


def backlog_session(sessions: Path) -> str:
    from countbot_cli.conversation.sessions.session import new_session
    from countbot_cli.conversation.sessions.store import SessionStore
    from countbot_cli.messages import Message

    store = SessionStore(sessions)
    s = new_session(provider="test", model="test-model")
    for k in range(60):
        s.messages.append(Message("user", f"I keep note {k}: " + "blah " * 150))
        s.messages.append(Message("assistant", f"Noted {k}. " + "blah " * 150))
    store.create(s)
    return s.id


def part_backlog(trees: dict[str, Path], rounds: int) -> None:
    sys.path.insert(0, str(ROOT / "tests" / "helpers"))
    import fakeserver as fs
    from cbenv import make_cb

    print("backlog: `ask -s` on a session with 7 steps of backlog, 0.5 s a summary call")
    print(f"  {'tree':<6} first byte  requests before  summary calls  exit")
    for r in range(rounds):
        names = list(trees) if r % 2 == 0 else list(trees)[::-1]
        for name in names:
            order: list[str] = []

            def responder(body: dict[str, Any], order: list[str] = order) -> fs.Reply:
                if body["messages"][0]["role"] == "system":
                    order.append("chat")
                    return fs.text("the answer", chunk_size=50)
                order.append("summary")
                return fs.text("MEMORY: the user keeps notes\nSUMMARY: Notes.", delay=0.5)

            with tempfile.TemporaryDirectory() as tmp, fs.FakeServer(responder=responder) as srv:
                cb = make_cb(
                    Path(tmp),
                    srv.base_url,
                    provider={"max_retries": 0, "context_window": 2048},
                    persona={"max_history_messages": 16},
                )
                sid = backlog_session(cb.sessions_dir)
                countbot = trees[name] / ".venv" / "bin" / "countbot"
                start = time.monotonic()
                proc = subprocess.Popen(
                    [str(countbot), "ask", "-s", sid, "What did I note first?"],
                    cwd=cb.work,
                    env=cb.env,
                    stdout=subprocess.PIPE,
                    stderr=subprocess.PIPE,
                )
                assert proc.stdout is not None
                proc.stdout.read(1)
                first = time.monotonic() - start
                proc.communicate(timeout=300)
                end = time.monotonic() - start
            before = order.index("chat") if "chat" in order else -1
            print(
                f"  {name:<6} {first:8.2f} s  {before:>15}  {order.count('summary'):>13}  "
                f"{end:5.1f} s",
                flush=True,
            )


def part_embedded(trees: dict[str, Path], turns: int, pause: float) -> None:
    print(f"embedded: {turns} turns on the embedded model, window 16, {pause:g} s between turns")
    for case, label in (("bundled", "bundled, own name"), ("renamed", "bundled, other name")):
        for name in list(trees) if case == "bundled" else list(trees)[::-1]:
            r = run_child(trees[name], "embedded", case, str(turns), str(pause))
            after = statistics.median(r["after"]) if r["after"] else float("nan")
            other = statistics.median(r["other"]) if r["other"] else float("nan")
            waits = [w for w in r["waits"] if w >= 0.05]  # what the usage line shows
            print(
                f"  {label:<20} {name:<6} first token after a step {after:6.2f} s "
                f"({len(r['after'])} turns) | others {other:6.2f} s ({len(r['other'])}) | "
                f"ratio {after / other:5.2f} | waited for upkeep in {len(waits)} turns, "
                f"max {max(waits, default=0):.2f} s",
                flush=True,
            )


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--part", choices=["facts", "backlog", "embedded", "filter"], action="append")
    ap.add_argument("--tree", action="append", default=[], help="NAME=DIR (repeatable)")
    ap.add_argument("--rounds", type=int, default=2)
    ap.add_argument("--turns", type=int, default=40)
    ap.add_argument("--pause", type=float, default=2.0, help="seconds between two turns")
    ap.add_argument("--child", nargs="+")
    ap.add_argument("--at")
    args = ap.parse_args()
    if args.child:
        sys.path.insert(0, str(Path(args.at)))
        kind, *rest = args.child
        if kind == "facts":
            result: Any = child_facts(rest[0], rest[1] if len(rest) > 1 else None)
        else:
            result = child_embedded(rest[0], int(rest[1]), float(rest[2]))
        print(json.dumps(result, ensure_ascii=False))
        return 0
    trees = dict(t.split("=", 1) for t in args.tree) if args.tree else {"this": str(ROOT)}
    paths = {name: Path(d).resolve() for name, d in trees.items()}
    if shutil.which("nproc"):
        print(f"load average {os.getloadavg()[0]:.1f} on {os.cpu_count()} cores")
    for part in args.part or ["filter", "facts", "backlog", "embedded"]:
        if part == "facts":
            part_facts(paths)
        elif part == "backlog":
            part_backlog(paths, args.rounds)
        elif part == "filter":
            part_filter()
        else:
            part_embedded(paths, args.turns, args.pause)
    return 0


if __name__ == "__main__":
    sys.exit(main())
