"""What reaches the system prompt (session summary, recalled MEMORY.md entries) and the text
the summariser is shown (formatter, sentinel, recall words)."""

from __future__ import annotations

from dataclasses import replace
from datetime import date
from pathlib import Path
from typing import Any

from cbenv import make_cb
from memory_rig import q

from countbot_cli.config.settings import load_settings
from countbot_cli.memory.digest import format_newest, is_no_memory, overflow_batches, summary_line
from countbot_cli.memory.keeper import MemoryKeeper
from countbot_cli.memory.recall import Budget, Meaning, Recall, label, line_tokens, pick
from countbot_cli.memory.report import entry_for
from countbot_cli.memory.search import Index, Snapshot, query_words
from countbot_cli.messages import Message
from countbot_cli.prompts import NO_MEMORY_SENTINEL


def test_session_summary_in_the_system_prompt_recalled_memory_in_the_message(
    rig_factory: Any,
) -> None:
    rig = rig_factory(memory={"inject": "relevant"})
    rig.turn(q(1))
    assert rig.session is not None
    rig.store.set_summary(rig.session.id, "A session about the Redis migration.")
    keeper = rig.keeper
    keeper.memory.add("Production Redis runs version 7.2 on port 6380", "user")
    keeper.memory.add("The user likes green tea", "user")
    rig.turn("which redis port do we use?")
    sent = rig.chat_bodies()[-1]["messages"]
    system, current = sent[0]["content"], sent[-1]["content"]
    assert system.endswith("\n\n## Current Session Context\nA session about the Redis migration.")
    assert "Redis runs version 7.2" not in system  # the volatile tail stays out of the head
    assert current.index("Redis runs version 7.2 on port 6380") < current.index(
        "which redis port do we use?"
    )
    assert current.index("The user likes green tea") < current.index("which redis port")
    # what is saved is what the user typed
    saved = [m for m in rig.saved()["messages"] if m["role"] == "user"]
    assert saved[-1]["content"] == "which redis port do we use?"


def test_recall_modes_and_budget(tmp_path: Path) -> None:
    from countbot_cli.memory.store import MemoryStore

    cb = make_cb(tmp_path, "http://127.0.0.1:9/v1")
    settings = load_settings(config_path=cb.config_file, env=cb.env, cwd=cb.work)
    memory = MemoryStore(tmp_path / "MEMORY.md")
    for i in range(40):
        memory.add(f"note {i} about deployment number {i} " + "word " * 30, "user")
    memory.add("用户偏好使用 PostgreSQL 数据库", "user")
    memory.add("The user likes green tea", "user")

    def keeper(mode: str, lines: int = 20, tokens: int = 1000) -> MemoryKeeper:
        budget = {"inject": mode, "recall_lines": lines, "recall_tokens": tokens}
        s = replace(settings, memory=settings.memory._replace(**budget))
        k = MemoryKeeper(s, _NoProvider(), None, memory)  # type: ignore[arg-type]
        k.recaller = Recall(memory, semantic=False)  # by words (without the recall extra)
        return k

    relevant = keeper("relevant", tokens=200)
    got = relevant.recall("how did deployment go?")
    assert sum(line_tokens(g) for g in got) <= 200  # three whole, a fourth cut to what remains
    assert len(got) == 4 and all("deployment" in g for g in got)
    assert got[0].endswith("…") and not any(g.endswith("…") for g in got[1:])
    today = date.today().isoformat()
    assert [g.split(" ", 3)[2] for g in got] == ["36", "37", "38", "39"]  # newest on ties ...
    assert all(g.startswith(f"{today}: note ") for g in got)  # ... sent oldest first, dated
    assert len(keeper("relevant", lines=3).recall("how did deployment go?")) == 3
    assert relevant.recall("数据库用什么") == [f"{today}: 用户偏好使用 PostgreSQL 数据库"]
    assert relevant.recall("the and of") == []
    assert relevant.recall("what do we use?") == []  # "use" is not "user"
    assert relevant.recall("") == []
    recent = keeper("recent", lines=5).recall("anything")
    assert recent[-1] == f"{today}: The user likes green tea"  # chronological, newest last
    assert len(recent) == 5
    assert keeper("off").recall("deployment") == []


def recall_keeper(tmp_path: Path, entries: list[str], **budget: int) -> MemoryKeeper:
    from countbot_cli.memory.store import MemoryStore

    memory_config = {"inject": "relevant", **budget}
    cb = make_cb(tmp_path, "http://127.0.0.1:9/v1", memory=memory_config)
    settings = load_settings(config_path=cb.config_file, env=cb.env, cwd=cb.work)
    memory = MemoryStore(tmp_path / "MEMORY.md")
    for e in entries:
        memory.add(e, "user")
    keeper = MemoryKeeper(settings, _NoProvider(), None, memory)  # type: ignore[arg-type]
    keeper.recaller = Recall(memory, semantic=False)  # by words (without the recall extra)
    return keeper


def test_recall_by_words_sends_the_lines_holding_the_words_of_the_question(
    tmp_path: Path,
) -> None:
    keeper = recall_keeper(
        tmp_path,
        [
            "User's name is Alice；works at Acme Corp as a backend engineer",
            "User prefers tea over coffee；drinks green tea every morning",
            "Project countbot uses Python 3.12 and PostgreSQL 16 on port 5433",
            "User's cat is called Miso；vet appointment on 2025-03-14",
            "用户喜欢喝绿茶；不喝咖啡",
            "用户住在上海浦东新区",
            "用户的猫叫小米；每天喂两次",
        ],
        recall_lines=1,
    )

    def contents(text: str) -> list[str]:
        return [r.split(": ", 1)[1] for r in keeper.recall(text)]

    assert contents("What's my cat's name?") == [
        "User's cat is called Miso；vet appointment on 2025-03-14"
    ]
    assert contents("which port is postgres on")[0].startswith("Project countbot uses")
    assert contents("what should I drink this morning?")[0].startswith("User prefers tea")
    assert contents("我住在哪里？") == ["用户住在上海浦东新区"]
    assert contents("我的猫叫什么") == ["用户的猫叫小米；每天喂两次"]
    assert contents("what do you think?") == []


def test_a_line_too_long_for_what_remains_of_the_budget_goes_cut_to_its_start(
    tmp_path: Path,
) -> None:
    notes = "Redis notes: " + " ".join(f"redis cluster node{i} port {7000 + i}" for i in range(80))
    keeper = recall_keeper(tmp_path, ["Redis cache runs on port 6380", notes], recall_tokens=300)
    got = keeper.recall("which port does the redis cache run on?")
    assert len(got) == 2 and got[0].endswith(": Redis cache runs on port 6380")  # whole
    start = got[1].split(": ", 1)[1]
    assert start.endswith("…") and notes.startswith(start[:-1])  # the notes' start ...
    assert len(start) > 500  # ... as long as fits: the 300 tokens less the first line
    assert 300 - 1 <= sum(line_tokens(g) for g in got) <= 300
    hit = entry_for(got[1], keeper.memory.numbered())  # what `ask --json` and /context report
    assert hit is not None and hit[1].content == notes


def test_a_long_line_ranked_first_never_crowds_out_the_short_lines_after_it() -> None:
    """A pasted log that ranks first goes cut to what the whole lines leave, not first."""
    import numpy as np

    log = "build log: " + " ".join(f"step {i} ok" for i in range(400))
    rows = [
        "2025-01-01|auto|" + log,
        "2025-02-01|user|the build server is called hopper",
        "2025-03-01|user|builds run nightly at 02:00",
    ]
    snap = Snapshot.parse(("\n".join(rows) + "\n").encode(), key=None)
    meaning = Meaning(np.array([1.0, 0.6, 0.5], dtype=np.float32))  # the log ranks first
    found = pick(snap, [], meaning, Budget(lines=4, tokens=120), len)
    assert [p.entry.date for p in found] == ["2025-01-01", "2025-02-01", "2025-03-01"]
    assert found[1].entry.content == "the build server is called hopper"  # whole
    assert found[2].entry.content == "builds run nightly at 02:00"  # whole
    assert found[0].entry.content.endswith("…") and log.startswith(found[0].entry.content[:-1])
    assert sum(len(label(p.entry, p.older)) for p in found) <= 120


def test_a_cut_line_leaves_room_for_the_newer_line_that_replaces_it() -> None:
    """The older line is cut to what remains after its update, so both go, it marked `(older)`."""
    import numpy as np

    old = "the staging server runs on port 6380 in rack 4" + ", rack 4" * 40
    rows = ["2025-01-01|auto|" + old, "2025-03-01|auto|the staging server now runs on port 6390"]
    snap = Snapshot.parse(("\n".join(rows) + "\n").encode(), key=None)
    meaning = Meaning(np.array([1.0, 0.5], dtype=np.float32))  # the old line ranks first
    found = pick(snap, [], meaning, Budget(lines=4, tokens=150), len)
    assert [(p.entry.date, p.older) for p in found] == [("2025-01-01", True), ("2025-03-01", False)]
    assert found[0].entry.content.endswith("…") and old.startswith(found[0].entry.content[:-1])
    assert found[1].entry.content == "the staging server now runs on port 6390"  # whole
    assert sum(len(label(p.entry, p.older)) for p in found) <= 150


class _NoProvider:
    name = "none"
    model = "gpt-4o"
    context_window = None

    def stream(self, req: Any) -> Any:
        raise AssertionError("no summary call expected")


def test_formatter_keeps_meaningful_short_messages() -> None:
    def line(text: str) -> str | None:
        return summary_line(Message(role="user", content=text))

    assert line("好的") is None and line("thanks!") is None and line("  ok. ") is None
    assert line("好的，用Redis") == "USER: 好的，用Redis"
    assert line("no, use v2") == "USER: no, use v2"
    assert line("no") == "USER: no"
    assert line("   ") is None
    assert line("a\n\nb") == "USER: a b"
    assert line("x" * 400) == "USER: " + "x" * 300 + "..."


def test_format_newest_and_batches() -> None:
    msgs = [
        Message(role="user" if i % 2 == 0 else "assistant", content=f"m{i} " + "y" * 200)
        for i in range(60)
    ]
    text = format_newest(msgs, 1000)
    assert len(text) <= 1000 and text.endswith(msgs[-1].content)
    batches = overflow_batches(msgs, 2000)
    assert [m for b in batches for m in b.messages] == msgs
    assert all(sum(len(ln) + 1 for ln in b.lines) <= 2000 for b in batches)
    assert len(batches) > 1


def test_sentinel_matching_is_exact() -> None:
    assert is_no_memory(NO_MEMORY_SENTINEL) and is_no_memory(f" {NO_MEMORY_SENTINEL}。")
    assert is_no_memory("Nothing to record.")
    assert not is_no_memory(f"用户说{NO_MEMORY_SENTINEL}的测试；偏好 Go")


def test_query_words() -> None:
    words = query_words("How do we deploy the API?")
    assert "deploy" in words and "api" in words and "the" not in words
    assert "数据" in query_words("我们的数据库") and "的数" not in query_words("我们的数据库")


def test_hits_counted_up_to_a_bound_are_the_first_of_all_the_hits() -> None:
    """`Index.hits(term, most)`: the first `most + 1` entries holding the term, as the unbounded
    search finds them, whether the term is rare (found one by one) or common (each line
    tested once the hits are dense)."""
    import random

    rng = random.Random(5)
    words = ["cello", "vpn", "note", "the", "garden", "关", "x"]
    rows = [" ".join(rng.choices(words, k=rng.randint(1, 6))) for _ in range(600)]
    index = Index(rows, ["2025-01-01"] * len(rows))
    for term in [*words, "gard", "zzz", "cello vpn"]:
        every = index.hits(term)
        assert every == [k for k, r in enumerate(rows) if term in r]
        for most in (0, 1, 5, 31, 32, 40, 599, 600, 700):
            assert index.hits(term, most) == every[: most + 1], (term, most)


def test_lines_without_a_vector_yet_come_in_by_their_words() -> None:
    """A cold or partial vector cache: the lines that have a vector are ranked by meaning, the
    others can only come in by their words, and the places kept for words grow with their
    share (memory/rank.py)."""
    import numpy as np

    rows = [f"2025-01-{k + 1:02d}|user|note {k} on the quarterly figures" for k in range(20)]
    rows += ["2025-02-01|user|the Hetzner invoice is HZ-2291", "2025-02-02|user|Hetzner box: hz1"]
    snap = Snapshot.parse(("\n".join(rows) + "\n").encode(), key=None)
    scores = np.linspace(1.0, 0.0, len(rows)).astype(np.float32)  # meaning favours the notes
    budget = Budget(lines=4, tokens=1000)

    def picked(embedded: list[bool] | None) -> list[str]:
        mask = None if embedded is None else np.array(embedded)
        found = pick(snap, ["hetzner"], Meaning(scores, mask), budget, len)
        return [p.entry.content for p in found]

    everything = picked(None)  # every line has its vector: one place by words, three by meaning
    assert everything == [*(f"note {k} on the quarterly figures" for k in range(3)), rows[-1][16:]]
    half = picked([k < 20 and k % 2 == 0 for k in range(len(rows))])  # Hetzner's: none yet
    assert "the Hetzner invoice is HZ-2291" in half and "Hetzner box: hz1" in half
    words = [p.entry.content for p in pick(snap, ["hetzner"], None, budget, len)]
    assert words == ["the Hetzner invoice is HZ-2291", "Hetzner box: hz1"]  # by words alone
