"""`ask --schema` against the loopback server: the schema as the request's
response_format where the provider takes it, as an instruction otherwise; a conforming answer
parsed and printed; a non-conforming one sent back once, then exit 7 with the error."""

from __future__ import annotations

import json
from pathlib import Path

import fakeserver as fs
import pytest
from cbenv import make_cb

SCHEMA = {
    "type": "object",
    "properties": {"name": {"type": "string"}, "age": {"type": "integer", "minimum": 0}},
    "required": ["name", "age"],
    "additionalProperties": False,
}


def test_the_schema_is_the_request_field_and_a_valid_answer_is_printed(
    tmp_path: Path, server: fs.FakeServer
) -> None:
    cb = make_cb(tmp_path, server.base_url, provider={"preset": "vllm"})
    (cb.work / "person.json").write_text(json.dumps(SCHEMA), encoding="utf-8")
    server.add(fs.text('{"name": "Ada", "age": 36}'))
    proc = cb.invoke("ask", "--schema", "person.json", "who wrote the first program?")
    assert proc.returncode == 0, proc.stderr
    assert json.loads(proc.stdout) == {"name": "Ada", "age": 36}
    body = server.chat_bodies()[-1]
    assert body["response_format"] == {
        "type": "json_schema",
        "json_schema": {"name": "answer", "schema": SCHEMA},
    }
    assert "conforms to this JSON schema" not in body["messages"][0]["content"]
    server.add(fs.text('```json\n{"name": "Ada", "age": 36}\n```'))  # a fence is tolerated
    data = json.loads(cb.invoke("ask", "--json", "--schema", json.dumps(SCHEMA), "again").stdout)
    assert data["parsed"] == {"name": "Ada", "age": 36}
    assert (data["status"], data["exit_code"]) == ("ok", 0)
    server.add(fs.text('{"name": "Ada", "age": 36}'))
    events = cb.invoke("--schema", "person.json", "--jsonl", "and now?").stdout.splitlines()
    end = json.loads(events[-1])  # the bare prompt takes --schema FILE too
    assert (end["type"], end["parsed"], end["status"]) == ("end", {"name": "Ada", "age": 36}, "ok")


def test_without_the_field_the_schema_is_an_instruction(
    tmp_path: Path, server: fs.FakeServer
) -> None:
    cb = make_cb(tmp_path, server.base_url)
    server.add(fs.text('{"name": "Ada", "age": 36}'))
    proc = cb.invoke("ask", "--schema", json.dumps(SCHEMA), "who?")
    assert proc.returncode == 0, proc.stderr
    body = server.chat_bodies()[-1]
    assert "response_format" not in body
    system = body["messages"][0]["content"]
    assert "conforms to this JSON schema" in system and '"required": ["name", "age"]' in system


@pytest.mark.parametrize("preset", ["deepseek", "llamacpp"])
def test_a_preset_without_structured_output_gets_the_schema_as_an_instruction(
    tmp_path: Path, server: fs.FakeServer, preset: str
) -> None:
    cb = make_cb(tmp_path, server.base_url, provider={"preset": preset})
    server.add(fs.text('{"name": "Ada", "age": 36}'))
    proc = cb.invoke("ask", "--schema", json.dumps(SCHEMA), "who?")
    assert proc.returncode == 0, proc.stderr
    assert json.loads(proc.stdout) == {"name": "Ada", "age": 36}
    body = server.chat_bodies()[-1]
    assert "response_format" not in body
    assert "conforms to this JSON schema" in body["messages"][0]["content"]


def test_an_invalid_answer_is_repaired_once(tmp_path: Path, server: fs.FakeServer) -> None:
    cb = make_cb(tmp_path, server.base_url)
    server.add(fs.text('{"name": "Ada"}'), fs.text('{"name": "Ada", "age": 36}'))
    proc = cb.invoke("ask", "--schema", json.dumps(SCHEMA), "who?")
    assert proc.returncode == 0, proc.stderr
    assert json.loads(proc.stdout) == {"name": "Ada", "age": 36}
    bodies = server.chat_bodies()
    assert len(bodies) == 2
    repair = bodies[1]["messages"][-1]["content"]
    assert "property 'age' is required" in repair and '{"name": "Ada"}' in repair


def test_json_usage_counts_the_repair_request_too(tmp_path: Path, server: fs.FakeServer) -> None:
    cb = make_cb(tmp_path, server.base_url)
    first = {"prompt_tokens": 100, "completion_tokens": 10, "total_tokens": 110}
    second = {"prompt_tokens": 160, "completion_tokens": 12, "total_tokens": 172}
    server.add(
        fs.text('{"name": "Ada"}', usage=first), fs.text('{"name": "Ada", "age": 36}', usage=second)
    )
    proc = cb.invoke("ask", "--json", "--schema", json.dumps(SCHEMA), "who?")
    assert proc.returncode == 0, proc.stderr
    data = json.loads(proc.stdout)
    assert data["parsed"] == {"name": "Ada", "age": 36}
    usage = data["usage"]
    assert (usage["prompt_tokens"], usage["completion_tokens"]) == (260, 22)
    assert usage["total_tokens"] == 282


def test_still_invalid_after_the_repair_exits_7_with_the_error(
    tmp_path: Path, server: fs.FakeServer
) -> None:
    cb = make_cb(tmp_path, server.base_url)
    server.add(fs.text("Ada Lovelace, 36"), fs.text('{"name": "Ada", "age": -1, "x": 1}'))
    proc = cb.invoke("ask", "--json", "--schema", json.dumps(SCHEMA), "who?")
    assert proc.returncode == 7
    assert len(server.chat_bodies()) == 2  # one repair attempt, no more
    data = json.loads(proc.stdout)
    assert (data["status"], data["exit_code"], data["parsed"]) == ("invalid", 7, None)
    message = data["error"]["message"]
    assert "'age' must be >= 0" in message and "unknown property 'x'" in message
    assert "after one repair attempt" in proc.stderr and "'age' must be >= 0" in proc.stderr
    server.add(fs.text("no"), fs.text("still no"))
    plain = cb.invoke("ask", "--schema", json.dumps(SCHEMA), "who?")
    assert plain.returncode == 7 and plain.stdout == ""  # nothing half-valid on stdout
    assert "the answer is not JSON" in plain.stderr


def test_a_bad_schema_is_a_usage_error_before_any_request(
    tmp_path: Path, server: fs.FakeServer
) -> None:
    cb = make_cb(tmp_path, server.base_url)
    for arg, said in (
        ("nope.json", "no such file"),
        ("{not json", "not valid JSON"),
        ("[1]", "no such file"),
    ):
        proc = cb.invoke("ask", "--schema", arg, "who?")
        assert proc.returncode == 2 and said in proc.stderr, (arg, proc.stderr)
    (cb.work / "list.json").write_text("[1, 2]", encoding="utf-8")
    proc = cb.invoke("ask", "--schema", "list.json", "who?")
    assert proc.returncode == 2 and "is a JSON object" in proc.stderr
    proc = cb.invoke("ask", "-x", "--schema", "list.json", "who?")
    assert proc.returncode == 2 and "-x" in proc.stderr
    assert server.requests == []
