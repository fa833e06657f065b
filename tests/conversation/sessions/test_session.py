from __future__ import annotations

import json
import re
from typing import Any

import pytest

from countbot_cli.conversation.sessions.session import (
    SCHEMA_VERSION,
    SchemaVersionError,
    Session,
    header_from_dict,
    new_session,
    plural,
    short_ids,
    title_from,
)
from countbot_cli.messages import STATUS_FAILED, STATUS_INTERRUPTED, Message, ToolCall, Usage


def full_session() -> Session:
    s = new_session(provider="openai", model="gpt-4o-mini", title="Plans")
    s.summary = "The user plans a trip."
    s.system = "Answer in French."
    s.archived = [Message(role="user", content="old question"), Message("assistant", "old answer")]
    s.messages = [
        Message(role="user", content="where to? 你好", status=STATUS_FAILED),
        Message(
            role="assistant",
            content="",
            tool_calls=[ToolCall(id="call_1", name="read_file", arguments='{"path": "a"}')],
        ),
        Message(role="tool", content="file text", tool_call_id="call_1", name="read_file"),
        Message(role="assistant", content="Lisbon", status=STATUS_INTERRUPTED),
    ]
    s.tool_conversations = [
        {
            "tool": "read_file",
            "arguments": {"path": "a", "nested": {"k": [1, 2]}},
            "result": "file text",
            "error": None,
            "duration_ms": 12,
            "approval": "auto",
            "timestamp": "2026-11-29T19:30:00Z",
            "message_id": s.messages[3].id,
        }
    ]
    s.cursors = {"overflow": 2, "auto_memory": 0}
    s.usage = Usage(prompt_tokens=100, completion_tokens=20, total_tokens=120)
    return s


def test_round_trip_through_json_keeps_everything() -> None:
    s = full_session()
    back = Session.from_dict(json.loads(json.dumps(s.to_dict())))
    assert back == s
    assert back.messages[1].tool_calls == s.messages[1].tool_calls
    assert back.messages[0].status == STATUS_FAILED
    assert back.schema_version == SCHEMA_VERSION


def test_from_dict_does_not_share_mutable_state_with_its_input() -> None:
    d = full_session().to_dict()
    s = Session.from_dict(d)
    s.tool_conversations[0]["arguments"]["nested"]["k"].append(3)
    s.cursors["overflow"] = 99
    assert d["tool_conversations"][0]["arguments"]["nested"]["k"] == [1, 2]
    assert d["cursors"]["overflow"] == 2


def test_to_dict_does_not_share_records_with_the_session() -> None:
    s = full_session()
    d = s.to_dict()
    s.tool_conversations[0]["arguments"]["nested"]["k"].append(3)
    assert d["tool_conversations"][0]["arguments"]["nested"]["k"] == [1, 2]


def test_optional_fields_default_when_missing() -> None:
    d = {"id": "abc", "title": "t", "created_at": "x", "updated_at": "y", "provider": "p"}
    s = Session.from_dict(d)
    assert (s.model, s.summary, s.messages, s.archived) == ("", "", [], [])
    assert s.tool_conversations == [] and s.cursors == {} and s.usage == Usage()


def test_system_instructions_are_stored_and_old_files_without_them_load() -> None:
    s = full_session()
    assert s.to_dict()["system"] == "Answer in French."
    assert Session.from_dict(json.loads(json.dumps(s.to_dict()))).system == "Answer in French."
    old = s.to_dict()
    del old["system"]  # a file written before the field existed
    assert Session.from_dict(old).system == ""
    with pytest.raises(ValueError, match="'system' must be a string"):
        Session.from_dict({**s.to_dict(), "system": 3})


def test_plural() -> None:
    assert [plural(n, "message") for n in (0, 1, 2)] == ["0 messages", "1 message", "2 messages"]
    assert plural(1, "entry", "entries") == "1 entry" and plural(1234, "entry", "entries") == (
        "1,234 entries"
    )


@pytest.mark.parametrize(
    ("patch", "needle"),
    [
        ({"id": None}, "id"),
        ({"id": 5}, "id"),
        ({"messages": {"a": 1}}, "messages"),
        ({"messages": ["text"]}, "non-object"),
        ({"messages": [{"role": "wizard", "content": "x"}]}, "role"),
        ({"messages": [{"role": "assistant", "tool_calls": ["x"]}]}, "shape"),
        ({"archived": "x"}, "archived"),
        ({"title": 3}, "title"),
        ({"cursors": [1]}, "cursors"),
        ({"usage": {"prompt_tokens": "many"}}, "usage"),
        ({"tool_conversations": [1]}, "tool_conversations"),
        ({"schema_version": "1"}, "schema_version"),
        ({"schema_version": 0}, "schema_version"),
    ],
)
def test_bad_shapes_raise_value_error(patch: dict[str, Any], needle: str) -> None:
    d = full_session().to_dict()
    d.update(patch)
    with pytest.raises(ValueError, match=needle):
        Session.from_dict(d)


def test_cursors_are_opaque() -> None:
    d = full_session().to_dict()
    d["cursors"] = {"overflow": 3, "future": "abc"}
    assert Session.from_dict(d).cursors == {"overflow": 3, "future": "abc"}


@pytest.mark.parametrize("value", [[], "text", 3, None])
def test_a_non_object_is_rejected(value: Any) -> None:
    with pytest.raises(ValueError):
        Session.from_dict(value)


def test_newer_schema_is_its_own_error() -> None:
    d = full_session().to_dict()
    d["schema_version"] = SCHEMA_VERSION + 1
    with pytest.raises(SchemaVersionError) as info:
        Session.from_dict(d)
    assert info.value.version == SCHEMA_VERSION + 1


def test_header_counts_archived_messages_and_matches_header_from_dict() -> None:
    s = full_session()
    head = s.header()
    assert head == {
        "id": s.id,
        "title": "Plans",
        "created_at": s.created_at,
        "updated_at": s.updated_at,
        "provider": "openai",
        "model": "gpt-4o-mini",
        "message_count": 6,
        "gist": "The user plans a trip.",  # the summary's first sentence
    }
    assert header_from_dict(s.to_dict()) == head
    s.summary = ""
    s.rolling_summary = "Planning a two-week rail trip through Japan in April with the kids; budget 3000 EUR, trains only.\nSecond line."
    assert (
        s.header()["gist"]
        == "Planning a two-week rail trip through Japan in April with the kids; budget 3000…"
    )
    assert header_from_dict(s.to_dict())["gist"] == s.header()["gist"]
    s.rolling_summary = ""
    assert s.header()["gist"] == ""


def test_new_session_ids_are_unique_short_hex_and_times_are_utc() -> None:
    ids = {new_session(provider="p", model="m").id for _ in range(2000)}
    assert len(ids) == 2000
    assert all(re.fullmatch(r"[0-9a-f]{12}", i) for i in ids)
    s = new_session(provider="p", model="m")
    assert re.fullmatch(r"\d{4}-\d\d-\d\dT\d\d:\d\d:\d\dZ", s.created_at)
    assert s.created_at == s.updated_at and s.title == ""


@pytest.mark.parametrize(
    ("text", "title"),
    [
        ("\n\n  Hello   world \nsecond line", "Hello world"),
        ("tab\tseparated", "tab separated"),
        ("", ""),
        ("   \n\t\n", ""),
        ("x" * 60, "x" * 60),
    ],
)
def test_title_from(text: str, title: str) -> None:
    assert title_from(text) == title


def test_title_from_cuts_long_lines_with_an_ellipsis() -> None:
    title = title_from("word " * 40)
    assert len(title) <= 60 and title.endswith("…")
    assert title.startswith("word word")


def test_short_ids_are_unique_prefixes_of_at_least_eight() -> None:
    ids = ["abcdef012345", "abcdef019999", "ffff00001111", "short"]
    shorts = short_ids(ids)
    assert shorts["abcdef012345"] == "abcdef012"
    assert shorts["abcdef019999"] == "abcdef019"
    assert shorts["ffff00001111"] == "ffff0000"
    assert shorts["short"] == "short"
    assert len(set(shorts.values())) == len(ids)
    for sid, short in shorts.items():
        assert sid.startswith(short)
        assert [i for i in ids if i.startswith(short)] == [sid]
