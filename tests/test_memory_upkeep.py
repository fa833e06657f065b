"""Overflow summaries, automatic memory, /compact, recall and the session summary, end to end:
the real engine from `app.build_engine`, a real SessionStore and MEMORY.md, real HTTP to the
scriptable loopback server (summary requests are answered by a responder that records them)."""

from __future__ import annotations

import json
import re
from collections.abc import Iterator
from dataclasses import dataclass, field, replace
from datetime import date
from pathlib import Path
from typing import Any

import fakeserver as fs
import pytest
from cbenv import make_cb

from countbot_cli import app
from countbot_cli.config import Settings, load_settings
from countbot_cli.engine import Engine, NullView
from countbot_cli.memory import (
    CURSOR_AUTO,
    MemoryKeeper,
    SummaryError,
    format_newest,
    is_no_memory,
    keeper_of,
    overflow_batches,
    query_words,
    summary_line,
)
from countbot_cli.models import Message
from countbot_cli.prompts import NO_MEMORY_SENTINEL, conversation_memory_prompt
from countbot_cli.session import Session, new_session
from countbot_cli.store import SessionStore

AUTO_MARK = conversation_memory_prompt("", "en").split("\n")[0]
ENTRY_RE = re.compile(r"^\d{4}-\d{2}-\d{2}\|(auto-overflow|auto-memory)\|.+$")


def q(k: int) -> str:
    return f"question {k}"


def a(k: int) -> str:
    return f"answer {k}"


@dataclass
class Summariser:
    """Answers chat turns with `answer K` and records/answers summary requests."""

    replies: list[fs.Reply] = field(default_factory=list)
    calls: list[tuple[str, str, dict[str, Any]]] = field(default_factory=list)
    question_size: int = 0

    def __call__(self, body: dict[str, Any]) -> fs.Reply:
        msgs = body["messages"]
        if msgs[0]["role"] == "system":
            k = msgs[-1]["content"].split()[1]
            return fs.text(f"answer {k}", chunk_size=50)
        prompt = msgs[0]["content"]
        kind = "auto" if prompt.startswith(AUTO_MARK) else "overflow"
        self.calls.append((kind, prompt, body))
        if self.replies:
            return self.replies.pop(0)
        return fs.text(f"fact {len(self.calls)}: user likes tea；uses Python 3.12")

    def of(self, kind: str) -> list[str]:
        return [p for k, p, _ in self.calls if k == kind]


def dialogue_lines(prompt: str) -> list[str]:
    return [ln for ln in prompt.split("\n") if ln.startswith(("USER: ", "ASSISTANT: "))]


class View(NullView):
    def __init__(self) -> None:
        self.notices: list[str] = []

    def notice(self, text: str) -> None:
        self.notices.append(text)


@dataclass
class Rig:
    settings: Settings
    engine: Engine
    store: SessionStore
    server: fs.FakeServer
    summariser: Summariser
    memory_file: Path
    session: Session | None = None
    view: View = field(default_factory=View)

    def turn(self, text: str) -> None:
        if self.session is None:
            self.session = new_session(provider="test", model="test-model")
            is_new = True
        else:
            self.session = self.store.load(self.session.id)
            is_new = False
        result = self.engine.run_turn(self.session, text, self.view, is_new=is_new)
        assert result.status == "ok", result.error

    def saved(self) -> dict[str, Any]:
        assert self.session is not None
        data: dict[str, Any] = json.loads(self.store.path(self.session.id).read_text("utf-8"))
        return data

    def entries(self) -> list[str]:
        if not self.memory_file.exists():
            return []
        text = self.memory_file.read_text("utf-8")
        return [ln for ln in text.splitlines() if ln and not ln.startswith("#")]

    def chat_bodies(self) -> list[dict[str, Any]]:
        return [b for b in self.server.chat_bodies() if b["messages"][0]["role"] == "system"]


@pytest.fixture
def rig_factory(tmp_path: Path) -> Iterator[Any]:
    made: list[tuple[fs.FakeServer, Any]] = []

    def make(provider: dict[str, Any] | None = None, **config: Any) -> Rig:
        summariser = Summariser()
        server = fs.FakeServer(responder=summariser).start()
        root = tmp_path / f"rig{len(made)}"
        extra = {"max_retries": 0, **(provider or {})}
        cb = make_cb(root, server.base_url, provider=extra, **config)
        settings = load_settings(config_path=cb.config_file, env=cb.env, cwd=cb.work)
        provider_obj = app.make_provider(settings)
        made.append((server, provider_obj))
        store = app.make_store(settings)
        engine = app.build_engine(settings, provider_obj, store, tools_enabled=False, yes=False)
        return Rig(settings, engine, store, server, summariser, cb.memory_file)

    yield make
    for server, provider in made:
        provider.close()
        server.stop()


def messages_of(turns: range) -> list[tuple[str, str]]:
    out: list[tuple[str, str]] = []
    for k in turns:
        out += [("user", q(k)), ("assistant", a(k))]
    return out


# ---- overflow: the 20-turn walk ----


def test_twenty_turns_max_history_6(rig_factory: Any) -> None:
    rig = rig_factory(persona={"max_history_messages": 6}, memory={"auto_memory": False})
    before = date.today().isoformat()
    for k in range(1, 21):
        rig.turn(q(k))
        # the request window of turn k: the 6 newest earlier messages, then the question
        body = rig.chat_bodies()[-1]
        sent = [(m["role"], m["content"]) for m in body["messages"][1:]]
        assert sent == [*messages_of(range(max(1, k - 3), k)), ("user", q(k))], k
        # batches: 4 overflow messages are needed, so a call after turns 5, 7, ..., 19
        expected_calls = 0 if k < 5 else (k - 5) // 2 + 1
        assert len(rig.summariser.of("overflow")) == expected_calls, k
    assert rig.view.notices == []
    calls = rig.summariser.calls
    assert len(calls) == 8
    for n, (_kind, prompt, body) in enumerate(calls):
        first = 2 * n + 1  # call n summarises turns first and first + 1
        assert dialogue_lines(prompt) == [
            f"{role.upper()}: {text}" for role, text in messages_of(range(first, first + 2))
        ]
        assert body["temperature"] == 0.3
        assert body["stream"] is False
        assert "tools" not in body
        assert len(body["messages"]) == 1
    # each message summarised once, none skipped
    summarised = [ln for _, p, _ in calls for ln in dialogue_lines(p)]
    assert len(summarised) == len(set(summarised)) == 32
    entries = rig.entries()
    assert len(entries) == 8
    assert all(ENTRY_RE.match(e) for e in entries), entries
    assert all(e.split("|")[0] in (before, date.today().isoformat()) for e in entries)
    assert [e.split("|", 2)[2] for e in entries] == [
        f"fact {n}: user likes tea；uses Python 3.12" for n in range(1, 9)
    ]
    saved = rig.saved()
    assert [(m["role"], m["content"]) for m in saved["archived"]] == messages_of(range(1, 17))
    assert [(m["role"], m["content"]) for m in saved["messages"]] == messages_of(range(17, 21))
    assert saved["cursors"]["overflow"] > 0


def test_failed_summary_is_retried_on_a_later_turn(rig_factory: Any) -> None:
    rig = rig_factory(persona={"max_history_messages": 2}, memory={"auto_memory": False})
    rig.summariser.replies = [fs.status(500)]
    for k in range(1, 4):
        rig.turn(q(k))
    # after turn 3: 4 messages outside the window; the call failed -> nothing changed
    assert len(rig.summariser.calls) == 1
    assert rig.entries() == []
    saved = rig.saved()
    assert saved["archived"] == [] and len(saved["messages"]) == 6
    assert "overflow" not in saved["cursors"]
    assert len(rig.view.notices) == 1
    assert "overflow summary failed" in rig.view.notices[0]
    assert "tried again" in rig.view.notices[0]
    rig.turn(q(4))
    # the retry covers the failed batch and the new overflow: nothing skipped
    retry = rig.summariser.calls[1][1]
    assert dialogue_lines(retry) == [f"{r.upper()}: {t}" for r, t in messages_of(range(1, 4))]
    assert len(rig.entries()) == 1
    saved = rig.saved()
    assert [(m["role"], m["content"]) for m in saved["archived"]] == messages_of(range(1, 4))
    assert [(m["role"], m["content"]) for m in saved["messages"]] == messages_of(range(4, 5))


def test_timed_out_summary_is_retried(rig_factory: Any) -> None:
    rig = rig_factory(
        provider={"read_timeout": 0.5},
        persona={"max_history_messages": 2},
        memory={"auto_memory": False},
    )
    rig.summariser.replies = [fs.hang(5, send_headers=False)]
    for k in range(1, 4):
        rig.turn(q(k))
    assert rig.entries() == [] and rig.saved()["archived"] == []
    assert any("overflow summary failed" in n for n in rig.view.notices)
    rig.turn(q(4))
    assert len(rig.entries()) == 1
    assert len(rig.saved()["archived"]) == 6


def test_empty_summary_reply_changes_nothing(rig_factory: Any) -> None:
    rig = rig_factory(persona={"max_history_messages": 2}, memory={"auto_memory": False})
    rig.summariser.replies = [fs.text("   ")]
    for k in range(1, 4):
        rig.turn(q(k))
    assert rig.entries() == [] and rig.saved()["archived"] == []
    assert any("returned nothing" in n for n in rig.view.notices)


def test_sentinel_reply_writes_nothing_but_archives(rig_factory: Any) -> None:
    rig = rig_factory(persona={"max_history_messages": 2}, memory={"auto_memory": False})
    rig.summariser.replies = [fs.text(NO_MEMORY_SENTINEL)]
    for k in range(1, 4):
        rig.turn(q(k))
    assert len(rig.summariser.calls) == 1
    assert rig.entries() == []
    assert len(rig.saved()["archived"]) == 4
    rig.turn(q(4))
    rig.turn(q(5))
    # the next batch starts after the sentinel batch: turns 1-2 are not summarised again
    assert dialogue_lines(rig.summariser.calls[1][1])[0] == "USER: question 3"


def test_reply_containing_the_sentinel_is_written(rig_factory: Any) -> None:
    rig = rig_factory(persona={"max_history_messages": 2}, memory={"auto_memory": False})
    line = f"用户的测试数据{NO_MEMORY_SENTINEL}；用户偏好 Redis 7"
    rig.summariser.replies = [fs.text(line)]
    for k in range(1, 4):
        rig.turn(q(k))
    assert [e.split("|", 2)[1:] for e in rig.entries()] == [["auto-overflow", line]]


def test_compact_summarises_below_the_batch_threshold(rig_factory: Any) -> None:
    rig = rig_factory(persona={"max_history_messages": 4}, memory={"auto_memory": False})
    for k in range(1, 4):
        rig.turn(q(k))
    assert rig.summariser.calls == []  # 2 overflow messages: below the batch of 4
    keeper = keeper_of(rig.engine)
    assert keeper is not None
    assert rig.session is not None
    written = keeper.compact(rig.session.id)
    assert len(written) == 1 and ENTRY_RE.match(written[0])
    assert dialogue_lines(rig.summariser.calls[0][1]) == ["USER: question 1", "ASSISTANT: answer 1"]
    assert keeper.compact(rig.session.id) == []  # nothing left outside the window
    assert len(rig.summariser.calls) == 1
    rig.summariser.replies = [fs.status(500)]
    rig.turn(q(4))
    with pytest.raises(SummaryError):
        keeper.compact(rig.session.id)
    assert [m["content"] for m in rig.saved()["archived"]] == [q(1), a(1)]


def test_overflow_off_and_unlimited_history_make_no_calls(rig_factory: Any) -> None:
    rig = rig_factory(
        persona={"max_history_messages": 2},
        memory={"auto_memory": False, "overflow_summary": False},
    )
    for k in range(1, 6):
        rig.turn(q(k))
    rig2 = rig_factory(persona={"max_history_messages": 0}, memory={"auto_memory": False})
    for k in range(1, 6):
        rig2.turn(q(k))
    assert rig.summariser.calls == [] and rig2.summariser.calls == []
    assert len(rig2.chat_bodies()[-1]["messages"]) == 1 + 8 + 1  # unlimited: all history


def test_failed_turns_are_archived_but_not_summarised(rig_factory: Any) -> None:
    rig = rig_factory(persona={"max_history_messages": 2}, memory={"auto_memory": False})
    rig.turn(q(1))
    rig.server.add(fs.status(400))  # turn 2 fails: its message is kept, marked failed
    assert rig.session is not None
    session = rig.store.load(rig.session.id)
    result = rig.engine.run_turn(session, q(2), rig.view)
    assert result.status == "failed"
    for k in range(3, 6):
        rig.turn(q(k))
    prompt = rig.summariser.calls[0][1]
    assert "question 2" not in prompt
    archived = rig.saved()["archived"]
    assert any(m.get("status") == "failed" for m in archived)


# ---- automatic memory ----


def test_auto_memory_at_30_messages_then_every_30_new(rig_factory: Any) -> None:
    rig = rig_factory(persona={"max_history_messages": 0})
    for k in range(1, 15):
        rig.turn(q(k))
    assert rig.summariser.calls == []  # 28 messages
    rig.turn(q(15))
    assert len(rig.summariser.of("auto")) == 1  # 30 messages
    first = dialogue_lines(rig.summariser.of("auto")[0])
    assert first[0] == "USER: question 1" and first[-1] == "ASSISTANT: answer 15"
    saved = rig.saved()
    assert saved["cursors"][CURSOR_AUTO] == 30
    for k in range(16, 30):
        rig.turn(q(k))
    assert len(rig.summariser.of("auto")) == 1  # 28 new messages
    rig.turn(q(30))
    calls = rig.summariser.of("auto")
    assert len(calls) == 2
    second = dialogue_lines(calls[1])
    # only messages after the cursor, never the head of the conversation again
    assert second == [f"{r.upper()}: {t}" for r, t in messages_of(range(16, 31))]
    entries = rig.entries()
    assert len(entries) == 2 and all(e.split("|")[1] == "auto-memory" for e in entries)
    assert rig.saved()["cursors"][CURSOR_AUTO] == 60


def test_auto_memory_at_15000_characters_keeps_the_newest(rig_factory: Any) -> None:
    rig = rig_factory(persona={"max_history_messages": 0}, provider={"context_window": 1_000_000})
    long = "x" * 3000
    for k in range(1, 5):
        rig.turn(f"question {k} {long}")
    assert rig.summariser.calls == []  # 4 x 3000 + short answers < 15000
    rig.turn(f"question 5 {long}")
    calls = rig.summariser.of("auto")
    assert len(calls) == 1
    lines = dialogue_lines(calls[0])
    assert sum(len(ln) + 1 for ln in lines) <= 4000
    assert lines[-1] == "ASSISTANT: answer 5"  # the newest content is kept
    assert all(len(ln) <= len("ASSISTANT: ") + 303 for ln in lines)
    rig.turn(f"question 6 {long}")  # more characters, but only 2 new messages
    assert len(rig.summariser.of("auto")) == 1


def test_auto_memory_failure_keeps_the_cursor(rig_factory: Any) -> None:
    rig = rig_factory(persona={"max_history_messages": 0}, memory={"auto_messages": 4})
    rig.summariser.replies = [fs.status(500)]
    rig.turn(q(1))
    rig.turn(q(2))
    assert len(rig.summariser.calls) == 1 and CURSOR_AUTO not in rig.saved()["cursors"]
    assert any("automatic memory failed" in n for n in rig.view.notices)
    rig.turn(q(3))  # retried: the first 4 messages are still pending
    assert dialogue_lines(rig.summariser.calls[1][1])[0] == "USER: question 1"
    assert rig.saved()["cursors"][CURSOR_AUTO] == 6
    rig.summariser.replies = [fs.text(NO_MEMORY_SENTINEL)]
    rig.turn(q(4))
    rig.turn(q(5))
    assert len(rig.entries()) == 1  # the sentinel wrote nothing ...
    assert rig.saved()["cursors"][CURSOR_AUTO] == 10  # ... but moved the cursor


# ---- the session summary and recall reach the request ----


def test_session_summary_and_recalled_memory_in_the_system_prompt(rig_factory: Any) -> None:
    rig = rig_factory(memory={"inject": "relevant"})
    rig.turn(q(1))
    assert rig.session is not None
    rig.store.set_summary(rig.session.id, "A session about the Redis migration.")
    keeper = keeper_of(rig.engine)
    assert keeper is not None
    keeper.memory.add("Production Redis runs version 7.2 on port 6380", "user")
    keeper.memory.add("The user likes green tea", "user")
    rig.turn("which redis port do we use?")
    system = rig.chat_bodies()[-1]["messages"][0]["content"]
    assert "\n\n## Current Session Context\nA session about the Redis migration." in system
    assert "Redis runs version 7.2 on port 6380" in system
    assert "green tea" not in system
    assert system.index("## Current Session Context") < system.index("## Long-term Memory")


def test_recall_modes_and_budget(tmp_path: Path) -> None:
    from countbot_cli.memory_store import MemoryStore

    cb = make_cb(tmp_path, "http://127.0.0.1:9/v1")
    settings = load_settings(config_path=cb.config_file, env=cb.env, cwd=cb.work)
    memory = MemoryStore(tmp_path / "MEMORY.md")
    for i in range(40):
        memory.add(f"note {i} about deployment number {i} " + "word " * 30, "user")
    memory.add("用户偏好使用 PostgreSQL 数据库", "user")
    memory.add("The user likes green tea", "user")

    def keeper(mode: str) -> MemoryKeeper:
        s = replace(settings, memory=replace(settings.memory, inject=mode))
        return MemoryKeeper(s, _NoProvider(), None, memory)  # type: ignore[arg-type]

    relevant = keeper("relevant")
    got = relevant.recall("how did deployment go?")
    assert len(got) == 5  # at most 5 entries ...
    assert sum(relevant.counter.count_text(g) for g in got) <= 300  # ... within 300 tokens
    assert all("deployment" in g for g in got)
    assert got[0].startswith(date.today().isoformat() + ": note 39 ")  # newest first on ties
    today = date.today().isoformat()
    assert relevant.recall("数据库用什么") == [f"{today}: 用户偏好使用 PostgreSQL 数据库"]
    assert relevant.recall("the and of") == []
    assert relevant.recall("what do we use?") == []  # "use" is not "user"
    assert relevant.recall("") == []
    recent = keeper("recent").recall("anything")
    assert recent[-1] == f"{today}: The user likes green tea"  # chronological, newest last
    assert 1 <= len(recent) <= 5
    assert keeper("off").recall("deployment") == []


class _NoProvider:
    name = "none"
    model = "gpt-4o"

    def complete(self, req: Any) -> Any:
        raise AssertionError("no summary call expected")


def test_token_breakdown(rig_factory: Any) -> None:
    rig = rig_factory(
        persona={"max_history_messages": 4},
        provider={"context_window": 10_000},
        memory={"overflow_summary": False},
    )
    for k in range(1, 5):
        rig.turn(q(k))
    assert rig.session is not None
    rig.store.set_summary(rig.session.id, "Summary text of the session.")
    keeper = keeper_of(rig.engine)
    assert keeper is not None
    b = keeper.token_breakdown(rig.engine, rig.store.load(rig.session.id))
    assert b["window"] == 10_000
    assert b["summary"] > 0 and b["system"] > 100 and b["history"] > 0
    assert b["messages"] == 4 and b["omitted"] == 4
    assert b["total"] == b["system"] + b["summary"] + b["memory"] + b["history"] + b["tools"] + 3
    assert b["percent"] == round(100 * b["total"] / 10_000, 1)


# ---- the formatter ----


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


# ---- through the installed command ----


def test_countbot_ask_runs_overflow_and_injects_the_session_summary(tmp_path: Path) -> None:
    summariser = Summariser()
    with fs.FakeServer(responder=summariser) as server:
        cb = make_cb(
            tmp_path,
            server.base_url,
            persona={"max_history_messages": 2},
            memory={"auto_memory": False},
        )
        proc = cb.run("ask", q(1))
        assert proc.returncode == 0, proc.stderr
        sid = cb.only_session()["id"]
        proc = cb.run("sessions", "summary", sid, "Planning the Redis migration.")
        assert proc.returncode == 0, proc.stderr
        for k in (2, 3):
            proc = cb.run("ask", "-s", sid[:8], q(k))
            assert proc.returncode == 0, proc.stderr
            assert proc.stdout == a(k) + "\n"
        chats = [b for b in server.chat_bodies() if b["messages"][0]["role"] == "system"]
    assert chats[0]["messages"][0]["content"].count("## Current Session Context") == 0
    for body in chats[1:]:
        assert body["messages"][0]["content"].endswith(
            "\n\n## Current Session Context\nPlanning the Redis migration."
        )
    assert [m["content"] for m in chats[2]["messages"][1:]] == [q(2), a(2), q(3)]
    assert len(summariser.calls) == 1  # after turn 3: 4 messages outside the window
    assert dialogue_lines(summariser.calls[0][1]) == [
        "USER: question 1",
        "ASSISTANT: answer 1",
        "USER: question 2",
        "ASSISTANT: answer 2",
    ]
    entries = [ln for ln in cb.memory_file.read_text("utf-8").splitlines() if ln[:1].isdigit()]
    assert len(entries) == 1 and ENTRY_RE.match(entries[0])
    saved = cb.only_session()
    assert [m["content"] for m in saved["archived"]] == [q(1), a(1), q(2), a(2)]
    assert [m["content"] for m in saved["messages"]] == [q(3), a(3)]


class _RacingProvider:
    """A summariser during whose call another process (a second keeper) summarises first."""

    name = "race"
    model = "test-model"

    def __init__(self) -> None:
        self.other: MemoryKeeper | None = None
        self.calls = 0

    def complete(self, req: Any) -> Any:
        from countbot_cli.models import Finished

        self.calls += 1
        other, self.other = self.other, None
        if other is not None:
            assert other.overflow(SESSION_ID) == [
                f"{date.today().isoformat()}|auto-overflow|second"
            ]
            return Finished(content="first", tool_calls=[], finish_reason="stop")
        return Finished(content="second", tool_calls=[], finish_reason="stop")


SESSION_ID = "racing000001"


def test_two_keepers_racing_summarise_each_message_once(tmp_path: Path) -> None:
    from countbot_cli.memory_store import MemoryStore

    cb = make_cb(tmp_path, "http://127.0.0.1:9/v1", persona={"max_history_messages": 2})
    settings = load_settings(config_path=cb.config_file, env=cb.env, cwd=cb.work)
    store = SessionStore(cb.sessions_dir)
    session = new_session(provider="test", model="test-model")
    session.id = SESSION_ID
    session.messages = [
        Message(role=r, content=t)  # type: ignore[arg-type]
        for r, t in messages_of(range(1, 5))
    ]
    store.create(session)
    racing = _RacingProvider()
    first = MemoryKeeper(settings, racing, store, MemoryStore(cb.memory_file))  # type: ignore[arg-type]
    second = MemoryKeeper(
        settings, racing, SessionStore(cb.sessions_dir), MemoryStore(cb.memory_file)
    )  # type: ignore[arg-type]
    racing.other = second
    assert first.overflow(SESSION_ID) == []  # the other process archived the batch first
    assert racing.calls == 2
    saved = store.load(SESSION_ID)
    assert [m.content for m in saved.archived] == [q(1), a(1), q(2), a(2), q(3), a(3)]
    assert [m.content for m in saved.messages] == [q(4), a(4)]
    entries = [ln for ln in cb.memory_file.read_text("utf-8").splitlines() if ln[:1].isdigit()]
    assert [e.split("|", 2)[2] for e in entries] == ["second"]
