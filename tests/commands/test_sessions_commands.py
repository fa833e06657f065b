from __future__ import annotations

import io
import json
from datetime import datetime, timedelta, timezone
from pathlib import Path
from typing import Any

import pytest
from rich.console import Console

from countbot_cli.commands.sessions import (
    sessions_delete,
    sessions_export,
    sessions_list,
    sessions_rename,
    sessions_show,
    sessions_summary,
)
from countbot_cli.conversation.sessions.session import Session, new_session
from countbot_cli.conversation.sessions.store import SessionStore
from countbot_cli.errors import StorageError, UsageError
from countbot_cli.messages import STATUS_FAILED, STATUS_INTERRUPTED, Message
from countbot_cli.ui.listing import relative_time

EVIL = "\x1b]0;pwned\x07\x1b[2J[red]not markup[/red] **bold**"


@pytest.fixture
def store(tmp_path: Path) -> SessionStore:
    return SessionStore(tmp_path / "sessions")


def make(
    store: SessionStore, title: str, sid: str, messages: list[Message] | None = None, **kw: Any
) -> Session:
    s = new_session(provider="openai", model="gpt-4o-mini", title=title)
    s.id = sid
    s.messages = messages if messages is not None else [Message(role="user", content="hi")]
    for k, v in kw.items():
        setattr(s, k, v)
    store.create(s)
    return s


def rich_session(store: SessionStore) -> Session:
    question = Message(role="user", content="read a.txt please")
    failed = Message(role="user", content="this one failed", status=STATUS_FAILED)
    answer = Message(role="assistant", content="# Heading\n\nIt says " + EVIL)
    cut = Message(role="assistant", content="partial answ", status=STATUS_INTERRUPTED)
    records = [
        {
            "tool": "read_file",
            "arguments": {"path": "a.txt"},
            "result": "text",
            "error": None,
            "duration_ms": 12.4,
            "approval": "auto",
            "timestamp": "2026-11-29T19:30:00Z",
            "message_id": answer.id,
        },
        {
            "tool": "exec",
            "arguments": '{"command": "rm -rf /"}',
            "error": "denied by user",
            "approval": "denied",
            "message_id": None,
        },
    ]
    return make(
        store,
        "Reading files",
        "abc123def456",
        [question, answer, failed, cut],
        archived=[Message(role="user", content="ancient history")],
        summary="User likes short answers",
        tool_conversations=records,
    )


def run(fn: Any, *args: Any, **kw: Any) -> tuple[int, str]:
    out = io.StringIO()
    code = fn(*args, out=out, **kw)
    return code, out.getvalue()


# ---- list ----


def test_list_plain_newest_first_with_short_ids(store: SessionStore) -> None:
    make(store, "Older one", "abcdef0100000001")
    make(store, "Newer " + EVIL, "abcdef0200000002", [Message("user", "a"), Message("user", "b")])
    store.update("abcdef0200000002", lambda s: None)
    now = datetime.now(timezone.utc) + timedelta(minutes=3, seconds=5)
    code, text = run(sessions_list, store, now=now)
    lines = text.splitlines()
    assert code == 0
    assert lines[0].split() == ["ID", "TITLE", "MSGS", "UPDATED", "MODEL"]
    assert lines[1].startswith("abcdef02  Newer") and "3 min ago" in lines[1]
    assert lines[2].startswith("abcdef01  Older one")
    assert " 2 " in lines[1] and "gpt-4o-mini" in lines[1]
    assert "\x1b" not in text and "\x07" not in text
    assert len({len(line) for line in lines[1:]}) == 1  # columns line up


def test_list_json_has_full_ids_and_iso_times(store: SessionStore) -> None:
    make(store, "One", "abc000000001")
    make(store, "Two", "abc000000002")
    code, text = run(sessions_list, store, json_out=True, limit=1)
    data = json.loads(text)
    assert code == 0 and len(data) == 1
    assert data[0]["id"] in ("abc000000001", "abc000000002")
    assert data[0]["updated_at"].endswith("Z") and data[0]["message_count"] == 1


def test_list_empty_and_bad_limit(store: SessionStore) -> None:
    assert run(sessions_list, store) == (0, "No saved sessions yet.\n")
    assert run(sessions_list, store, json_out=True) == (0, "[]\n")
    with pytest.raises(UsageError):
        run(sessions_list, store, limit=0)


def test_list_wide_titles_are_cut_by_columns(store: SessionStore) -> None:
    make(store, "中" * 40, "abc000000001")
    _, text = run(sessions_list, store)
    row = text.splitlines()[1]
    assert "…" in row and "中" * 23 in row and "中" * 24 not in row


@pytest.mark.parametrize(
    ("delta", "text"),
    [
        (timedelta(seconds=5), "just now"),
        (timedelta(minutes=59), "59 min ago"),
        (timedelta(hours=5), "5 h ago"),
        (timedelta(days=1, hours=2), "1 day ago"),
        (timedelta(days=3), "3 days ago"),
        (timedelta(days=30), "2026-10-30"),
    ],
)
def test_relative_time(delta: timedelta, text: str) -> None:
    now = datetime(2026, 11, 29, 12, 0, tzinfo=timezone.utc)
    then = (now - delta).strftime("%Y-%m-%dT%H:%M:%SZ")
    assert relative_time(then, now) == text


def test_relative_time_of_garbage_is_shown_safely() -> None:
    assert relative_time("yesterday\x1b[2J", datetime.now(timezone.utc)) == "yesterday"


# ---- show ----


def test_show_plain_transcript(store: SessionStore) -> None:
    rich_session(store)
    code, text = run(sessions_show, store, "abc")
    assert code == 0
    assert text.startswith("Reading files\nid abc123def456 · openai/gpt-4o-mini · 5 messages")
    assert "Summary: User likes short answers" in text
    assert text.index("ancient history") < text.index("Current history:")
    store.update("abc123def456", lambda s: setattr(s, "summary", ""))
    store.update("abc123def456", lambda s: setattr(s, "rolling_summary", "Reading two files."))
    assert "Recap: Reading two files." in run(sessions_show, store, "abc")[1]  # else the rolling
    assert text.index("── You ·") < text.index("read a.txt please")
    assert "You · failed (not sent again; /retry re-runs it)" in text
    assert "Assistant · interrupted" in text
    assert '⚙ read_file {"path": "a.txt"} · ok · 12 ms · auto' in text
    assert text.index("⚙ read_file") < text.index("It says")  # under its answer
    assert "Tool calls not attached to a saved answer:" in text
    assert "⚙ exec" in text and "denied" in text
    assert "[red]not markup[/red] **bold**" in text  # raw text, no rendering
    assert "\x1b" not in text and "\x07" not in text


def test_show_on_a_terminal_renders_markdown_and_no_markup(store: SessionStore) -> None:
    rich_session(store)
    out = io.StringIO()

    def console(stream: Any) -> Console:
        return Console(file=stream, width=100, color_system=None, force_terminal=False)

    assert sessions_show(store, "abc", out, console_factory=console) == 0
    text = out.getvalue()
    assert "Heading" in text and "# Heading" not in text  # markdown rendered
    assert "**bold**" not in text and "bold" in text
    assert "[red]not markup[/red]" in text  # rich markup printed literally
    assert "pwned" not in text and "\x1b" not in text and "\x07" not in text


def test_show_tty_uses_colours_but_never_the_models_sequences(store: SessionStore) -> None:
    rich_session(store)
    out = io.StringIO()
    sessions_show(store, "abc", out, tty=True)
    text = out.getvalue()
    assert "\x1b[" in text  # rich's own styling
    assert "\x1b]0;" not in text and "\x1b[2J" not in text and "pwned" not in text


def test_show_json_is_the_session(store: SessionStore) -> None:
    s = rich_session(store)
    store.update(s.id, lambda x: x.messages.append(Message("assistant", "c1 \x9b31m end")))
    code, text = run(sessions_show, store, "latest", json_out=True)
    assert code == 0 and "\x9b" not in text and "\\u009b" in text
    assert json.loads(text) == store.load(s.id).to_dict()


def test_show_unknown_and_ambiguous(store: SessionStore) -> None:
    make(store, "a", "abc000000001")
    make(store, "b", "abc000000002")
    with pytest.raises(UsageError, match="matches 2 sessions"):
        run(sessions_show, store, "abc")
    with pytest.raises(UsageError, match="no session matches"):
        run(sessions_show, store, "zzz")


# ---- delete ----


def test_delete_asks_once_and_respects_no(store: SessionStore) -> None:
    make(store, "First", "abc000000001")
    make(store, "Second", "def000000002")
    questions: list[str] = []

    def no(q: str) -> bool:
        questions.append(q)
        return False

    code, text = run(sessions_delete, store, ["abc", "def", "abc000000001"], yes=False, confirm=no)
    assert code == 0 and text == "Nothing deleted.\n"
    assert len(questions) == 1 and "Delete 2 sessions?" in questions[0]
    assert "abc000000001 “First” (1 message)" in questions[0]  # not "1 messages"
    assert len(store.list()) == 2

    code, text = run(sessions_delete, store, ["abc"], yes=False, confirm=lambda q: True)
    assert code == 0 and text.startswith("Deleted abc000000001")
    assert [h["id"] for h in store.list()] == ["def000000002"]


def test_delete_with_yes_never_asks(store: SessionStore) -> None:
    make(store, "First", "abc000000001")

    def never(q: str) -> bool:
        raise AssertionError("asked")

    assert run(sessions_delete, store, ["abc"], yes=True, confirm=never)[0] == 0
    assert store.list() == []


def test_delete_checks_every_ref_before_deleting(store: SessionStore) -> None:
    make(store, "First", "abc000000001")
    with pytest.raises(UsageError, match="zzz"):
        run(sessions_delete, store, ["abc", "zzz"], yes=True, confirm=lambda q: True)
    assert len(store.list()) == 1
    with pytest.raises(UsageError):
        run(sessions_delete, store, [], yes=True, confirm=lambda q: True)


# ---- rename, summary ----


def test_rename(store: SessionStore) -> None:
    make(store, "Old", "abc000000001")
    code, text = run(sessions_rename, store, "abc", "New name")
    assert code == 0 and "New name" in text
    assert store.load("abc000000001").title == "New name"
    with pytest.raises(UsageError):
        run(sessions_rename, store, "abc", "   ")


def test_summary_show_set_clear(store: SessionStore) -> None:
    make(store, "S", "abc000000001")
    assert "has no summary" in run(sessions_summary, store, "abc")[1]
    assert run(sessions_summary, store, "abc", "Likes tea " + EVIL)[0] == 0
    code, text = run(sessions_summary, store, "abc")
    assert code == 0 and text.startswith("Likes tea") and "\x1b" not in text
    run(sessions_summary, store, "abc", clear=True)
    assert store.load("abc000000001").summary == ""
    store.update("abc000000001", lambda s: setattr(s, "rolling_summary", "About tea."))
    assert run(sessions_summary, store, "abc")[1] == "(rolling) About tea.\n"
    with pytest.raises(UsageError, match="not both"):
        run(sessions_summary, store, "abc", "x", clear=True)
    with pytest.raises(UsageError, match="empty"):
        run(sessions_summary, store, "abc", "  ")


# ---- export ----


def test_export_markdown(store: SessionStore, tmp_path: Path) -> None:
    rich_session(store)
    target = tmp_path / "out.md"
    code, text = run(sessions_export, store, "abc", "md", target)
    assert code == 0 and str(target) in text
    md = target.read_text(encoding="utf-8")
    assert md.startswith("# Reading files\n")
    assert "> **Summary:** User likes short answers" in md
    headings = [line for line in md.splitlines() if line.startswith("## ")]
    assert headings == [
        "## You",
        "## You",
        "## Assistant",
        "## You · failed (not sent again; /retry re-runs it)",
        "## Assistant · interrupted",
    ]
    assert "- ⚙ read_file" in md and "ancient history" in md
    assert "\x1b" not in md and "[red]not markup[/red]" in md


def test_export_json_to_stdout_and_file(store: SessionStore, tmp_path: Path) -> None:
    s = rich_session(store)
    code, text = run(sessions_export, store, "abc", "json")
    assert code == 0 and json.loads(text) == s.to_dict()
    target = tmp_path / "s.json"
    run(sessions_export, store, "abc", "json", target)
    assert json.loads(target.read_text(encoding="utf-8")) == s.to_dict()


def test_export_errors(store: SessionStore, tmp_path: Path) -> None:
    rich_session(store)
    with pytest.raises(UsageError, match="format"):
        run(sessions_export, store, "abc", "html")
    with pytest.raises(UsageError, match="cannot write"):
        run(sessions_export, store, "abc", "md", tmp_path / "missing" / "x.md")
    with pytest.raises(UsageError, match="cannot write"):
        run(sessions_export, store, "abc", "md", tmp_path)  # a folder


def test_export_write_failure_is_a_storage_error(
    store: SessionStore, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    rich_session(store)

    def full(*args: Any, **kw: Any) -> Any:
        raise OSError(28, "No space left on device")

    monkeypatch.setattr("builtins.open", full)
    with pytest.raises(StorageError, match="No space left"):
        run(sessions_export, store, "abc", "md", tmp_path / "x.md")


def test_tool_line_reports_each_outcome() -> None:
    from countbot_cli.ui.transcript import tool_line

    base = {"tool": "exec", "arguments": {"command": "sleep 9"}, "duration_ms": 0}
    stopped = tool_line(
        {**base, "outcome": "interrupted", "approval": "user", "error": "interrupted"}
    )
    assert "interrupted" in stopped and " ok " not in stopped
    assert "timed out" in tool_line({**base, "outcome": "timeout", "approval": "user"})
    rule = tool_line(
        {
            **base,
            "outcome": "denied",
            "approval": "deny-rule",
            "error": "Error: denied by rule 'sleep *'",
        }
    )
    assert "denied (Error: denied by rule 'sleep *')" in rule
    assert tool_line({**base, "outcome": "ok", "approval": "user"}).split(" · ")[1] == "ok"
