"""No junk in MEMORY.md (memory/quality.py), and every line countbot writes traced to the
session and messages it came from (memory/sources.py), end to end through the memory rig."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import fakeserver as fs
import pytest
from memory_rig import q

from countbot_cli.memory import sources
from countbot_cli.memory.quality import MAX_CHARS, NOTHING_NOTE, rejection
from countbot_cli.memory.summary_prompts import overflow_summary_prompt
from countbot_cli.prompts import NO_MEMORY_SENTINEL

SMOL = (
    "You are a helpful AI assistant named SmolLM, trained by Hugging Face. "
    "How can I help you today?"
)
FACT = "User deploys with Ansible；prefers Redis 7 with appendonly"
STORED_FACT = "User deploys with Ansible; prefers Redis 7 with appendonly"  # "；" between English
SAYS_FACT = "We deploy with Ansible, and I prefer Redis 7 with appendonly."
JUNK = [
    ("sentinel", NO_MEMORY_SENTINEL, "nothing to keep"),
    ("sentinel with stop", NO_MEMORY_SENTINEL + "。", "nothing to keep"),
    ("nothing worth keeping", "Nothing worth keeping.", "nothing to keep"),
    ("no durable facts", "No durable facts.", "nothing to keep"),
    ("n/a", "N/A", "nothing to keep"),
    ("none", "None.", "nothing to keep"),
    ("there is nothing", "There is nothing new to remember here.", "nothing to keep"),
    ("no new information", "No new information to record.", "nothing to keep"),
    ("chinese none", "无", "nothing to keep"),
    ("chinese nothing worth", "没有值得记录的内容。", "nothing to keep"),
    ("chinese none yet", "暂无重要信息", "nothing to keep"),
    ("refusal", "I'm sorry, but I can't help with that request.", "refusal"),
    ("chinese refusal", "抱歉，我无法完成这个任务。", "refusal"),
    ("smollm system prompt", SMOL, "instructions or a system prompt"),
    ("chinese system prompt", "你是一个乐于助人的助手。", "instructions or a system prompt"),
    (
        "instruction echo",
        "Output a single line; separate items with the full-width semicolon. Keep only: the "
        "user's explicit preferences and habits; important decisions and conclusions",
        "instructions or a system prompt",
    ),
    ("worked sum", "12 * 7 = 80 The answer is 80.", "worked answer"),
    ("sum in words", "12 times 7 is 84.", "worked answer"),
    ("an answer", "The answer is 84.", "worked answer"),
    ("chinese sum", "12乘以7等于84", "worked answer"),
    ("chinese answer", "答案是84。", "worked answer"),
    ("transcript", "USER: What is 12 times 7? ASSISTANT: 80", "copied the conversation"),
    ("a question", "What is the capital of France?", "copied the conversation"),
    ("chinese question", "用户住在哪里？", "copied the conversation"),
    ("too long", "User likes tea. " * 60, f"longer than {MAX_CHARS}"),
    ("punctuation and a number", "… 2.", "no words"),
    ("duplicate", "user deploys with ansible; PREFERS redis 7, with appendonly!", "stored line"),
]


@pytest.mark.parametrize(("reply", "why"), [j[1:] for j in JUNK], ids=[j[0] for j in JUNK])
def test_each_junk_class_is_rejected(reply: str, why: str) -> None:
    found = rejection(reply, instructions=overflow_summary_prompt("", "en"), existing=[FACT])
    assert found is not None and why in found


@pytest.mark.parametrize(
    "reply",
    [
        FACT + "；works in Berlin",
        "No meat for dinner: the user is vegetarian",
        "用户喜欢用 Redis，部署在周五",
        "User's name is Ana; she uses vim",
        "User is 34, lives in Lyon and deploys on port 8080",
        "User's monthly budget is 1,500 EUR; prefers 2-space indentation",
        "User asked for answers in French",
        "User: Ada; lives in Lyon",
        "User wonders whether to move to Rust (undecided)",
        f"用户的测试数据{NO_MEMORY_SENTINEL}；用户偏好 Redis 7",
    ],
)
def test_real_facts_pass(reply: str) -> None:
    assert rejection(reply, instructions=overflow_summary_prompt("", "en"), existing=[FACT]) is None


def test_junk_is_kept_back_with_one_note_and_a_real_fact_is_stored(rig_factory: Any) -> None:
    rig = rig_factory(persona={"max_history_messages": 2}, memory={"auto_memory": False})
    rig.summariser.replies = [fs.text(SMOL), fs.text("Nothing worth keeping."), fs.text(FACT)]
    for k in range(1, 4):
        rig.turn(q(k))
    assert rig.entries() == []  # and the questions held nothing to keep in the user's words
    assert len(rig.saved()["archived"]) == 4  # skipped like the sentinel: not summarised again
    notes = [n for n in rig.view.notices if "kept back" in n]
    assert notes == [
        "memory: the model's summary was kept back (it repeated the instructions "
        "or a system prompt)"
    ]
    for k in range(4, 6):
        rig.turn(q(k))
    rig.turn(SAYS_FACT)
    rig.turn(q(7))
    assert [e.split("|", 2)[1:] for e in rig.entries()] == [["auto-overflow", STORED_FACT]]
    # kept back and "nothing worth keeping" are normal outcomes: dimmed notes, never failures
    assert rig.view.failures == []
    assert rig.view.notices.count(NOTHING_NOTE) == 1
    assert not any("failed" in n for n in rig.view.notices)
    assert len(rig.summariser.calls) == 3


def test_overflow_of_the_small_models_sum_archives_and_stores_nothing(rig_factory: Any) -> None:
    """The bundled 135M model's summary of "What is 12 times 7?": the batch leaves
    the window and is archived (nothing lost), no memory line is written."""
    rig = rig_factory(persona={"max_history_messages": 2}, memory={"auto_memory": False})
    rig.summariser.replies = [fs.text("12 * 7 = 80 The answer is 80.")]
    for k in range(1, 4):
        rig.turn(q(k))
    assert rig.entries() == []
    assert [m["content"] for m in rig.saved()["archived"]][:2] == [q(1), "answer 1"]
    assert any("worked answer" in n for n in rig.view.notices if "kept back" in n)


def test_memory_lines_are_traced_to_their_messages_through_archiving(rig_factory: Any) -> None:
    rig = rig_factory(persona={"max_history_messages": 2}, memory={"auto_memory": False})
    rig.summariser.replies = [fs.text(FACT)]
    rig.turn(SAYS_FACT)
    for k in range(2, 4):
        rig.turn(q(k))
    (line,) = rig.entries()
    links = sources.load(rig.memory_file)
    record = links[sources.line_key(line)]
    assert record["session"] == rig.sid and record["source"] == "auto-overflow"
    archived = rig.saved()["archived"]
    assert record["messages"] == [m["id"] for m in archived]  # the batch, now archived
    assert [m["content"] for m in archived][:2] == [SAYS_FACT, "answer deploy"]
    assert "|" in line and "session" not in line  # the line users read is unchanged
    side = sources.sidecar_path(rig.memory_file)
    assert side.name == "MEMORY.sources.jsonl" and (side.stat().st_mode & 0o777) == 0o600
    assert json.loads(side.read_text().splitlines()[0])["key"] == sources.line_key(line)


def test_automatic_memory_is_traced_to_the_messages_it_was_shown(rig_factory: Any) -> None:
    rig = rig_factory(memory={"overflow_summary": False, "auto_messages": 4})
    rig.summariser.replies = [fs.text("User is learning Rust")]
    rig.turn("I am learning Rust.")
    rig.turn(q(2))
    (line,) = rig.entries()
    record = sources.load(rig.memory_file)[sources.line_key(line)]
    saved = rig.saved()["messages"]
    assert record["session"] == rig.sid and record["source"] == "auto-memory"
    assert record["messages"] == [m["id"] for m in saved]


def test_a_one_off_ask_over_15000_characters_makes_exactly_one_request(
    tmp_path: Path, server: fs.FakeServer
) -> None:
    from cbenv import make_cb

    cb = make_cb(tmp_path, server.base_url)
    server.add(fs.text("feat: add the thing"), fs.text("unused: no second request"))
    diff = "".join(f"+line {k} of a long diff\n" for k in range(800))
    assert len(diff) > 15_000
    proc = cb.invoke("ask", "write a commit message", input=diff)
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.strip() == "feat: add the thing"
    assert len(server.chat_bodies()) == 1 and server.pending == 1  # the answer, no memory call
    assert not cb.memory_file.exists() or "|auto-" not in cb.memory_file.read_text()
    server.next_reply({})  # drop the unused reply
    server.add(fs.text("fix: thing"), fs.text("User prefers terse commits"))
    proc = cb.invoke("ask", "-c", "and a shorter one?")  # continued: automatic memory runs
    assert proc.returncode == 0, proc.stderr
    assert len(server.chat_bodies()) == 3 and server.pending == 0, proc.stderr
    assert "|auto-memory|User prefers terse commits" in cb.memory_file.read_text(), proc.stderr
