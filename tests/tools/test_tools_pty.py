"""Approval prompts and Ctrl-C driven through a pseudo-terminal: the installed `countbot ask`
with stdin, stdout and stderr on a pty (interactive), against the loopback test server."""

from __future__ import annotations

import json
import sys
from pathlib import Path

import fakeserver as fs
from cbenv import make_cb
from processes import wait_gone
from terminal import approval_prompt, finish, plain, spawn_ask
from tools_env import (
    SPAWN_SCRIPT,
    assert_untouched,
    escape_calls,
    escape_workspace,
    tool_messages,
    tools_cb,
)
from waits import file_text


def test_y_runs_an_edit_after_showing_its_diff(tmp_path: Path, server: fs.FakeServer) -> None:
    cb = tools_cb(tmp_path, server)
    (cb.work / "a.txt").write_text("one\ntwo\n", encoding="utf-8")
    edit = {"path": "a.txt", "old_text": "two", "new_text": "TWO \x1b[2J[red]x[/red]"}
    server.add(fs.tool_calls([("edit_file", edit)], content="Editing."), fs.text("Edited."))
    child = spawn_ask(cb, "capitalise line two")
    shown = approval_prompt(child)
    assert "countbot wants to run edit_file (edits a file)" in shown
    assert "-two" in shown and "+TWO \\x1b[2J[red]x[/red]" in shown  # escaped, markup literal
    assert "[a]lways for this tool" in shown
    child.sendline("y")
    code, _ = finish(child)
    assert code == 0
    assert (cb.work / "a.txt").read_text(encoding="utf-8") == "one\nTWO \x1b[2J[red]x[/red]\n"
    (r,) = tool_messages(server.chat_bodies()[1])
    assert r["content"] == "Edited a.txt (replaced 1 occurrence)"
    assert cb.only_session()["tool_conversations"][0]["approval"] == "user"


def test_keys_typed_before_the_question_do_not_answer_it(
    tmp_path: Path, server: fs.FakeServer
) -> None:
    cb = tools_cb(tmp_path, server)
    write = fs.tool_calls([("write_file", {"path": "x.txt", "content": "x"})], first_delay=1.5)
    server.add(write, fs.text("ok"))
    child = spawn_ask(cb, "write")
    child.send("y\r")  # typed while waiting for the model
    approval_prompt(child)
    child.sendline("")
    code, _ = finish(child)
    assert code == 0
    assert not (cb.work / "x.txt").exists()
    assert cb.only_session()["tool_conversations"][0]["approval"] == "denied-by-user"


def test_n_with_a_reason_reaches_the_model(tmp_path: Path, server: fs.FakeServer) -> None:
    cb = tools_cb(tmp_path, server)
    calls = [("write_file", {"path": f"f{i}.py", "content": "import os\n"}) for i in range(3)]
    server.add(fs.tool_calls(calls), fs.text("Understood."))
    child = spawn_ask(cb, "write three files")
    approval_prompt(child)
    child.sendline("n use pathlib instead")
    approval_prompt(child)
    child.sendline("n")
    child.expect("Reason for the model")
    child.sendline("too many files")
    approval_prompt(child)
    child.sendline("")  # Enter: the default, no
    code, rest = finish(child)
    assert code == 0
    assert "Reason for the model" not in rest  # Enter asks for no reason
    assert not any((cb.work / f"f{i}.py").exists() for i in range(3))
    results = [t["content"] for t in tool_messages(server.chat_bodies()[1])]
    assert results == [
        "Denied: the user declined this call; their reason: use pathlib instead",
        "Denied: the user declined this call; their reason: too many files",
        "Denied: the user declined this call",
    ]
    records = cb.only_session()["tool_conversations"]
    assert [r["approval"] for r in records] == ["denied-by-user"] * 3


def test_a_allows_the_tool_for_the_session_but_exec_is_still_asked(
    tmp_path: Path, server: fs.FakeServer
) -> None:
    cb = tools_cb(tmp_path, server)
    server.add(
        fs.tool_calls([("write_file", {"path": "one.txt", "content": "1\n"})]),
        fs.tool_calls(
            [
                ("write_file", {"path": "two.txt", "content": "2\n"}),
                ("exec", {"command": "touch three.txt"}),
            ]
        ),
        fs.text("Done."),
    )
    child = spawn_ask(cb, "write two files")
    approval_prompt(child)
    child.sendline("a")
    shown = approval_prompt(child)  # the second write is not asked: the next prompt is the command
    assert "$ touch three.txt" in shown and "wants to run write_file" not in shown
    assert f"(in {cb.work.resolve()}" in shown
    assert "[a]lways" not in shown
    child.sendline("a")  # not offered for exec: denied
    code, rest = finish(child)
    assert code == 0
    assert "not available" in rest
    assert (cb.work / "one.txt").read_text() == "1\n" and (cb.work / "two.txt").read_text() == "2\n"
    assert not (cb.work / "three.txt").exists()
    approvals = [r["approval"] for r in cb.only_session()["tool_conversations"]]
    assert approvals == ["user-always", "session", "denied-by-user"]


EDITOR_SCRIPT = """\
import json, sys
path = sys.argv[1]
args = json.load(open(path, encoding="utf-8"))
assert args == {"path": "notes.txt", "content": "draft"}, args
args["content"] = "edited by the user"
json.dump(args, open(path, "w", encoding="utf-8"))
"""


def test_e_edits_the_arguments_in_the_editor(tmp_path: Path, server: fs.FakeServer) -> None:
    cb = tools_cb(tmp_path, server)
    script = tmp_path / "fake_editor.py"
    script.write_text(EDITOR_SCRIPT, encoding="utf-8")
    server.add(
        fs.tool_calls([("write_file", {"path": "notes.txt", "content": "draft"})]),
        fs.text("Saved."),
    )
    child = spawn_ask(cb, "take a note", env={"EDITOR": f"{sys.executable} {script}"})
    approval_prompt(child)
    child.sendline("e")
    child.expect("edited by the user")  # the new diff is shown ...
    child.expect("Run the edited call\\?")  # ... and asked about before it runs
    child.sendline("y")
    code, _ = finish(child)
    assert code == 0
    assert (cb.work / "notes.txt").read_text(encoding="utf-8") == "edited by the user"
    (r,) = tool_messages(server.chat_bodies()[1])
    assert "edited by the user" in r["content"]  # the model learns its arguments were changed
    assert r["content"].endswith("Created notes.txt with 18 chars, 18 bytes (file was new)")
    (record,) = cb.only_session()["tool_conversations"]
    assert record["approval"] == "user-edited"
    assert record["arguments"] == {"path": "notes.txt", "content": "edited by the user"}


def test_e_inline_rejects_invalid_json_and_asks_again(
    tmp_path: Path, server: fs.FakeServer
) -> None:
    cb = tools_cb(tmp_path, server)
    server.add(fs.tool_calls([("exec", {"command": "rm -rf build"})]), fs.text("Ran."))
    child = spawn_ask(cb, "clean")
    approval_prompt(child)
    child.sendline("e")
    child.expect("New arguments as one line of JSON")
    child.sendline('{"command": "touch edited"')
    child.expect("not valid JSON")
    approval_prompt(child)
    child.sendline("e")
    child.expect("New arguments")
    child.sendline('{"command": "touch edited", "timeout": "nope"}')
    child.expect("'timeout' must be an integer")
    approval_prompt(child)
    child.sendline("e")
    child.expect("New arguments")
    child.sendline('{"command": "touch edited"}')
    child.expect("Run the edited call\\?")
    child.sendline("y")
    code, _ = finish(child)
    assert code == 0
    assert (cb.work / "edited").exists()
    (record,) = cb.only_session()["tool_conversations"]
    assert record["arguments"] == {"command": "touch edited"}
    assert record["approval"] == "user-edited" and record["outcome"] == "ok"


def test_an_edit_that_leaves_the_workspace_is_asked_about_again(
    tmp_path: Path, server: fs.FakeServer
) -> None:
    cb = tools_cb(tmp_path, server)
    outside = tmp_path / "elsewhere.txt"
    server.add(
        fs.tool_calls([("write_file", {"path": "in.txt", "content": "x"})]),
        fs.tool_calls([("write_file", {"path": "in.txt", "content": "x"})]),
        fs.text("Done."),
    )
    child = spawn_ask(cb, "write")
    approval_prompt(child)
    child.sendline("e")
    child.expect("New arguments")
    child.sendline(json.dumps({"path": str(outside), "content": "x"}))
    child.expect("Run the edited call\\?")
    shown = plain(child.before)
    assert f"! outside the workspace: {outside}" in shown and "[a]lways" not in shown
    child.sendline("n")
    child.expect("Reason for the model")
    child.sendline("")
    approval_prompt(child)  # round 2: the same edit, approved at the second question
    child.sendline("e")
    child.expect("New arguments")
    child.sendline(json.dumps({"path": str(outside), "content": "x"}))
    child.expect("Run the edited call\\?")
    child.sendline("y")
    code, _ = finish(child)
    assert code == 0
    assert outside.read_text() == "x" and not (cb.work / "in.txt").exists()
    first, second = (t["content"] for t in tool_messages(server.chat_bodies()[2]))
    assert first == "Denied: the user declined this call"
    assert second.startswith("[The user edited the arguments; the call ran with: ")
    records = cb.only_session()["tool_conversations"]
    assert [(r["outcome"], r["approval"]) for r in records] == [
        ("denied", "denied-by-user"),
        ("ok", "user-edited"),
    ]
    assert records[0]["arguments"]["path"] == "in.txt"  # the call the model made, declined


def test_yes_flag_approves_writes_but_still_asks_for_exec(
    tmp_path: Path, server: fs.FakeServer
) -> None:
    cb = tools_cb(tmp_path, server)
    server.add(
        fs.tool_calls(
            [
                ("write_file", {"path": "w.txt", "content": "w"}),
                ("exec", {"command": "touch ran.txt"}),
            ]
        ),
        fs.text("Both."),
    )
    child = spawn_ask(cb, "--yes", "do both")
    shown = approval_prompt(child)
    assert "$ touch ran.txt" in shown and "wants to run write_file" not in shown
    assert (cb.work / "w.txt").exists()  # written without asking
    child.sendline("y")
    code, _ = finish(child)
    assert code == 0
    assert (cb.work / "ran.txt").exists()
    approvals = [r["approval"] for r in cb.only_session()["tool_conversations"]]
    assert approvals == ["yes-flag", "user"]


def test_escapes_are_asked_and_only_the_approved_one_runs(
    tmp_path: Path, server: fs.FakeServer
) -> None:
    cb = make_cb(tmp_path, server.base_url)
    ws = escape_workspace(cb)
    cb = tools_cb(tmp_path, server, workspace=str(ws), allow=["touch pwned"])
    calls = escape_calls(cb)
    sibling_secret = cb.work / "p" / "ws-evil" / "secret.txt"
    expected_paths = [
        cb.work / "etc" / "passwd",
        Path("/etc/passwd").resolve(),
        cb.work / "outside" / "secret.txt",
        sibling_secret,
        cb.work / "p" / "ws-evil" / "planted.txt",
        cb.work / "outside" / "planted.txt",
        cb.work / "p" / "ws-evil",
    ]
    server.add(
        fs.tool_calls(calls + [("read_file", {"path": str(sibling_secret)})]), fs.text("Done.")
    )
    child = spawn_ask(cb, "--yes", "look outside")
    for path in expected_paths:
        shown = approval_prompt(child)
        assert f"! outside the workspace: {path}" in shown
        assert "[a]lways" not in shown
        child.sendline("n")
        child.expect("Reason for the model")
        child.sendline("")
    shown = approval_prompt(child)  # the same sibling read once more: approved this time
    assert f"! outside the workspace: {sibling_secret}" in shown
    child.sendline("y")
    code, _ = finish(child)
    assert code == 0
    results = [t["content"] for t in tool_messages(server.chat_bodies()[1])]
    assert all(r == "Denied: the user declined this call" for r in results[:-1])
    assert results[-1].endswith("1| SECRET-SIBLING")
    assert_untouched(cb, server, approved=("SECRET-SIBLING",))


def test_ctrl_c_at_the_prompt_denies_and_ends_the_turn(
    tmp_path: Path, server: fs.FakeServer
) -> None:
    cb = tools_cb(tmp_path, server)
    server.add(fs.tool_calls([("write_file", {"path": "x.txt", "content": "x"})]))
    child = spawn_ask(cb, "write")
    approval_prompt(child)
    child.sendintr()
    code, _ = finish(child)
    assert code == 130
    assert not (cb.work / "x.txt").exists()
    assert len(server.chat_bodies()) == 1
    saved = cb.only_session()
    assert saved["messages"][0]["status"] == "interrupted"
    (record,) = saved["tool_conversations"]
    assert record["outcome"] == "interrupted"


def test_ctrl_c_while_a_tool_runs_stops_it(tmp_path: Path, server: fs.FakeServer) -> None:
    cb = tools_cb(tmp_path, server, allow=["sh spawn.sh"])
    (cb.work / "spawn.sh").write_text(SPAWN_SCRIPT, encoding="utf-8")
    server.add(fs.tool_calls([("exec", {"command": "sh spawn.sh"})], content="Running it."))
    child = spawn_ask(cb, "run the script")
    child.expect("→ exec")
    file_text(cb.work / "shell.pid")  # the script runs
    child.sendintr()
    code, rest = finish(child)  # a hang bound: the child's expect timeout (spawn_ask's 20 s)
    assert code == 130, rest
    assert "interrupted" in rest
    wait_gone(*(int((cb.work / name).read_text()) for name in ("shell.pid", "child.pid")))
    saved = cb.only_session()  # the file parses
    assert [(m["role"], m.get("status")) for m in saved["messages"]] == [
        ("user", None),
        ("assistant", "interrupted"),
    ]
    (record,) = saved["tool_conversations"]
    assert record["outcome"] == "interrupted"
    assert "interrupted" in record["result"]
    # the session goes on: the next request is valid (no dangling tool call)
    server.add(fs.text("Back."))
    follow = cb.run("ask", "-c", "again")
    assert follow.returncode == 0, follow.stderr
    sent = server.chat_bodies()[1]["messages"]
    assert [m["role"] for m in sent] == ["system", "user", "assistant", "user"]
    assert json.dumps(sent).count("tool_call") == 0
