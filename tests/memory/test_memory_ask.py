"""Memory upkeep as a user meets it through `countbot ask`: overflow and the session summary
across processes, Ctrl-C during upkeep, and two processes summarising the same session."""

from __future__ import annotations

import signal
from datetime import date
from pathlib import Path
from typing import Any

import fakeserver as fs
from cbenv import make_cb
from memory_rig import ENTRY_RE, Summariser, a, dialogue_lines, messages_of, q
from waits import wait_until

from countbot_cli.config.settings import load_settings
from countbot_cli.conversation.sessions.session import new_session
from countbot_cli.conversation.sessions.store import SessionStore
from countbot_cli.memory.keeper import MemoryKeeper
from countbot_cli.messages import Message


def test_countbot_ask_runs_overflow_and_injects_the_session_summary(tmp_path: Path) -> None:
    summariser = Summariser()
    with fs.FakeServer(responder=summariser) as server:
        cb = make_cb(
            tmp_path,
            server.base_url,
            persona={"max_history_messages": 2},
            memory={"auto_memory": False},
        )
        proc = cb.invoke("ask", q(1))
        assert proc.returncode == 0, proc.stderr
        sid = cb.only_session()["id"]
        proc = cb.invoke("sessions", "summary", sid, "Planning the Redis migration.")
        assert proc.returncode == 0, proc.stderr
        for k in (2, 3):
            proc = cb.invoke("ask", "-s", sid[:8], q(k))
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
    context_window = None

    def __init__(self) -> None:
        self.other: MemoryKeeper | None = None
        self.calls = 0

    def stream(self, req: Any) -> Any:
        from countbot_cli.messages import Finished

        self.calls += 1
        other, self.other = self.other, None
        if other is not None:
            assert other.overflow(SESSION_ID) == [
                f"{date.today().isoformat()}|auto-overflow|second"
            ]
            return iter([Finished(content="first", tool_calls=[], finish_reason="stop")])
        return iter([Finished(content="second", tool_calls=[], finish_reason="stop")])


SESSION_ID = "racing000001"


def test_two_keepers_racing_summarise_each_message_once(tmp_path: Path) -> None:
    from countbot_cli.memory.store import MemoryStore

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
    racing: Any = _RacingProvider()
    first = MemoryKeeper(settings, racing, store, MemoryStore(cb.memory_file))
    second = MemoryKeeper(
        settings, racing, SessionStore(cb.sessions_dir), MemoryStore(cb.memory_file)
    )
    racing.other = second
    assert first.overflow(SESSION_ID) == []  # the other process archived the batch first
    assert racing.calls == 2
    saved = store.load(SESSION_ID)
    assert [m.content for m in saved.archived] == [q(1), a(1), q(2), a(2), q(3), a(3)]
    assert [m.content for m in saved.messages] == [q(4), a(4)]
    entries = [ln for ln in cb.memory_file.read_text("utf-8").splitlines() if ln[:1].isdigit()]
    assert [e.split("|", 2)[2] for e in entries] == ["second"]


def test_ctrl_c_during_upkeep_after_ask(tmp_path: Path) -> None:
    summariser = Summariser()
    with fs.FakeServer(responder=summariser) as server:
        cb = make_cb(tmp_path, server.base_url, persona={"max_history_messages": 2})
        for k in (1, 2):
            assert cb.invoke("ask", "-c", q(k)).returncode == 0
        summariser.replies = [fs.hang(60, send_headers=False)]
        proc = cb.popen("ask", "-c", q(3))
        wait_until(lambda: summariser.calls, "the summary call")  # it hangs: countbot waits
        proc.send_signal(signal.SIGINT)
        out, err = proc.communicate(timeout=10)
    assert proc.returncode == 0, err
    assert out == a(3) + "\n"
    assert "memory upkeep interrupted" in err
    saved = cb.only_session()
    assert saved["archived"] == []
    assert [m["content"] for m in saved["messages"]] == [c for _, c in messages_of(range(1, 4))]
