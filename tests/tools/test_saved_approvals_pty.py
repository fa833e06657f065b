"""Approvals that last: `A` at a prompt saves a rule in the user's own config
folder ($XDG_CONFIG_HOME/countbot/allow.yaml), the next process honours it, a different command
still asks, `config allow list/remove` show and forget it, and the project's (trusted) config
and folder are never written to. Driven on a pty against the loopback server."""

from __future__ import annotations

import os
import stat
from pathlib import Path

import fakeserver as fs
import yaml
from cbenv import CB
from terminal import approval_prompt, finish, spawn_ask
from tools_env import tools_cb


def _files(folder: Path) -> dict[str, bytes]:
    return {str(p.relative_to(folder)): p.read_bytes() for p in folder.rglob("*") if p.is_file()}


def test_A_saves_an_exact_command_in_the_user_folder_and_the_next_run_uses_it(
    tmp_path: Path, server: fs.FakeServer
) -> None:
    cb = tools_cb(tmp_path, server)
    project_config = cb.config_file.read_bytes()
    run_one = fs.tool_calls([("exec", {"command": "echo saved-rule-ran"})])
    server.add(run_one, fs.text("Done."))
    child = spawn_ask(cb, "run it")
    shown = approval_prompt(child)
    assert "[A]lways this exact command, saved" in shown
    child.sendline("A")
    code, rest = finish(child)
    assert code == 0
    allow = cb.user_home / "allow.yaml"
    assert f"rule in {allow}" in " ".join(rest.split())
    assert stat.S_IMODE(os.stat(allow).st_mode) == 0o600
    data = yaml.safe_load(allow.read_text(encoding="utf-8"))
    assert data == {"commands": ["echo saved-rule-ran"], "tools": []}
    assert "saved-rule-ran" in server.chat_bodies()[1]["messages"][-1]["content"]
    before = _files(cb.work)

    # a second process: the same command runs without asking; a different one still asks
    other = ("exec", {"command": "echo saved-rule-ran; echo more"})
    server.add(fs.tool_calls([("exec", {"command": "echo saved-rule-ran"})]), fs.text("Again."))
    server.add(fs.tool_calls([other]), fs.text("Other."))
    child = spawn_ask(cb, "run it again")
    child.expect("Again.")
    code, rest = finish(child)
    assert code == 0 and "Allow?" not in rest
    assert "saved-rule-ran" in server.chat_bodies()[3]["messages"][-1]["content"]
    child = spawn_ask(cb, "run another")
    approval_prompt(child)
    child.sendline("n")
    child.expect("Reason for the model")
    child.sendline("")
    code, _ = finish(child)
    assert code == 0

    # the project's trusted config is byte-identical; nothing new in the project folder but
    # the sessions countbot keeps there in this test set-up
    assert cb.config_file.read_bytes() == project_config
    after = _files(cb.work)
    assert {k: v for k, v in after.items() if not k.startswith("sessions")} == {
        k: v for k, v in before.items() if not k.startswith("sessions")
    }
    assert not any("allow" in k for k in after)
    _list_and_remove(cb, allow)


def _list_and_remove(cb: CB, allow: Path) -> None:
    """`config allow list` shows the saved rule, `remove` forgets it (once: then exit 2)."""
    listed = cb.invoke("config", "allow", "list")
    assert listed.returncode == 0
    assert str(allow) in listed.stdout and "command  echo saved-rule-ran" in listed.stdout
    gone = cb.invoke("config", "allow", "remove", "echo saved-rule-ran")
    assert gone.returncode == 0 and "removed" in gone.stdout
    assert yaml.safe_load(allow.read_text(encoding="utf-8")) == {"commands": [], "tools": []}
    again = cb.invoke("config", "allow", "remove", "echo saved-rule-ran")
    assert again.returncode == 2 and "no saved approval" in again.stderr
    assert "no saved approvals" in cb.invoke("config", "allow", "list").stdout


def test_A_on_a_write_saves_the_tool(tmp_path: Path, server: fs.FakeServer) -> None:
    cb = tools_cb(tmp_path, server)
    server.add(
        fs.tool_calls([("write_file", {"path": "one.txt", "content": "1\n"})]), fs.text("One.")
    )
    child = spawn_ask(cb, "write")
    shown = approval_prompt(child)
    assert "[A]lways this tool, saved" in shown
    child.sendline("a!")
    code, _ = finish(child)
    assert code == 0 and (cb.work / "one.txt").read_text() == "1\n"
    data = yaml.safe_load((cb.user_home / "allow.yaml").read_text(encoding="utf-8"))
    assert data == {"commands": [], "tools": ["write_file"]}
    server.add(
        fs.tool_calls([("write_file", {"path": "two.txt", "content": "2\n"})]), fs.text("Two.")
    )
    child = spawn_ask(cb, "write again")
    child.expect("Two.")
    code, rest = finish(child)
    assert code == 0 and "Allow?" not in rest
    assert (cb.work / "two.txt").read_text() == "2\n"
    assert cb.session_files()  # recorded as a saved rule
    records = [
        r
        for f in cb.session_files()
        for r in yaml.safe_load(f.read_text(encoding="utf-8")).get("tool_conversations", [])
    ]
    assert sorted(r["approval"] for r in records) == ["saved-rule", "user-saved"]
