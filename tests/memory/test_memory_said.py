"""Memory written right by any model, as a user meets it: `countbot ask` as a process against the
loopback server. A summary naming what was never said is kept back and the user's own words are
kept instead; a summariser answering junk leaves the user's facts in MEMORY.md and a recap made
of them; a relative date becomes the date it means; the line is dated when things were said."""

from __future__ import annotations

import json
from datetime import datetime
from pathlib import Path
from typing import Any

import fakeserver as fs
import pytest
from cbenv import CB, make_cb

from countbot_cli.conversation.sessions.session import new_session
from countbot_cli.conversation.sessions.store import SessionStore
from countbot_cli.messages import Message

ADA = "My name is Ada and I live in Lyon."
FERROX = "My project is called ferrox and it is written in Rust."
CELLO = "I play the cello on weekends."
TEA = "I prefer green tea to coffee."
UTC = {"TZ": "UTC"}


class Summaries:
    """The loopback server's responder: chat turns get a short answer, summary calls (a single
    user message, no system prompt) get `reply` and are recorded in order."""

    def __init__(self, reply: str) -> None:
        self.reply = reply
        self.asked: list[str] = []
        self.order: list[str] = []

    def __call__(self, body: dict[str, Any]) -> fs.Reply:
        if body["messages"][0]["role"] == "system":
            self.order.append("chat")
            return fs.text("Noted.")
        self.order.append("summary")
        self.asked.append(body["messages"][0]["content"])
        return fs.text(self.reply)


def entries(cb: CB) -> list[list[str]]:
    if not cb.memory_file.exists():
        return []
    text = cb.memory_file.read_text("utf-8")
    return [ln.split("|", 2) for ln in text.splitlines() if ln and not ln.startswith("#")]


def asks(cb: CB, *questions: str) -> str:
    """`countbot ask` each question in one conversation (the first starts it); the last's
    stderr (what the user was told after its answer)."""
    err = ""
    for i, question in enumerate(questions):
        proc = cb.run("ask", *(["-c"] if i else []), question, env=UTC)
        assert proc.returncode == 0, proc.stderr
        err = proc.stderr
    return err


def test_a_summary_naming_what_was_never_said_is_kept_back_and_the_users_words_kept(
    tmp_path: Path, server: fs.FakeServer
) -> None:
    cb = make_cb(
        tmp_path, server.base_url, persona={"max_history_messages": 2}, memory={"inject": "off"}
    )
    server.responder = summaries = Summaries(
        'MEMORY: Your project is called "Ferrum" and it\'s written in Rust\n'
        "SUMMARY: The user builds Ferrum in Rust."
    )
    err = asks(cb, ADA, FERROX, "What should I learn next?")
    assert summaries.order == ["chat", "chat", "chat", "summary"]  # the answer came first
    assert 'kept back (it named "Ferrum", which the messages never said)' in err
    assert "kept what was said instead (2 lines)" in err
    assert "failed" not in err  # the filter did its job: not a failure
    assert [e[1:] for e in entries(cb)] == [
        ["auto-overflow", f'the user said: "{ADA}"'],
        ["auto-overflow", f'the user said: "{FERROX}"'],
    ]
    assert "Ferrum" not in cb.memory_file.read_text("utf-8")
    session = cb.only_session()
    assert "Ferrum" not in session["rolling_summary"]  # the recap is made of what was said
    assert "Ada" in session["rolling_summary"] and "ferrox" in session["rolling_summary"]
    why = cb.run("memory", "why", "2")
    assert why.returncode == 0, why.stderr
    assert 'Kept as said: the model\'s summary was not used (it named "Ferrum"' in why.stdout
    assert FERROX in why.stdout


@pytest.mark.parametrize("junk", ["…", "3."])
def test_a_junk_summariser_leaves_the_users_facts_and_a_recap_made_of_them(
    tmp_path: Path, server: fs.FakeServer, junk: str
) -> None:
    """A 24-turn walk with a summariser that answers `… 2.` to everything and a summary of
    punctuation or a bare number (what the bundled model wrote): what the user said reaches
    MEMORY.md, and the recap (`sessions list`'s gist) is made of it."""
    cb = make_cb(tmp_path, server.base_url, persona={"max_history_messages": 16})
    server.responder = summaries = Summaries(f"MEMORY: … 2.\nSUMMARY: {junk}")
    said = {4: ADA, 9: CELLO, 14: FERROX, 19: TEA}
    for k in range(1, 25):
        args = ["ask", *(["-c"] if k > 1 else []), said.get(k, f"Tell me fact number {k}.")]
        proc = cb.invoke(*args) if k < 24 else cb.run(*args, env=UTC)
        assert proc.returncode == 0, proc.stderr
    assert len(summaries.asked) >= 2
    lines = [e[2] for e in entries(cb)]
    for statement in said.values():
        assert f'the user said: "{statement}"' in lines, lines
    assert not any("…" in line or line.endswith("2.") for line in lines), lines
    listing = cb.run("sessions", "list")
    assert listing.returncode == 0, listing.stderr
    gist = next(ln for ln in listing.stdout.splitlines() if "↳" in ln)
    assert gist.split("↳", 1)[1].strip() == "The user's goal: Tell me fact number 1.", gist
    summary = cb.only_session()["rolling_summary"]
    assert ADA in summary and CELLO in summary


LAPTOP_ANSWER = """Good question! Given the travel and the Linux work you described, here are
the options I looked at:

1. **Lenovo ThinkPad X1 Carbon** – 1.1 kg, great keyboard, about $1,400.
2. **Dell XPS 13** – lovely screen, shorter battery life.
3. **Framework Laptop 13** – repairable, heavier.

**My recommendation: the ThinkPad X1 Carbon**, since it is the lightest and Linux runs well on it.

Let me know if you want a spec-by-spec comparison!"""
GENERIC_ANSWER = (
    "An SSD stores data in NAND flash cells instead of on spinning platters. A typical SATA SSD "
    "reads at about 550 MB/s, while NVMe drives reach 7,000 MB/s over PCIe 4.0."
)


def test_a_junk_summariser_keeps_the_assistants_recommendation_as_one_short_line(
    tmp_path: Path, server: fs.FakeServer
) -> None:
    """A summariser answering junk: a long markdown answer leaves one short line, marked as the
    assistant's, with the pick it made; an explanation of general facts and chatter leave
    nothing; a fact the user told inside a question is kept as the user's."""
    cb = make_cb(
        tmp_path, server.base_url, persona={"max_history_messages": 2}, memory={"inject": "off"}
    )
    answers = {
        "Which laptop should I buy?": LAPTOP_ANSWER,
        "How do SSDs work?": GENERIC_ANSWER,
        "Thanks!": "You're welcome! Have a great day.",
    }
    summaries = Summaries("MEMORY: … 2.\nSUMMARY: …")

    def responder(body: dict[str, Any]) -> fs.Reply:
        question = body["messages"][-1]["content"]
        if body["messages"][0]["role"] == "system" and question in answers:
            return fs.text(answers[question])
        return summaries(body)

    server.responder = responder
    moved = "Since I moved to Denver, which climbing gym should I join?"
    asks(cb, "Which laptop should I buy?", "How do SSDs work?", "Thanks!", moved, "Bye.", "Ok.")
    lines = [e[2] for e in entries(cb)]
    said = [ln for ln in lines if ln.startswith("the assistant said")]
    assert said == [
        'the assistant said: "My recommendation: the ThinkPad X1 Carbon, since it is the '
        'lightest and Linux runs well on it."'
    ], lines
    assert f'the user said: "{moved}"' in lines, lines
    assert not any("NVMe" in ln or "welcome" in ln or "…" in ln for ln in lines), lines


def prepared(cb: CB, said: list[tuple[str, str]], day: str) -> str:
    """A saved session whose messages were all said on `day` at noon UTC; its id."""
    store = SessionStore(cb.sessions_dir)
    session = new_session(provider="test", model="test-model")
    session.messages = [
        Message(role="user" if i % 2 == 0 else "assistant", content=text, created_at=f"{day}T{t}Z")
        for i, (text, t) in enumerate(said)
    ]
    store.create(session)
    return session.id


def test_a_relative_date_becomes_the_date_it_means_and_the_line_is_dated_when_said(
    tmp_path: Path, server: fs.FakeServer
) -> None:
    cb = make_cb(
        tmp_path,
        server.base_url,
        persona={"max_history_messages": 2},
        memory={"auto_memory": False, "inject": "off"},
    )
    sid = prepared(
        cb,
        [
            ("I sold my cello yesterday.", "12:00:00"),
            ("Congratulations!", "12:00:05"),
            ("My sister visits us next Friday.", "12:01:00"),
            ("Lovely.", "12:01:05"),
        ],
        "2026-03-04",  # a Wednesday
    )
    # the model writes a line that keeps "yesterday"; the line carries the date it means, and
    # the day the messages were said, not today
    server.responder = summaries = Summaries(
        "MEMORY: the user sold the cello yesterday; their sister visits next Friday\n"
        "SUMMARY: The user sold a cello."
    )
    proc = cb.run("ask", "-s", sid, "Anything else?", env=UTC)
    assert proc.returncode == 0, proc.stderr
    (prompt,) = summaries.asked
    assert "USER: I sold my cello yesterday (2026-03-03)." in prompt  # shown resolved
    assert "The messages were written on 2026-03-04." in prompt
    assert entries(cb) == [
        [
            "2026-03-04",
            "auto-overflow",
            "the user sold the cello yesterday (2026-03-03); their sister visits next Friday "
            "(2026-03-13)",
        ]
    ]
    assert datetime.now().date().isoformat() != "2026-03-04"


def test_what_the_user_said_is_kept_with_its_own_date_when_the_summary_fails(
    tmp_path: Path, server: fs.FakeServer
) -> None:
    cb = make_cb(
        tmp_path,
        server.base_url,
        persona={"max_history_messages": 2, "language": "zh"},
        memory={"auto_memory": False, "inject": "off"},
    )
    sid = prepared(
        cb,
        [("我上周五去了上海。", "12:00:00"), ("好的", "12:00:05")],
        "2026-03-04",
    )
    store = SessionStore(cb.sessions_dir)

    def later(s: Any) -> None:  # a second day of the same conversation
        s.messages += [
            Message(
                role="user",
                content="I moved to Berlin yesterday.",
                created_at="2026-03-10T12:00:00Z",
            ),
            Message(role="assistant", content="Welcome!", created_at="2026-03-10T12:00:05Z"),
        ]

    store.update(sid, later)
    server.responder = Summaries("")
    server.add(fs.text("answer"), fs.status(500))
    proc = cb.run("ask", "-s", sid, "还有吗？", env=UTC)
    assert proc.returncode == 0, proc.stderr
    assert "kept what was said instead (2 lines)" in proc.stderr
    assert entries(cb) == [
        ["2026-03-04", "auto-overflow", "用户说：“我上周五（2026-02-27）去了上海。”"],
        ["2026-03-10", "auto-overflow", "用户说：“I moved to Berlin yesterday (2026-03-09).”"],
    ]
    assert json.loads(json.dumps(cb.only_session()["archived"]))  # the block left the window


def test_a_resumed_session_with_a_backlog_answers_before_any_summary_call(
    tmp_path: Path, server: fs.FakeServer
) -> None:
    """A session saved with many steps of backlog (its window's steps not yet summarised):
    `ask -s` sends the question first; the summary calls come after the answer."""
    cb = make_cb(
        tmp_path,
        server.base_url,
        provider={"context_window": 2048},
        persona={"max_history_messages": 16},
        memory={"inject": "off"},
    )
    store = SessionStore(cb.sessions_dir)
    session = new_session(provider="test", model="test-model")
    for k in range(40):
        session.messages += [
            Message(role="user", content=f"I keep note {k}: " + "blah " * 150),
            Message(role="assistant", content=f"Noted {k}. " + "blah " * 150),
        ]
    store.create(session)
    server.responder = summaries = Summaries("MEMORY: the user keeps notes\nSUMMARY: Notes.")
    proc = cb.run("ask", "-s", session.id, "What did I note first?")
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.strip() == "Noted."
    assert summaries.order[0] == "chat" and summaries.order.count("chat") == 1
    assert summaries.order.count("summary") >= 3, summaries.order  # the backlog, after it
