"""`ask --jsonl`: one JSON object a line as the turn happens, each with a documented `type`; the
last line carries the whole answer, the status and the exit code."""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

import fakeserver as fs
from cbenv import make_cb

TYPES = {"text", "reasoning", "notice", "tool_call", "tool_result", "usage", "error", "end"}


def lines(stdout: str) -> list[dict[str, Any]]:
    assert stdout.endswith("\n")
    out = [json.loads(line) for line in stdout.splitlines()]  # every line valid JSON
    assert all(isinstance(o, dict) and o.get("type") in TYPES for o in out), out
    return out


def test_jsonl_tool_round_text_and_end(tmp_path: Path, server: fs.FakeServer) -> None:
    cb = make_cb(tmp_path, server.base_url, tools={"enabled": True})
    (cb.work / "a.txt").write_text("alpha\n", encoding="utf-8")
    server.add(
        fs.tool_calls(
            [("read_file", {"path": "a.txt"}), ("exec", {"command": "rm -rf /tmp/x"})],
            ids=["c1", "c2"],
        ),
        fs.text("It says \x1b[31malpha.", chunk_size=4, reasoning="look at it"),
    )
    proc = cb.invoke("ask", "--jsonl", "what is in a.txt?")
    assert proc.returncode == 0, proc.stderr
    events = lines(proc.stdout)
    kinds = [e["type"] for e in events]
    call = next(e for e in events if e["type"] == "tool_call" and e["id"] == "c1")
    assert call == {
        "type": "tool_call",
        "id": "c1",
        "name": "read_file",
        "arguments": {"path": "a.txt"},
        "run": True,
    }
    result = next(e for e in events if e["type"] == "tool_result")
    assert (result["id"], result["ok"], result["approval"]) == ("c1", True, "not-needed")
    assert "alpha" in result["output"] and result["output_chars"] == len(result["output"])
    denied = next(e for e in events if e["type"] == "tool_call" and e["id"] == "c2")
    assert denied["run"] is False and denied["name"] == "exec" and denied["reason"]
    assert kinds.index("tool_result") < kinds.index("text")
    assert "".join(e["delta"] for e in events if e["type"] == "reasoning") == "look at it"
    answer = "".join(e["delta"] for e in events if e["type"] == "text")
    assert kinds[-2:] == ["usage", "end"]
    end = events[-1]
    assert end["answer"] == answer == "It says \x1b[31malpha."
    assert (end["status"], end["exit_code"]) == ("ok", 0)
    assert end["session_id"] == cb.only_session()["id"]
    assert "\x1b" not in proc.stdout  # the escape is \u001b inside the JSON string
    assert not re.search(r"[\x80-\x9f]", proc.stdout)


def test_jsonl_error_line_and_exit_code(tmp_path: Path, server: fs.FakeServer) -> None:
    cb = make_cb(tmp_path, server.base_url)
    server.add(fs.error_mid_stream("partial ans"))
    proc = cb.invoke("ask", "--jsonl", "q")
    assert proc.returncode == 6
    events = lines(proc.stdout)
    assert [e["type"] for e in events][-3:] == ["usage", "error", "end"]
    error, end = events[-2:]
    assert error["exit_code"] == 6 and "mid-stream" in error["message"]
    assert (end["status"], end["exit_code"], end["answer"]) == ("failed", 6, "partial ans")


def test_jsonl_empty_answer_ends_with_exit_7(tmp_path: Path, server: fs.FakeServer) -> None:
    cb = make_cb(tmp_path, server.base_url)
    server.add(fs.text(""))
    proc = cb.invoke("ask", "--jsonl", "q")
    assert proc.returncode == 7
    assert lines(proc.stdout)[-1]["exit_code"] == 7
    assert "the answer was empty" in proc.stderr


def test_jsonl_with_json_or_extract_is_a_usage_error(tmp_path: Path, server: fs.FakeServer) -> None:
    cb = make_cb(tmp_path, server.base_url)
    for other in ("--json", "-x"):
        proc = cb.invoke("ask", "--jsonl", other, "q")
        assert proc.returncode == 2 and "only one of" in proc.stderr
    assert server.chat_bodies() == []
