"""MCP servers' tools end to end: the installed `countbot` against a real MCP server nobody here
wrote (`mcp-server-time` from PyPI, over stdio, offline) and the loopback model server.

The server is started through `sh -c 'echo $$ > PIDFILE; exec mcp-server-time …'`, so the test
knows its pid (to kill or freeze it, and to check that countbot stopped it) while countbot
talks to the real program.
"""

from __future__ import annotations

import json
import os
import signal
import sys
from pathlib import Path
from typing import Any

import fakeserver as fs
import pexpect
from cbenv import make_cb
from mcp_env import TIME_BIN, TIME_TOOL, mcp_cb, pid_of, silent_server, time_server, tool_names
from processes import alive, unread_input, wait_gone
from terminal import expect, plain, spawn, spawn_ask
from tools_env import tool_messages
from waits import file_text, wait_until

CALL = (TIME_TOOL, {"timezone": "Asia/Tokyo"})


def test_mcp_list_starts_lists_and_stops_the_server(tmp_path: Path, server: fs.FakeServer) -> None:
    pidfile = tmp_path / "time.pid"
    cb = mcp_cb(tmp_path, server, time=time_server(pidfile, allow=["get_current_time"]))
    proc = cb.invoke("mcp", "list")
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.splitlines()[:5] == [
        f'time  running  (stdio: sh -c echo $$ > "{pidfile}"; exec "{TIME_BIN}" --local-timezone UTC)',
        "  mcp__time__get_current_time(timezone*: string)  [allowed without asking]",
        "      Get current time in a specific timezone",
        "  mcp__time__convert_time(source_timezone*: string, time*: string, target_timezone*: string)",
        "      Convert time between timezones",
    ]
    assert not alive(pid_of(pidfile))
    listed = json.loads(cb.invoke("mcp", "list", "--json").stdout)
    (entry,) = listed
    assert (entry["name"], entry["state"], entry["error"]) == ("time", "running", None)
    tools = {t["name"]: t for t in entry["tools"]}
    schema = tools["mcp__time__get_current_time"]["input_schema"]
    assert schema["type"] == "object" and schema["required"] == ["timezone"]
    assert schema["properties"]["timezone"]["type"] == "string"
    assert tools["mcp__time__convert_time"]["input_schema"]["required"] == [
        "source_timezone",
        "time",
        "target_timezone",
    ]
    assert [t["allowed"] for t in entry["tools"]] == [True, False]


def test_the_chat_starts_its_servers_on_its_first_turn_not_at_its_prompt(
    tmp_path: Path, server: fs.FakeServer
) -> None:
    """The prompt's toolbar counts the tools known so far: it once started the servers to count
    theirs, and the prompt waited for them (up to their start_timeout; Ctrl-C, a key there,
    could not stop that)."""
    pidfile = tmp_path / "time.pid"
    cb = mcp_cb(tmp_path, server, time=time_server(pidfile))
    server.add(fs.text("Hello."))
    child = spawn(cb)
    try:
        expect(child, "tools ask")  # the prompt is up, its toolbar drawn
        assert not pidfile.exists()
        child.send("hi\r")
        expect(child, "Hello.")
        expect(child, "tools ask")
        assert TIME_TOOL in tool_names(server.chat_bodies()[0])
        pid = pid_of(pidfile)
        child.sendcontrol("d")
        child.expect(pexpect.EOF)
    finally:
        child.close(force=True)
    wait_gone(pid)


def test_a_call_allowed_by_config_reaches_the_server_and_its_answer_the_model(
    tmp_path: Path, server: fs.FakeServer
) -> None:
    pidfile = tmp_path / "time.pid"
    cb = mcp_cb(tmp_path, server, time=time_server(pidfile, allow=["get_current_time"]))
    server.add(fs.tool_calls([CALL], content="Checking."), fs.text("It is evening in Tokyo."))
    proc = cb.invoke("ask", "what time is it in Tokyo?")
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.endswith("It is evening in Tokyo.\n")
    first, second = server.chat_bodies()
    names = tool_names(first)
    assert names == sorted(names) and "read_file" in names
    assert {"mcp__time__convert_time", "mcp__time__get_current_time"} <= set(names)
    (offered,) = [t for t in first["tools"] if t["function"]["name"] == CALL[0]]
    assert offered["function"]["parameters"]["required"] == ["timezone"]
    assert offered["function"]["description"].startswith("[MCP server 'time'] Get current time")
    (answer,) = tool_messages(second)
    result = json.loads(answer["content"])
    assert result["timezone"] == "Asia/Tokyo" and result["datetime"].endswith("+09:00")
    record = cb.only_session()["tool_conversations"][0]
    assert (record["tool"], record["approval"], record["outcome"]) == (CALL[0], "allow-rule", "ok")
    assert not alive(pid_of(pidfile))  # stopped with countbot


def test_a_call_not_allowed_is_denied_without_a_terminal_even_with_yes(
    tmp_path: Path, server: fs.FakeServer
) -> None:
    pidfile = tmp_path / "time.pid"
    cb = mcp_cb(tmp_path, server, time=time_server(pidfile))
    server.add(fs.tool_calls([CALL]), fs.text("I could not check."))
    proc = cb.invoke("ask", "--yes", "what time is it in Tokyo?")
    assert proc.returncode == 0, proc.stderr
    (answer,) = tool_messages(server.chat_bodies()[1])
    assert answer["content"].startswith(
        "Denied: MCP server tools need the user's approval, also with --yes"
    )
    notes = [line for line in proc.stderr.splitlines() if CALL[0] in line]
    assert len(notes) == 1 and "not run" in notes[0], proc.stderr
    assert cb.only_session()["tool_conversations"][0]["approval"] == "denied"


def test_a_call_asked_on_a_terminal_runs_on_y_and_not_on_n(
    tmp_path: Path, server: fs.FakeServer
) -> None:
    pidfile = tmp_path / "time.pid"
    cb = mcp_cb(tmp_path, server, time=time_server(pidfile))
    answers = (("y", '"timezone": "Asia/Tokyo"'), ("n it is night", "their reason: it is night"))
    server.add(fs.tool_calls([CALL, CALL]), fs.text("Answered."))  # one round, asked twice
    child = spawn_ask(cb, "--no-save", "what time is it in Tokyo?", timeout=30)
    for answer, _ in answers:
        child.expect(r"Allow\? \[y\]es / \[n\]o")
        shown = plain(child.before)
        child.expect(r"\(default: no\) ")
        shown += plain(child.before)
        assert "calls 'get_current_time' on the MCP server 'time' (sh -c" in shown
        assert "[a]lways for this tool" in shown
        child.sendline(answer)
    child.expect(pexpect.EOF)
    child.close()
    assert child.exitstatus == 0
    results = tool_messages(server.chat_bodies()[-1])
    for (_, expected), result in zip(answers, results, strict=True):
        assert expected in result["content"], result
    assert not alive(pid_of(pidfile))


def test_a_server_exiting_at_start_costs_one_line_and_the_turn_goes_on(
    tmp_path: Path, server: fs.FakeServer
) -> None:
    broken = {"command": "sh", "args": ["-c", "echo 'no database here' >&2; exit 3"]}
    cb = mcp_cb(tmp_path, server, broken=broken)
    server.add(fs.text("Hello."))
    proc = cb.invoke("ask", "hi")
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout == "Hello.\n"
    lines = [line for line in proc.stderr.splitlines() if "broken" in line]
    assert lines == [
        "countbot: MCP server 'broken' failed to start: it exited before answering "
        "(its stderr: no database here)"
    ]
    names = tool_names(server.chat_bodies()[0])
    assert "read_file" in names and not [n for n in names if n.startswith("mcp__")]


def test_a_server_not_started_in_time_costs_one_line_and_is_stopped(
    tmp_path: Path, server: fs.FakeServer
) -> None:
    """Its task stops it on its own once its start timed out; cancelling that task as well (a
    native cancel, which the SDK's shielded stop sequence does not survive) left it running
    after countbot had exited."""
    pidfile = tmp_path / "slow.pid"
    cb = mcp_cb(tmp_path, server, slow={**silent_server(pidfile), "start_timeout": 1})
    server.add(fs.text("Hello."))
    proc = cb.run("ask", "hi")
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout == "Hello.\n"
    lines = [line for line in proc.stderr.splitlines() if "slow" in line]
    assert lines == ["countbot: MCP server 'slow' failed to start: no answer in time (timed out)"]
    wait_gone(pid_of(pidfile))


def test_a_server_killed_mid_session_gives_the_model_an_error_and_the_turn_goes_on(
    tmp_path: Path, server: fs.FakeServer
) -> None:
    pidfile = tmp_path / "time.pid"
    cb = mcp_cb(tmp_path, server, time=time_server(pidfile, allow=["get_current_time"]))

    def kill_then_call(body: dict[str, Any]) -> fs.Reply:
        os.kill(pid_of(pidfile), signal.SIGKILL)
        server.responder = None
        return fs.tool_calls([CALL])

    server.responder = kill_then_call
    server.default = fs.text("The clock is gone.")
    proc = cb.invoke("ask", "what time is it in Tokyo?")
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.endswith("The clock is gone.\n")
    (answer,) = tool_messages(server.chat_bodies()[1])
    assert answer["content"].startswith(
        "Error: MCP server 'time': the server stopped responding"
    ), answer
    notes = [line for line in proc.stderr.splitlines() if CALL[0] in line]
    assert len(notes) == 2 and "stopped responding" in notes[1], proc.stderr  # → call, ← error


def test_a_crashed_server_is_restarted_once_before_its_next_call_with_one_line(
    tmp_path: Path, server: fs.FakeServer
) -> None:
    pidfile = tmp_path / "time.pid"
    cb = mcp_cb(tmp_path, server, time=time_server(pidfile, allow=["get_current_time"]))
    pids: list[int] = []

    def kill_server() -> None:
        pid = pid_of(pidfile)
        assert pid not in pids  # a new process each time it was started
        pids.append(pid)
        os.kill(pid, signal.SIGKILL)

    # no call three times: the same call a third time would end the turn (a loop)
    zones = ["Asia/Tokyo", "Asia/Tokyo", "Europe/Paris", "Europe/Paris", "UTC"]

    def script(body: dict[str, Any]) -> fs.Reply:
        turn = len(server.chat_bodies())  # this request included
        if turn in (1, 3):
            kill_server()
        if turn == 5:
            server.responder = None
        return fs.tool_calls([(CALL[0], {"timezone": zones[turn - 1]})])

    server.responder = script
    server.default = fs.text("Done with the clock.")
    proc = cb.invoke("ask", "what time is it in Tokyo?")
    assert proc.returncode == 0, proc.stderr
    bodies = server.chat_bodies()
    results = [tool_messages(b)[-1]["content"] for b in bodies[1:5]]
    assert results[0].startswith("Error: MCP server 'time': the server stopped responding")
    assert json.loads(results[1])["timezone"] == "Asia/Tokyo"  # the restarted server answered
    assert results[2].startswith("Error: MCP server 'time': the server stopped responding")
    assert results[3].startswith("Error: MCP server 'time': stopped responding")
    restarts = [line for line in proc.stderr.splitlines() if "restart" in line]
    assert restarts == ["countbot: MCP server 'time' had stopped responding: restarted it"], (
        proc.stderr
    )
    assert len(pids) == 2 and not any(alive(pid) for pid in pids)


def test_a_hanging_server_times_out_into_an_error_result_and_is_stopped_at_exit(
    tmp_path: Path, server: fs.FakeServer
) -> None:
    pidfile = tmp_path / "time.pid"
    cb = mcp_cb(tmp_path, server, time=time_server(pidfile, allow=["get_current_time"], timeout=2))

    def freeze_then_call(body: dict[str, Any]) -> fs.Reply:
        os.kill(pid_of(pidfile), signal.SIGSTOP)
        server.responder = None
        return fs.tool_calls([CALL])

    server.responder = freeze_then_call
    server.default = fs.text("No answer from the clock.")
    proc = cb.run("ask", "what time is it in Tokyo?", timeout=20)  # a hang fails it here
    assert proc.returncode == 0, proc.stderr
    (answer,) = tool_messages(server.chat_bodies()[1])
    assert answer["content"] == ("Error: MCP server 'time': no answer within 2 s (timed out)"), (
        answer
    )
    assert proc.stdout.endswith("No answer from the clock.\n")
    assert not alive(pid_of(pidfile))  # even a frozen server's group is killed at exit


def test_an_untrusted_project_config_never_starts_its_servers(
    tmp_path: Path, server: fs.FakeServer
) -> None:
    import yaml

    cb = make_cb(tmp_path, None)
    cb.user_home.mkdir(parents=True, exist_ok=True)
    user = {"default_provider": "test", "providers": {"test": _provider(server)}}
    (cb.user_home / "config.yaml").write_text(yaml.safe_dump(user), encoding="utf-8")
    marker = tmp_path / "server-ran"
    project = {
        **user,
        "tools": {"enabled": True},
        "mcp": {"servers": {"evil": {"command": "sh", "args": ["-c", f'touch "{marker}"']}}},
    }
    cb.config_file.write_text(yaml.safe_dump(project), encoding="utf-8")
    server.default = fs.text("ok")
    proc = cb.invoke("ask", "hi")
    assert proc.returncode == 0, proc.stderr
    assert "ignored ./config.yaml" in proc.stderr
    assert not marker.exists()
    cb.trust_config()  # the same file, once trusted, does start it
    proc = cb.invoke("ask", "hi")
    assert proc.returncode == 0, proc.stderr
    assert marker.exists()
    assert "MCP server 'evil' failed to start" in proc.stderr


def _provider(server: fs.FakeServer) -> dict[str, Any]:
    from cbenv import provider_config

    provider: dict[str, Any] = provider_config(server.base_url)["providers"]["test"]
    return provider


def test_ctrl_c_during_a_call_cancels_it(tmp_path: Path, server: fs.FakeServer) -> None:
    pidfile = tmp_path / "time.pid"
    cb = mcp_cb(tmp_path, server, time=time_server(pidfile, allow=["get_current_time"]))

    def freeze_then_call(body: dict[str, Any]) -> fs.Reply:
        os.kill(pid_of(pidfile), signal.SIGSTOP)
        server.responder = None
        return fs.tool_calls([CALL])

    server.responder = freeze_then_call
    child = spawn_ask(cb, "what time is it in Tokyo?", timeout=30)
    child.expect(CALL[0])  # the call has started
    wait_until(lambda: unread_input(pid_of(pidfile)), "the call to wait in the frozen server")
    child.sendintr()
    child.expect(pexpect.EOF, timeout=15)  # a hang bound: the frozen server never answers
    child.close()
    assert child.exitstatus == 130
    record = cb.only_session()["tool_conversations"][0]
    assert record["outcome"] == "interrupted", record
    assert len(server.chat_bodies()) == 1  # the model was not asked again
    assert not alive(pid_of(pidfile))


def test_a_child_the_server_started_with_setsid_does_not_outlive_countbot(
    tmp_path: Path, server: fs.FakeServer
) -> None:
    """The server's process group is stopped with it; a child that left the group (setsid)
    is ended too, as long as it was still the server's descendant when countbot stopped."""
    import shutil

    import pytest

    if shutil.which("setsid") is None or not Path("/proc/self/stat").exists():
        pytest.skip("needs setsid and /proc")
    pidfile, escaped = tmp_path / "time.pid", tmp_path / "escaped.pid"
    script = (
        f'setsid sh -c \'echo $$ $(cut -d" " -f6 /proc/$$/stat) > "{escaped}"; exec sleep 300\' & '
        f'echo $$ > "{pidfile}"; exec "{TIME_BIN}" --local-timezone UTC'
    )
    cb = mcp_cb(tmp_path, server, time={"command": "sh", "args": ["-c", script]})
    try:
        proc = cb.invoke("mcp", "list")
        assert proc.returncode == 0, proc.stderr
        assert "time  running" in proc.stdout
        child, sid = (int(n) for n in escaped.read_text().split())
        assert sid == child  # it really left the server's session and group
        wait_gone(child)
        assert not alive(pid_of(pidfile))
    finally:
        if escaped.exists() and alive(int(escaped.read_text().split()[0])):
            os.kill(int(escaped.read_text().split()[0]), signal.SIGKILL)


def test_a_server_that_stopped_responding_but_still_runs_is_stopped_with_countbot(
    tmp_path: Path, server: fs.FakeServer
) -> None:
    """Its call fails as 'stopped responding'; at the end countbot waits for the transport's
    stop sequence (stdin closed, then SIGTERM) instead of leaving it half done."""
    pidfile = tmp_path / "mute.pid"
    mute = str(Path(__file__).resolve().parents[1] / "helpers" / "mcp_mute_server.py")
    cb = mcp_cb(
        tmp_path,
        server,
        mute={
            "command": sys.executable,
            "args": [mute, str(pidfile)],
            "allow": ["get_current_time"],
        },
    )
    server.add(fs.tool_calls([("mcp__mute__get_current_time", {})]))
    server.default = fs.text("No clock.")
    try:
        proc = cb.invoke("ask", "what time is it?")
        assert proc.returncode == 0, proc.stderr
        (answer,) = tool_messages(server.chat_bodies()[1])
        assert answer["content"].startswith(
            "Error: MCP server 'mute': the server stopped responding"
        ), answer
        assert not alive(pid_of(pidfile))
    finally:
        if pidfile.exists() and alive(pid_of(pidfile)):
            os.kill(pid_of(pidfile), signal.SIGKILL)


def test_a_crashed_servers_process_group_does_not_outlive_countbot(
    tmp_path: Path, server: fs.FakeServer
) -> None:
    """The server dies mid-session and leaves a child in its process group: the SDK stops a
    group only when the server itself does not exit, so countbot ends what is left of it."""
    pidfile, childfile = tmp_path / "time.pid", tmp_path / "child.pid"
    script = (
        f'sleep 300 </dev/null >/dev/null 2>&1 & echo $! > "{childfile}"; echo $$ > "{pidfile}"; '
        f'exec "{TIME_BIN}" --local-timezone UTC'
    )
    cb = mcp_cb(
        tmp_path,
        server,
        time={"command": "sh", "args": ["-c", script], "allow": ["get_current_time"]},
    )

    def kill_then_call(body: dict[str, Any]) -> fs.Reply:
        os.kill(pid_of(pidfile), signal.SIGKILL)  # the server crashes; its child stays
        server.responder = None
        return fs.tool_calls([CALL])

    server.responder = kill_then_call
    server.default = fs.text("The clock is gone.")
    try:
        proc = cb.run("ask", "what time is it in Tokyo?")
        assert proc.returncode == 0, proc.stderr
        (answer,) = tool_messages(server.chat_bodies()[1])
        assert "the server stopped responding" in answer["content"], answer
        wait_gone(int(file_text(childfile)))
    finally:
        if childfile.exists() and alive(int(file_text(childfile))):
            os.kill(int(file_text(childfile)), signal.SIGKILL)
