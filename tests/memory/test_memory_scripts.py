"""Memory in scripts, as a script runs `countbot ask`: `--json` and the
`--jsonl` end event carry `memory_used` (pinned, recalled, tool) and `memory_written` (new lines
with their source), `--no-memory` sends and writes nothing, `--remember` distils the exchange."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import fakeserver as fs
from cbenv import CB, make_cb

from countbot_cli.memory.store import MemoryStore

PINNED = "The user's name is Ana"
REDIS = "Production redis listens on port 6380"
OTHER = "Deploys run on Fridays only"


def setup(tmp_path: Path, server: fs.FakeServer, history: int = 50, **memory: Any) -> CB:
    cb = make_cb(
        tmp_path,
        server.base_url,
        memory={"inject": "relevant", **memory},
        tools={"enabled": True, "workspace": str(tmp_path / "work")},
        persona={"max_history_messages": history},
    )
    for text in (PINNED, REDIS, OTHER):
        assert cb.invoke("memory", "add", text).returncode == 0
    assert cb.invoke("memory", "pin", "1").returncode == 0
    return cb


def test_json_says_which_memory_was_sent_and_why(tmp_path: Path, server: fs.FakeServer) -> None:
    cb = setup(tmp_path, server, recall_lines=1)  # the redis line alone goes with the question
    search = {"action": "search", "keywords": "Fridays"}
    server.add(fs.tool_calls([("memory", search)]), fs.text("Port 6380, deploys on Fridays."))
    proc = cb.invoke("ask", "--json", "which redis port?")
    assert proc.returncode == 0, proc.stderr
    out = json.loads(proc.stdout)
    used = [(u["why"], u["number"], u["content"]) for u in out["memory_used"]]
    assert used == [("pinned", 1, PINNED), ("recalled", 2, REDIS), ("tool", 3, OTHER)]
    assert all(u["source"] == "user" and u["date"] for u in out["memory_used"])
    assert out["memory_written"] == []
    # what the server received agrees: the pinned line in the head, the recalled one with
    # the message
    first = server.chat_bodies()[0]["messages"]
    assert PINNED in first[0]["content"] and REDIS in first[-1]["content"]


def test_json_lists_the_lines_written_with_their_source(
    tmp_path: Path, server: fs.FakeServer
) -> None:
    cb = setup(tmp_path, server, history=2, auto_memory=False)
    server.add(fs.text("one"), fs.text("two"))
    assert cb.invoke("ask", "I use vim").returncode == 0
    assert cb.invoke("ask", "-c", "and tmux").returncode == 0
    overflow, fact = "User uses vim and tmux", "User's cat is called Miso"
    server.add(fs.text("Noted."), fs.text(overflow), fs.text(fact))
    proc = cb.invoke("ask", "--json", "--remember", "-c", "my cat is Miso")
    assert proc.returncode == 0, proc.stderr
    out = json.loads(proc.stdout)
    sid = out["session_id"]
    written = {w["content"]: w for w in out["memory_written"]}
    assert set(written) == {overflow, fact}
    assert (written[overflow]["source"], written[fact]["source"]) == (
        "auto-overflow",
        "auto-memory",
    )
    session = cb.only_session()
    archived, live = session["archived"], session["messages"]
    assert written[overflow]["sources"] == [
        {"session": sid, "messages": [m["id"] for m in archived]}
    ]
    assert written[fact]["sources"] == [{"session": sid, "messages": [m["id"] for m in live]}]
    numbers = {e.content: n for n, e in MemoryStore(cb.memory_file).numbered()}
    assert (
        (written[overflow]["number"], written[fact]["number"])
        == (4, 5)
        == (
            numbers[overflow],
            numbers[fact],
        )
    )
    # --remember asked the model about this exchange, now (thresholds or not)
    summary = server.chat_bodies()[-1]["messages"][0]["content"]
    assert "my cat is Miso" in summary and "Noted." in summary and "tmux" not in summary


def test_jsonl_end_event_carries_the_memory_fields(tmp_path: Path, server: fs.FakeServer) -> None:
    cb = setup(tmp_path, server, recall_lines=1)
    server.add(fs.text("6380."))
    proc = cb.invoke("ask", "--jsonl", "redis port?")
    assert proc.returncode == 0, proc.stderr
    end = json.loads(proc.stdout.splitlines()[-1])
    assert end["type"] == "end"
    assert [(u["why"], u["number"]) for u in end["memory_used"]] == [("pinned", 1), ("recalled", 2)]
    assert end["memory_written"] == []


def test_no_memory_sends_and_writes_nothing(tmp_path: Path, server: fs.FakeServer) -> None:
    cb = setup(tmp_path, server, auto_messages=2)
    before = cb.memory_file.read_bytes()
    server.add(fs.text("first"))
    assert cb.invoke("ask", "redis port?").returncode == 0
    server.add(fs.text("second"), fs.text("User asked about redis twice"))
    proc = cb.invoke("ask", "--json", "--no-memory", "-c", "redis port again?")
    assert proc.returncode == 0, proc.stderr
    out = json.loads(proc.stdout)
    assert out["memory_used"] == [] and out["memory_written"] == []
    body = server.chat_bodies()[-1]
    sent = json.dumps(body, ensure_ascii=False)
    assert PINNED not in sent and REDIS not in sent and OTHER not in sent
    assert "memory" not in [t["function"]["name"] for t in body.get("tools", [])]
    assert len(server.chat_bodies()) == 2 and server.pending == 1  # no summary call either
    assert cb.memory_file.read_bytes() == before
    both = cb.invoke("ask", "--no-memory", "--remember", "x")
    assert both.returncode == 2 and "--no-memory" in both.stderr
