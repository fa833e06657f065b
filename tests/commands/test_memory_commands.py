"""`countbot memory show|search|add|delete` output, on an injected stream."""

from __future__ import annotations

import io
import json
from pathlib import Path

import pytest

from countbot_cli.commands.memory import (
    memory_add,
    memory_delete,
    memory_mark,
    memory_search,
    memory_show,
)
from countbot_cli.commands.memory_trace import memory_show_json, memory_why
from countbot_cli.conversation.sessions.store import SessionStore
from countbot_cli.errors import UsageError
from countbot_cli.memory.store import DEFAULT_HEADER, MemoryStore

FIRST = 1  # entries are numbered 1..N whatever the header (DEFAULT_HEADER) holds


@pytest.fixture
def store(tmp_path: Path) -> MemoryStore:
    return MemoryStore(tmp_path / "MEMORY.md")


def run(fn: object, *args: object, **kwargs: object) -> str:
    out = io.StringIO()
    assert fn(*args, out, **kwargs) == 0  # type: ignore[operator]
    return out.getvalue()


def test_show_empty_store(store: MemoryStore) -> None:
    assert run(memory_show, store) == f"No memories yet ({store.path}).\n"


def test_show_lists_entry_numbers_aligned_and_tail(store: MemoryStore) -> None:
    store.add("prefers dark mode", date="2024-01-01")
    store.add("用户喜欢喝咖啡；住在上海", source="auto-memory", date="2024-01-02")
    text = run(memory_show, store)
    assert text == (
        f"{store.path}: 2 entries\n"
        f"{FIRST}  2024-01-01  user         prefers dark mode\n"
        f"{FIRST + 1}  2024-01-02  auto-memory  用户喜欢喝咖啡；住在上海\n"
    )
    tail = run(memory_show, store, tail=1)
    assert tail == (
        f"{store.path}: last 1 of 2 entries\n"
        f"{FIRST + 1}  2024-01-02  auto-memory  用户喜欢喝咖啡；住在上海\n"
    )
    assert run(memory_show, store, tail=5) == text
    store.delete_entries([FIRST])
    assert run(memory_show, store).startswith(f"{store.path}: 1 entry\n")
    with pytest.raises(UsageError, match="--tail"):
        run(memory_show, store, tail=0)


def test_show_right_aligns_mixed_width_line_numbers(tmp_path: Path) -> None:
    path = tmp_path / "MEMORY.md"
    path.write_text("".join(f"2024-01-01|user|e{i}\n" for i in range(1, 11)), encoding="utf-8")
    rows = run(memory_show, MemoryStore(path)).splitlines()[1:]
    assert rows[0] == " 1  2024-01-01  user  e1"
    assert rows[9] == "10  2024-01-01  user  e10"


def test_show_sanitises_hand_edited_content_and_notes_unparsed_lines(tmp_path: Path) -> None:
    path = tmp_path / "MEMORY.md"
    path.write_text(
        "# h\n2024-01-01|user|evil \x1b]0;title\x07\x1b[2Jtext\tand tab\nnot an entry\n",
        encoding="utf-8",
    )
    text = run(memory_show, MemoryStore(path))
    assert "\x1b" not in text and "\x07" not in text and "\t" not in text
    assert "1  2024-01-01  user  evil text and tab\n" in text
    assert "Note: 1 line(s) could not be read" in text and text.rstrip().endswith(": 3")


def test_search_output_no_match_and_more_than_limit(store: MemoryStore) -> None:
    for i in range(4):
        store.add(f"redis fact {i}", date=f"2024-01-0{i + 1}")
    store.add("上海的 postgres", date="2024-02-01")
    assert run(memory_search, store, ["Redis"], limit=2) == (
        f"{FIRST + 3}  2024-01-04  user  redis fact 3\n"
        f"{FIRST + 2}  2024-01-03  user  redis fact 2\n"
        "(2 of 4 matches shown; -n 4 shows them all)\n"
    )
    assert run(memory_search, store, ["上海", "postgres"]) == (
        f"{FIRST + 4}  2024-02-01  user  上海的 postgres\n"
    )
    assert run(memory_search, store, ["nothing\x1b[31m"]) == "No memory entry matches: nothing\n"
    with pytest.raises(UsageError):
        run(memory_search, store, ["x"], limit=0)
    with pytest.raises(UsageError):
        run(memory_search, store, ["  "])


def test_add_reports_line_and_duplicates_without_error(store: MemoryStore) -> None:
    text = run(memory_add, store, "likes\n tea")
    assert text.startswith(f"Added to {store.path} as entry {FIRST}:\n{FIRST}  ")
    assert text.endswith("  user  likes tea\n")
    assert run(memory_add, store, "likes tea ") == f"Already stored (entry {FIRST}): likes tea\n"
    assert [e.content for e in store.entries()] == ["likes tea"]
    with pytest.raises(UsageError, match="empty"):
        run(memory_add, store, " \n ")


def test_delete_echoes_removed_entries_and_refuses_unknown_numbers(store: MemoryStore) -> None:
    for word in ("one", "two", "three"):
        store.add(word, date="2024-01-01")
    text = run(memory_delete, store, [FIRST + 1, FIRST + 1])
    assert text == (
        f"Deleted entry {FIRST + 1}: 2024-01-01|user|two\n"
        "The entries after it are renumbered: see `countbot memory show`.\n"
    )
    assert (
        run(memory_delete, store, [FIRST + 1])
        == f"Deleted entry {FIRST + 1}: 2024-01-01|user|three\n"
    )
    with pytest.raises(UsageError, match="no memory entry 2 .*entries 1-1"):
        run(memory_delete, store, [1, 2])
    with pytest.raises(UsageError, match="no memory entry 0"):
        run(memory_delete, store, [0])
    with pytest.raises(UsageError, match="numbers"):
        run(memory_delete, store, [])
    assert [e.content for e in store.entries()] == ["one"]


def test_numbers_ignore_header_comments_blank_and_unparsed_lines(tmp_path: Path) -> None:
    """Numbers are 1..N in the order `show` lists them: a header, comments, blank lines and a
    damaged line do not shift them, and every command takes the same number."""
    path = tmp_path / "MEMORY.md"
    path.write_text(
        DEFAULT_HEADER
        + "2024-01-01|user|alpha\n\n# a comment between\n\n"
        + "garbage line\n2024-01-02|user|beta\n\n2024-01-03|tool|gamma\n",
        encoding="utf-8",
    )
    store = MemoryStore(path)
    shown = run(memory_show, store).splitlines()[1:4]
    assert [row.split("  ")[0] for row in shown] == ["1", "2", "3"]
    assert shown[1].endswith("user  beta")
    marked = run(memory_mark, store, "pin", 2)
    assert (
        marked == "Pinned (sent with every request): entry 2\n2  2024-01-02  user  beta  [pinned]\n"
    )
    run(memory_mark, store, "mute", 3)
    listing = run(memory_show, store)
    assert "2  2024-01-02  user  beta  [pinned]\n" in listing
    assert "3  2024-01-03  tool  gamma  [muted]\n" in listing
    assert "1  2024-01-01  user  alpha\n" in listing
    rows = json.loads(run(memory_show_json, store))
    assert [(r["number"], r["content"], r["pinned"], r["muted"]) for r in rows] == [
        (1, "alpha", False, False),
        (2, "beta", True, False),
        (3, "gamma", False, True),
    ]
    assert run(memory_why, store, SessionStore(tmp_path / "s"), 2).startswith(
        "2: 2024-01-02|user|beta\n"
    )
    assert run(memory_delete, store, [1]).startswith("Deleted entry 1: 2024-01-01|user|alpha\n")
    assert "1  2024-01-02  user  beta  [pinned]\n" in run(memory_show, store)
    assert "garbage line" in path.read_text(encoding="utf-8")  # kept, just not numbered
