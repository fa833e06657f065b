"""Hostile input during `countbot ask`, as a user meets it: deep JSON and huge numbers
from the provider and in tool arguments, an over-long stream line, a session file nested 900
deep, and a reader closing the pipe. Each checks the exit code, the one-line message and that
the user's message is still saved."""

from __future__ import annotations

import json
import subprocess
from pathlib import Path
from typing import Any

import fakeserver as fs
import pytest
from cbenv import CB, COUNTBOT, make_cb

from countbot_cli.jsonsafe import MAX_INT_DIGITS
from countbot_cli.provider.sse import MAX_LINE

DEEP = "[" * 100_000  # deep enough for a RecursionError in json.loads
SSE = {"Content-Type": "text/event-stream"}
JSON = {"Content-Type": "application/json"}


def _chunk_line(content: str) -> str:
    chunk = {"id": "c1", "choices": [{"index": 0, "delta": {"content": content}}]}
    return "data: " + json.dumps(chunk) + "\n\n"


def _error_line(stderr: str) -> str:
    lines = [ln for ln in stderr.splitlines() if ln.startswith("countbot:")]
    assert len(lines) == 1, stderr
    assert lines[0].startswith("countbot: error: "), stderr
    assert "Traceback" not in stderr
    return lines[0]


def _saved(cb: CB) -> list[tuple[str, str, str | None]]:
    return [(m["role"], m["content"], m.get("status")) for m in cb.only_session()["messages"]]


# ---- from the provider ----


@pytest.mark.parametrize(
    ("body", "words"),
    [
        (_chunk_line("Hi") + "data: " + DEEP + "\n\n", "nested too deeply"),
        (
            _chunk_line("Hi") + 'data: {"created": ' + "1" * (MAX_INT_DIGITS + 1) + "}\n\n",
            "digits",
        ),
        (_chunk_line("Hi") + "data: " + "x" * (MAX_LINE + 1024) + "\n\n", "16,777,216 bytes"),
    ],
    ids=["deep-chunk", "huge-int-chunk", "line-over-cap"],
)
def test_an_unreadable_stream_chunk_is_a_stream_error_keeping_the_partial_answer(
    tmp_path: Path, server: fs.FakeServer, body: str, words: str
) -> None:
    cb = make_cb(tmp_path, server.base_url)
    server.add(fs.status(200, body, headers=SSE))
    proc = cb.invoke("ask", "tell me")
    assert proc.returncode == 6, proc.stderr
    assert words in _error_line(proc.stderr)
    assert proc.stdout.startswith("Hi")
    assert _saved(cb) == [("user", "tell me", "failed"), ("assistant", "Hi", "failed")]
    assert len(server.chat_bodies()) == 1  # text had arrived: never retried


@pytest.mark.parametrize(
    ("reply", "code", "words"),
    [
        (fs.status(200, '{"choices": ' + DEEP, headers=JSON), 3, "nested too deeply"),
        (fs.status(200, '{"id": ' + "9" * 5000 + "}", headers=JSON), 3, "digits"),
        (fs.status(400, '{"error": {"message": ' + DEEP, headers=JSON), 3, "rejected"),
        (fs.status(401, '{"error": ' + "[" * 900 + "]" * 900 + "}", headers=JSON), 4, "401"),
    ],
    ids=["deep-body", "huge-int-body", "deep-error-body", "900-deep-error-body"],
)
def test_an_unreadable_json_body_is_a_provider_error(
    tmp_path: Path, server: fs.FakeServer, reply: fs.Reply, code: int, words: str
) -> None:
    cb = make_cb(tmp_path, server.base_url)
    server.add(reply)
    proc = cb.invoke("ask", "--no-stream", "tell me")
    assert proc.returncode == code, proc.stderr
    assert words in _error_line(proc.stderr)
    assert proc.stdout == ""
    assert _saved(cb) == [("user", "tell me", "failed")]


# ---- tool arguments ----


@pytest.mark.parametrize(
    ("arguments", "words"),
    [
        ('{"path": ' + "[" * 600 + "]" * 600 + "}", "nested too deeply (over 256 levels)"),
        ('{"path": "a.txt", "start_line": ' + "1" * 5000 + "}", "over 4300 digits"),
        ('{"path": ' + DEEP, "nested too deeply"),
    ],
    ids=["600-deep", "huge-int", "100000-deep"],
)
def test_unreadable_tool_arguments_are_a_tool_error_for_the_model(
    tmp_path: Path, server: fs.FakeServer, arguments: str, words: str
) -> None:
    ws = tmp_path / "ws"
    ws.mkdir()
    (ws / "a.txt").write_text("secret-free text\n", encoding="utf-8")
    cb = make_cb(tmp_path, server.base_url, tools={"enabled": True, "workspace": str(ws)})
    server.add(fs.tool_calls([("read_file", arguments)]), fs.text("I could not read it."))
    proc = cb.invoke("ask", "read a.txt")
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout == "I could not read it.\n"
    tool_msg = server.chat_bodies()[1]["messages"][-1]
    assert tool_msg["role"] == "tool"
    assert tool_msg["content"].startswith("Error: arguments rejected: ")
    assert words in tool_msg["content"]
    saved = cb.only_session()
    assert [(m["role"], m["content"]) for m in saved["messages"]] == [
        ("user", "read a.txt"),
        ("assistant", "I could not read it."),
    ]
    (record,) = saved["tool_conversations"]
    assert record["outcome"] == "error" and record["arguments"] == arguments  # kept as text


# ---- session files ----


def test_a_session_file_nested_900_deep_is_quarantined_and_every_command_works(
    tmp_path: Path, server: fs.FakeServer
) -> None:
    cb = make_cb(tmp_path, server.base_url)
    server.add(fs.text("a"), fs.text("b"), fs.text("c"))
    assert cb.invoke("ask", "first session").returncode == 0
    assert cb.invoke("ask", "second session").returncode == 0
    good, bad = sorted(cb.session_files(), key=lambda p: "second" in p.read_text("utf-8"))
    doc: dict[str, Any] = json.loads(bad.read_text("utf-8"))
    # valid JSON that json.loads still parses, in the place a tool call's arguments are kept
    doc["tool_conversations"] = [{"tool": "read_file", "arguments": {"path": []}}]
    raw = json.dumps(doc).replace('"path": []', '"path": ' + "[" * 900 + "]" * 900)
    bad.write_text(raw, encoding="utf-8")

    cont = cb.invoke("ask", "-c", "and then?")  # the damaged session was the latest one
    assert cont.returncode == 0, cont.stderr
    assert cont.stdout == "c\n"
    assert "nested too deeply" in cont.stderr and "Traceback" not in cont.stderr
    (moved,) = cb.sessions_dir.glob(f"{bad.stem}.json.corrupt-*")
    assert moved.read_text("utf-8") == raw  # kept byte for byte
    saved = json.loads(good.read_text("utf-8"))["messages"]
    assert [m["content"] for m in saved] == ["first session", "a", "and then?", "c"]

    listing = cb.invoke("sessions", "list")
    assert listing.returncode == 0, listing.stderr
    assert "first session" in listing.stdout and "second session" not in listing.stdout
    shown = cb.invoke("sessions", "show", bad.stem)
    assert shown.returncode == 2 and "Traceback" not in shown.stderr


# ---- a reader closing the pipe ----


def _piped_to_head(cb: CB, *args: str, head: list[str]) -> tuple[int, str, bytes]:
    """Run `countbot ARGS | head ...` with real pipes; (countbot's status, its stderr, head's
    output)."""
    proc = subprocess.Popen(
        [COUNTBOT, *args],
        stdin=subprocess.DEVNULL,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        cwd=cb.work,
        env=cb.env,
    )
    reader = subprocess.Popen(["head", *head], stdin=proc.stdout, stdout=subprocess.PIPE)
    assert proc.stdout is not None
    proc.stdout.close()  # only head holds the read end now
    shown, _ = reader.communicate(timeout=60)
    _, err = proc.communicate(timeout=60)
    return proc.returncode, err.decode("utf-8", "replace"), shown


LONG = "".join(f"line {n} of a long answer\n" for n in range(400))


def test_head_closing_the_pipe_ends_the_answer_and_saves_the_turn(
    tmp_path: Path, server: fs.FakeServer
) -> None:
    cb = make_cb(tmp_path, server.base_url)
    server.add(fs.text(LONG, chunk_size=8, delay=0.01))
    code, err, shown = _piped_to_head(cb, "ask", "a long answer please", head=["-1"])
    assert shown == b"line 0 of a long answer\n"
    assert code == 0 and err == "", err  # quiet: no traceback, no "Exception ignored"
    assert server.wait_disconnects(1, timeout=5)  # the stream was abandoned early
    (user, answer) = cb.only_session()["messages"]
    assert (user["role"], user["content"], user.get("status")) == (
        "user",
        "a long answer please",
        None,
    )
    assert answer["role"] == "assistant" and answer["status"] == "interrupted"
    assert answer["content"].startswith("line 0 of a long answer\n")
    assert len(answer["content"]) < len(LONG)


@pytest.mark.parametrize("flag", ["--no-stream", "--json"])
def test_head_closing_the_pipe_after_a_whole_answer_saves_it(
    tmp_path: Path, server: fs.FakeServer, flag: str
) -> None:
    big = LONG * 40  # ~1 MB: more than a pipe holds, so the write itself meets the closed pipe
    cb = make_cb(tmp_path, server.base_url, memory={"auto_memory": False})
    server.add(fs.text(big, chunk_size=4096))
    code, err, shown = _piped_to_head(cb, "ask", flag, "a long answer please", head=["-c", "4"])
    assert len(shown) == 4
    assert code == 0 and err == "", err
    (user, answer) = cb.only_session()["messages"]
    assert user["content"] == "a long answer please" and "status" not in user
    assert answer["content"] == big  # all of it had arrived before it was printed
    # --json prints after the turn is saved (complete); --no-stream was cut while printing
    assert answer.get("status") == ("interrupted" if flag == "--no-stream" else None)
