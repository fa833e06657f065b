"""The tool-calling loop end to end: the installed `countbot ask` (non-interactive: stdin is a
pipe) against the scriptable loopback server. Interactive approval is in test_tools_pty.py."""

from __future__ import annotations

import json
from pathlib import Path

import fakeserver as fs
import pytest
from cbenv import TEST_KEY, make_cb
from processes import wait_gone
from tools_env import (
    SPAWN_SCRIPT,
    assert_untouched,
    assistant_calls,
    escape_calls,
    escape_workspace,
    tool_messages,
    tools_cb,
)

README_HEAD = [
    "# CountBot",
    "",
    "CountBot 是一个基于 LLM 的智能助手框架。",
    "",
    "## 功能特性",
    "",
    "- 多模型支持（OpenAI、Claude、国产大模型）",
    "- 工具调用系统",
    "- 记忆管理",
    "- 技能系统",
]
README_LINES = README_HEAD + [f"line {n} of the readme" for n in range(11, 151)]
SEED_ARGS = '{"path":"README.md","show_line_numbers":true}'
SEED_ANSWER = "我已经读取了 README.md 文件。这是 CountBot 项目的说明文档。"


# ---- seed 000: the two-round turn ----


def test_seed_000_tool_round_request_and_what_is_saved(
    tmp_path: Path, server: fs.FakeServer
) -> None:
    cb = tools_cb(tmp_path, server)
    (cb.work / "README.md").write_text("\n".join(README_LINES) + "\n", encoding="utf-8")
    greeting = ("你好", "你好！很高兴见到你！有什么我可以帮助你的吗？")
    server.add(fs.text(greeting[1]))
    assert cb.invoke("ask", greeting[0]).returncode == 0
    sid = cb.only_session()["id"]

    server.add(
        fs.tool_calls([("read_file", SEED_ARGS)], ids=["call_abc123"], chunk_size=7),
        fs.text(SEED_ANSWER, chunk_size=6),
    )
    proc = cb.invoke("ask", "-s", sid, "读取 README.md 文件")
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout == SEED_ANSWER + "\n"

    first, second = server.chat_bodies()[1:3]
    history = [
        {"role": "user", "content": greeting[0]},
        {"role": "assistant", "content": greeting[1]},
        {"role": "user", "content": "读取 README.md 文件"},
    ]
    assert first["messages"][1:] == history
    assert [t["function"]["name"] for t in first["tools"]] == sorted(
        t["function"]["name"] for t in first["tools"]
    )
    expected_result = "[File: README.md | Lines: 150]\n" + "\n".join(
        f"{n:>3}| {line}" for n, line in enumerate(README_LINES, start=1)
    )
    assert expected_result.startswith("[File: README.md | Lines: 150]\n  1| # CountBot\n  2| \n")
    assert second["messages"][0] == first["messages"][0]  # same system prompt in the turn
    assert second["messages"][1:] == [
        *history,
        {
            "role": "assistant",
            "content": "",  # SPEC §7: "" instead of the seed's null
            "tool_calls": [
                {
                    "id": "call_abc123",
                    "type": "function",
                    "function": {"name": "read_file", "arguments": SEED_ARGS},
                }
            ],
        },
        {
            "role": "tool",
            "tool_call_id": "call_abc123",
            "name": "read_file",
            "content": expected_result,
        },
    ]

    saved = cb.only_session()
    assert [(m["role"], m["content"]) for m in saved["messages"]] == [
        ("user", greeting[0]),
        ("assistant", greeting[1]),
        ("user", "读取 README.md 文件"),
        ("assistant", SEED_ANSWER),
    ]
    assert all("tool_calls" not in m and m["role"] != "tool" for m in saved["messages"])
    (record,) = saved["tool_conversations"]
    assert record["tool"] == "read_file"
    assert record["arguments"] == {"path": "README.md", "show_line_numbers": True}
    assert record["result"].startswith("[File: README.md | Lines: 150]\n  1| # CountBot")
    assert record["outcome"] == "ok" and record["approval"] == "not-needed"
    assert type(record["duration_ms"]) is int  # milliseconds, a whole number
    assert record["message_id"] == saved["messages"][-1]["id"]

    # turn 3: the tool round is not replayed
    server.add(fs.text("不客气！"))
    assert cb.invoke("ask", "-s", sid, "谢谢").returncode == 0
    third = server.chat_bodies()[3]["messages"][1:]
    assert third == [
        *history,
        {"role": "assistant", "content": SEED_ANSWER},
        {"role": "user", "content": "谢谢"},
    ]


# ---- the wire shapes of streamed tool calls ----


@pytest.mark.parametrize("shape", fs.SHAPES)
def test_streamed_tool_call_shapes_are_assembled(
    tmp_path: Path, server: fs.FakeServer, shape: str
) -> None:
    cb = tools_cb(tmp_path, server)
    (cb.work / "a.txt").write_text("alpha\nbeta\n", encoding="utf-8")
    (cb.work / "sub").mkdir()
    (cb.work / "sub" / "b.txt").write_text("bee\n", encoding="utf-8")
    calls = [
        ("read_file", {"path": "a.txt", "start_line": 2}),
        ("list_dir", {"path": "sub"}),
    ]
    round1 = fs.tool_calls(calls, shape=shape, chunk_size=3)  # type: ignore[arg-type]
    round2 = fs.tool_calls([("read_file", {"path": "sub/b.txt"})], shape=shape)  # type: ignore[arg-type]
    server.add(round1, round2, fs.text("both read"))
    proc = cb.invoke("ask", "look around")
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout == "both read\n"

    second, third = server.chat_bodies()[1:3]
    sent = assistant_calls(second)
    assert [c["function"]["name"] for c in sent] == ["read_file", "list_dir"]
    assert [json.loads(c["function"]["arguments"]) for c in sent] == [a for _, a in calls]
    results = tool_messages(second)
    assert [t["tool_call_id"] for t in results] == [c["id"] for c in sent]
    assert [t["name"] for t in results] == ["read_file", "list_dir"]
    assert results[0]["content"] == "[File: a.txt | Lines: 2 | Showing: 2-2]\n2| beta"
    assert results[1]["content"].startswith("Contents of sub:\n")
    assert "b.txt" in results[1]["content"]
    ids = [c["id"] for c in sent]
    assert len(set(ids)) == 2 and all(0 < len(i) <= 40 for i in ids)
    if shape == "llamacpp":
        assert all(len(i) > 40 for i in round1.ids)  # the server's ids were too long: shortened
        assert not set(ids) & set(round1.ids)
    else:
        assert ids == round1.ids
    # request 3 repeats round 1 with the same (shortened) ids, then round 2
    assert assistant_calls(third)[:2] == sent
    assert tool_messages(third)[:2] == results
    assert tool_messages(third)[2]["content"] == "[File: sub/b.txt | Lines: 1]\n1| bee"
    assert tool_messages(third)[2]["tool_call_id"] == assistant_calls(third)[2]["id"]
    records = cb.only_session()["tool_conversations"]
    assert [r["outcome"] for r in records] == ["ok", "ok", "ok"]


def test_non_streamed_tool_calls(tmp_path: Path, server: fs.FakeServer) -> None:
    cb = tools_cb(tmp_path, server)
    (cb.work / "a.txt").write_text("alpha\n", encoding="utf-8")
    server.add(fs.tool_calls([("read_file", {"path": "a.txt"})], shape="llamacpp"), fs.text("ok"))
    proc = cb.invoke("ask", "--no-stream", "read it")
    assert proc.returncode == 0, proc.stderr
    second = server.chat_bodies()[1]
    assert second["stream"] is False
    (call,) = assistant_calls(second)
    (result,) = tool_messages(second)
    assert result["tool_call_id"] == call["id"] and len(call["id"]) <= 40
    assert result["content"] == "[File: a.txt | Lines: 1]\n1| alpha"


# ---- malformed calls: the model gets an error and the turn goes on ----


def test_bad_json_unknown_tool_and_schema_violation_become_error_results(
    tmp_path: Path, server: fs.FakeServer
) -> None:
    cb = tools_cb(tmp_path, server)
    (cb.work / "a.txt").write_text("alpha\n", encoding="utf-8")
    server.add(
        fs.tool_calls(
            [
                ("read_file", '{"path": "a.txt"'),  # truncated JSON
                ("delete_everything", {"really": True}),
                ("read_file", {"start_line": "first"}),  # no path, wrong type
                ("write_file", "[1, 2]"),  # not an object
                ("read_file", {"path": "a.txt"}),  # a good one still runs
            ]
        ),
        fs.text("I will fix my calls."),
    )
    proc = cb.invoke("ask", "go")
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout == "I will fix my calls.\n"
    results = [t["content"] for t in tool_messages(server.chat_bodies()[1])]
    assert len(results) == 5
    assert results[0].startswith("Error: arguments are not valid JSON")
    assert results[1].startswith("Error: unknown tool 'delete_everything'")
    assert "read_file" in results[1] and "exec" in results[1]  # the available tools are listed
    assert results[2].startswith("Error: invalid arguments for read_file")
    assert "'path' is required" in results[2]
    assert results[3].startswith("Error: arguments must be a JSON object")
    assert results[4] == "[File: a.txt | Lines: 1]\n1| alpha"
    saved = cb.only_session()
    assert [m["content"] for m in saved["messages"]] == ["go", "I will fix my calls."]
    outcomes = [r["outcome"] for r in saved["tool_conversations"]]
    assert outcomes == ["error", "error", "error", "error", "ok"]
    arguments = [r["arguments"] for r in saved["tool_conversations"]]
    assert arguments[0] == '{"path": "a.txt"'  # what the model sent, when it is not an object
    assert arguments[1] == {"really": True}  # an unknown tool's arguments still parse
    assert arguments[3] == "[1, 2]"
    assert not (cb.work / "1").exists()


# ---- confinement, non-interactive: every escape is denied and nothing is touched ----


def test_escapes_are_denied_non_interactively_even_with_yes_and_an_allow_rule(
    tmp_path: Path, server: fs.FakeServer
) -> None:
    cb = make_cb(tmp_path, server.base_url)
    ws = escape_workspace(cb)
    cfg = {"enabled": True, "workspace": str(ws), "allow": ["touch pwned"]}
    cb = make_cb(tmp_path, server.base_url, tools=cfg)
    calls = escape_calls(cb)
    server.add(fs.tool_calls(calls), fs.text("I could not."))
    proc = cb.invoke("ask", "--yes", "steal things")
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout == "I could not.\n"
    results = tool_messages(server.chat_bodies()[1])
    assert len(results) == len(calls)
    for r in results:
        assert r["content"].startswith("Denied: path outside the workspace"), r
    notices = [ln for ln in proc.stderr.splitlines() if "not run" in ln]
    assert len(notices) == len(calls)
    assert_untouched(cb, server)
    records = cb.only_session()["tool_conversations"]
    assert {r["outcome"] for r in records} == {"denied"}


def test_inside_the_workspace_reads_run_and_writes_need_yes(
    tmp_path: Path, server: fs.FakeServer
) -> None:
    cb = tools_cb(tmp_path, server)
    write = ("write_file", {"path": "new/dir/notes.md", "content": "hello\n"})
    server.add(fs.tool_calls([write]), fs.text("denied, fine"))
    server.add(fs.tool_calls([write]), fs.text("written"))
    denied = cb.invoke("ask", "write it")
    assert denied.returncode == 0, denied.stderr
    assert not (cb.work / "new").exists()
    (r1,) = tool_messages(server.chat_bodies()[1])
    assert r1["content"].startswith("Denied: ") and "--yes" in r1["content"]
    assert "write_file: not run" in denied.stderr
    allowed = cb.invoke("ask", "--yes", "write it")
    assert allowed.returncode == 0, allowed.stderr
    assert (cb.work / "new" / "dir" / "notes.md").read_text(encoding="utf-8") == "hello\n"
    (r2,) = tool_messages(server.chat_bodies()[3])
    assert r2["content"].startswith("Created new/dir/notes.md")


def test_yes_never_approves_exec(tmp_path: Path, server: fs.FakeServer) -> None:
    cb = tools_cb(tmp_path, server)
    server.add(fs.tool_calls([("exec", {"command": "touch ran"})]), fs.text("ok"))
    proc = cb.invoke("ask", "--yes", "run it")
    assert proc.returncode == 0, proc.stderr
    assert not (cb.work / "ran").exists()
    (r,) = tool_messages(server.chat_bodies()[1])
    assert r["content"].startswith("Denied: shell commands need the user's approval")
    assert cb.only_session()["tool_conversations"][0]["approval"] == "denied"


# ---- the shell ----


def test_timeout_kills_the_shell_and_its_child(tmp_path: Path, server: fs.FakeServer) -> None:
    cb = tools_cb(tmp_path, server, allow=["sh spawn.sh"])
    (cb.work / "spawn.sh").write_text(SPAWN_SCRIPT, encoding="utf-8")
    server.add(
        fs.tool_calls([("exec", {"command": "sh spawn.sh", "timeout": 1})]), fs.text("it hung")
    )
    proc = cb.run("ask", "run the script", timeout=30)  # a hang bound: the script sleeps 300 s
    assert proc.returncode == 0, proc.stderr
    wait_gone(*(int((cb.work / name).read_text()) for name in ("shell.pid", "child.pid")))
    (r,) = tool_messages(server.chat_bodies()[1])
    assert r["content"].startswith("Error: Command timed out after 1 seconds")
    (record,) = cb.only_session()["tool_conversations"]
    assert record["outcome"] == "timeout" and record["approval"] == "allow-rule"


def test_exec_environment_has_no_secrets(tmp_path: Path, server: fs.FakeServer) -> None:
    cb = tools_cb(tmp_path, server, allow=["env"])
    server.add(fs.tool_calls([("exec", {"command": "env"})]), fs.text("seen"))
    secrets = {
        "OPENAI_API_KEY": TEST_KEY,
        "GITHUB_TOKEN": "ghp-SECRET-token",
        "DB_PASSWORD": "SECRET-pw",
        "COUNTBOT_VISIBLE_MARKER": "plain-value",
    }
    proc = cb.invoke("ask", "show env", env=secrets)
    assert proc.returncode == 0, proc.stderr
    (r,) = tool_messages(server.chat_bodies()[1])
    out = r["content"]
    assert "COUNTBOT_VISIBLE_MARKER=plain-value" in out  # the command really printed its env
    for name, value in secrets.items():
        if name != "COUNTBOT_VISIBLE_MARKER":
            assert name not in out and value not in out
    assert "SECRET" not in out


def test_deny_rule_refuses_a_command_even_inside_a_compound(
    tmp_path: Path, server: fs.FakeServer
) -> None:
    cb = tools_cb(tmp_path, server, allow=["echo *"], deny=["rm *"])
    (cb.work / "keep.txt").write_text("x", encoding="utf-8")
    server.add(fs.tool_calls([("exec", {"command": "echo hi; rm keep.txt"})]), fs.text("refused"))
    proc = cb.invoke("ask", "clean up")
    assert proc.returncode == 0, proc.stderr
    assert (cb.work / "keep.txt").exists()
    (r,) = tool_messages(server.chat_bodies()[1])
    assert r["content"].startswith("Error: denied by rule 'rm *'")


# ---- the loop's limit ----


def test_max_iterations_stops_with_a_notice(tmp_path: Path, server: fs.FakeServer) -> None:
    cb = tools_cb(tmp_path, server, config={"max_iterations": 2})
    (cb.work / "a.txt").write_text("alpha\n", encoding="utf-8")
    again = [("read_file", {"path": "a.txt"})]
    server.add(
        fs.tool_calls(again, content="Reading."),
        fs.tool_calls(again, content="Reading again."),
        fs.tool_calls(again, content="And again."),
    )
    proc = cb.invoke("ask", "--json", "loop forever")
    assert proc.returncode == 8, proc.stderr  # the documented exit code of the tool-round limit
    assert "max_iterations" in proc.stderr and "stopped after 2 tool rounds" in proc.stderr
    assert len(server.chat_bodies()) == 3  # two tool rounds ran; the third request ended it
    obj = json.loads(proc.stdout)
    assert obj["finish_reason"] == "max_iterations"
    # each request was valid: one tool message per call of every earlier round
    assert len(tool_messages(server.chat_bodies()[1])) == 1
    assert len(tool_messages(server.chat_bodies()[2])) == 2
    saved = cb.only_session()
    assert saved["messages"][0]["content"] == "loop forever"
    assert all(m["role"] in ("user", "assistant") for m in saved["messages"])
    assert [r["outcome"] for r in saved["tool_conversations"]] == ["ok", "ok"]
    server.add(fs.text("fine"))
    follow = cb.invoke("ask", "-c", "are you there?")
    assert follow.returncode == 0, follow.stderr
    sent = server.chat_bodies()[3]["messages"]
    assert all(m["role"] in ("system", "user", "assistant") for m in sent)
    assert sent[-1] == {"role": "user", "content": "are you there?"}


def test_the_same_call_a_third_time_stops_the_turn_with_a_notice(
    tmp_path: Path, server: fs.FakeServer
) -> None:
    """Issue 18: the small model spent every round reading one invented path. The third
    identical call (same tool, same arguments however spaced or ordered) is not run: the turn
    ends with a notice, exit 8, and the rounds left are not spent."""
    cb = tools_cb(tmp_path, server)  # max_iterations 10
    (cb.work / "a.txt").write_text("alpha\n", encoding="utf-8")
    (cb.work / "b.txt").write_text("beta\n", encoding="utf-8")
    server.add(
        fs.tool_calls([("read_file", {"path": "a.txt", "start_line": 1})], content="Reading."),
        fs.tool_calls([("read_file", {"path": "b.txt", "start_line": 1})]),  # another call
        fs.tool_calls([("read_file", '{"path": "a.txt"}')]),  # not the same
        fs.tool_calls([("read_file", '{ "start_line" : 1, "path" : "a.txt" }')], content="Again."),
        fs.tool_calls([("read_file", '{"start_line":1,"path":"a.txt"}')], content="And again."),
        fs.text("never asked for"),
    )
    proc = cb.invoke("ask", "--json", "read it")
    assert proc.returncode == 8, proc.stderr
    assert "same read_file call 3 times in this turn" in proc.stderr
    assert len(server.chat_bodies()) == 5  # the fifth answer ended the turn, no sixth request
    assert server.pending == 1
    obj = json.loads(proc.stdout)
    assert obj["finish_reason"] == "repeated_tool_call" and obj["answer"] == "And again."
    saved = cb.only_session()
    assert [r["outcome"] for r in saved["tool_conversations"]] == ["ok"] * 4  # 3rd not run
    assert [m["content"] for m in saved["messages"]] == ["read it", "And again."]
