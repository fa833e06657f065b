"""The exec tool with real processes: output format, caps, timeouts, cancel, scrubbed env."""

from __future__ import annotations

import json
import os
import shutil
import threading
from pathlib import Path
from typing import Any

import pytest
from processes import alive, wait_gone
from waits import file_text, returns_within

from countbot_cli.messages import ToolCall
from countbot_cli.tools.registry import ToolContext, ToolRegistry, ToolResult, default_tools
from countbot_cli.tools.shell import is_secret_name, scrub_env


@pytest.fixture
def ws(tmp_path: Path) -> Path:
    root = tmp_path / "ws"
    root.mkdir()
    return root


def run_exec(
    ws: Path, cancel: threading.Event | None = None, ctx: dict[str, Any] | None = None, **args: Any
) -> ToolResult:
    context = ToolContext(workspace=ws, **(ctx or {}))
    reg = ToolRegistry(default_tools(context), context)
    prepared = reg.prepare(ToolCall("c1", "exec", json.dumps(args)))
    assert prepared.error is None, prepared.error
    return reg.run(prepared, cancel)


# ---- output format ---------------------------------------------------------------------------


def test_stdout_only(ws: Path) -> None:
    res = run_exec(ws, command="echo hello; echo world")
    assert (res.ok, res.content) == (True, "hello\nworld")


def test_stderr_section_and_failed_exit_code(ws: Path) -> None:
    res = run_exec(ws, command="echo out; echo err >&2; exit 3")
    assert not res.ok and res.error == "command failed with exit code 3"
    assert res.content == "COMMAND FAILED (exit code 3)\nout\nSTDERR:\nerr\nExit code: 3"


def test_no_output(ws: Path) -> None:
    assert run_exec(ws, command="true").content == "(no output)"


def test_runs_in_the_workspace_or_working_dir(ws: Path) -> None:
    (ws / "sub").mkdir()
    assert run_exec(ws, command="pwd").content == str(ws.resolve())
    assert run_exec(ws, command="pwd", working_dir="sub").content == str((ws / "sub").resolve())
    res = run_exec(ws, command="pwd", working_dir="missing")
    assert not res.ok and "is not an existing directory" in res.content


def test_stdin_is_closed(ws: Path) -> None:
    """The command reads nothing of countbot's own stdin (what the user typed ahead, a piped
    question): countbot's fd 0 is a pipe holding text here, and `cat` must not see it."""
    read_end, write_end = os.pipe()
    os.write(write_end, b"typed ahead by the user\n")
    os.close(write_end)
    saved = os.dup(0)
    os.dup2(read_end, 0)
    try:
        res = run_exec(ws, command="cat; echo done", timeout=10)
    finally:
        os.dup2(saved, 0)
        os.close(saved)
        os.close(read_end)
    assert res.content == "done"


def test_crlf_and_invalid_utf8_are_normalised(ws: Path) -> None:
    res = run_exec(ws, command=r"printf 'a\r\nb\377\n'")
    assert res.content == "a\nb\ufffd"


def test_output_cap_keeps_head_and_tail_and_counts_what_was_elided(ws: Path) -> None:
    res = run_exec(ws, ctx={"max_output_chars": 100}, command="printf '%01000d' 0")
    assert res.content == "0" * 40 + "\n[… 0 lines / 900 chars elided …]\n" + "0" * 60
    # lines: cut at line ends; the error at the end of a long build is what the model sees
    build = "for i in $(seq 1 500); do echo compiling unit $i; done; echo 'error: main.c:3: boom'"
    res = run_exec(ws, ctx={"max_output_chars": 400}, command=build)
    head, note, tail = (
        res.content.partition("\n[… ")[0],
        *res.content.split("\n[… ")[1].split(" elided …]\n"),
    )
    assert head.startswith("compiling unit 1\ncompiling unit 2\n")
    assert head.endswith("\n" + head.rsplit("\n", 1)[1]) and "unit" in head.rsplit("\n", 1)[1]
    assert tail.endswith("compiling unit 500\nerror: main.c:3: boom")
    kept = head.count("\n") + 1 + tail.count("\n") + 1
    lines, chars = note.split(" lines / ")
    assert int(lines) == 501 - kept  # every line is either shown or counted
    full = "".join(f"compiling unit {i}\n" for i in range(1, 501)) + "error: main.c:3: boom"
    # the elided lines with their line ends
    assert int(chars.split()[0].replace(",", "")) == len(full) - len(head) - 1 - len(tail)
    assert len(res.content) <= 400 + len("[… 000 lines / 0,000 chars elided …]") + 2


def test_a_failing_command_keeps_its_last_stderr_lines(ws: Path) -> None:
    from countbot_cli.tools.shell import failed_stderr_tail

    command = 'seq 1 3000; for i in 1 2 3 4 5 6; do echo "err $i" >&2; done; exit 3'
    res = run_exec(ws, ctx={"max_output_chars": 500}, command=command)
    assert not res.ok and res.content.startswith("COMMAND FAILED (exit code 3)\n1\n2\n")
    assert res.content.endswith("STDERR:\nerr 1\nerr 2\nerr 3\nerr 4\nerr 5\nerr 6\nExit code: 3")
    assert failed_stderr_tail(res) == ["err 2", "err 3", "err 4", "err 5", "err 6"]
    assert failed_stderr_tail(run_exec(ws, command="echo fine >&2")) == []
    assert failed_stderr_tail(run_exec(ws, command="echo out; exit 1")) == []


def test_chatty_command_does_not_deadlock(ws: Path) -> None:
    command = (
        "head -c 3000000 /dev/zero | tr '\\0' x; echo; head -c 300000 /dev/zero | tr '\\0' y >&2"
    )
    res = returns_within(  # a deadlock on full pipes would hang here
        lambda: run_exec(ws, ctx={"max_output_chars": 1000}, command=command, timeout=30),
        "a command writing 3.3 MB to both pipes",
        timeout=60,
    )
    assert res.ok
    assert res.content.startswith("x" * 400 + "\n[… ")
    assert res.content.endswith(" elided …]\n" + "y" * 600)
    chars = int(res.content.split(" lines / ")[1].split()[0].replace(",", ""))
    assert chars == 3_000_000 + len("\nSTDERR:\n") + 300_000 - 1000  # all but what is shown


# ---- timeouts, cancel, process groups --------------------------------------------------------


def test_timeout_kills_the_whole_process_group(ws: Path) -> None:
    command = "sleep 30 & echo $! > child.pid; echo $$ > shell.pid; echo started; sleep 30"
    res = returns_within(  # a hang bound: the commands sleep 30 s
        lambda: run_exec(ws, command=command, timeout=1), "a command timed out after 1 s", 20
    )
    assert res.timed_out and not res.ok and not res.interrupted
    assert res.content.startswith(
        "Error: Command timed out after 1 seconds; its process group was killed."
    )
    assert res.content.endswith("Last output:\nstarted")
    wait_gone(*(int((ws / name).read_text()) for name in ("child.pid", "shell.pid")))


def test_process_ignoring_sigterm_is_killed(ws: Path) -> None:
    command = "sh -c 'trap \"\" TERM; echo $$ > stubborn.pid; sleep 30' & wait"
    res = run_exec(ws, command=command, timeout=1)
    assert res.timed_out
    wait_gone(int(file_text(ws / "stubborn.pid")))


def test_cancel_stops_a_running_command_quickly(ws: Path) -> None:
    cancel = threading.Event()
    results: list[ToolResult] = []
    worker = threading.Thread(
        target=lambda: results.append(
            run_exec(ws, cancel, command="echo $$ > shell.pid; sleep 30", timeout=60)
        )
    )
    worker.start()
    file_text(ws / "shell.pid")  # the command runs
    cancel.set()
    worker.join(15)  # a hang bound: the command sleeps 30 s
    assert not worker.is_alive()
    (res,) = results
    assert res.interrupted and not res.timed_out and not res.ok
    assert res.content.startswith("Error: Command interrupted after ")
    wait_gone(int((ws / "shell.pid").read_text()))


def test_background_child_holding_the_output_is_stopped(ws: Path) -> None:
    res = run_exec(ws, command="sleep 30 & echo $! > bg.pid; echo done", timeout=20)
    assert res.ok
    assert res.content == "done\n[background processes still holding the output were stopped]"
    wait_gone(int((ws / "bg.pid").read_text()))


def test_detached_background_process_is_left_alone(ws: Path) -> None:
    res = run_exec(ws, command="sleep 5 >/dev/null 2>&1 & echo $! > bg.pid; echo done")
    assert res.content == "done"
    pid = int((ws / "bg.pid").read_text())
    try:
        assert alive(pid)
    finally:
        os.kill(pid, 9)


@pytest.mark.skipif(shutil.which("setsid") is None, reason="needs setsid(1)")
def test_a_process_that_left_the_group_is_reported_not_claimed_stopped(ws: Path) -> None:
    res = run_exec(ws, command="setsid sh -c 'echo $$ > esc.pid; exec sleep 30' & echo done")
    pid = int((ws / "esc.pid").read_text())
    try:
        assert res.ok and res.content.startswith("done\n")
        assert "were stopped" not in res.content
        assert "left the command's process group (setsid)" in res.content
        assert alive(pid)
    finally:
        os.kill(pid, 9)


# ---- environment -----------------------------------------------------------------------------


def test_secrets_are_scrubbed_from_the_environment(
    ws: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    for name in (
        "OPENAI_API_KEY",
        "MY_TOKEN",
        "COUNTBOT_API_KEY",
        "DB_PASSWORD",
        "AWS_SECRET",
        "STRIPE_APIKEY_LIVE",
    ):
        monkeypatch.setenv(name, "leak-" + name)
    monkeypatch.setenv("SAFE_SETTING", "visible")
    res = run_exec(ws, command="echo $OPENAI_API_KEY $MY_TOKEN; env")
    assert "leak-" not in res.content
    assert "SAFE_SETTING=visible" in res.content
    assert res.content.split("\n")[0] == ""  # the echo printed nothing but its newline


def test_is_secret_name() -> None:
    secret = [
        "OPENAI_API_KEY",
        "countbot_api_key",
        "GITHUB_TOKEN",
        "TOKEN",
        "AWS_SECRET",
        "PG_PASSWORD",
        "MY_APIKEY",
        "X_API_KEY_2",
        "SSH_KEY",
    ]
    harmless = ["PATH", "HOME", "KEYBOARD", "TOKENIZERS_PARALLELISM", "LANG", "SECRETARY"]
    assert [n for n in secret if not is_secret_name(n)] == []
    assert [n for n in harmless if is_secret_name(n)] == []
    assert scrub_env({"PATH": "/bin", "A_TOKEN": "x"}) == {"PATH": "/bin"}


def test_secret_names_without_an_underscore_and_configured_key_values_are_scrubbed(
    ws: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    for name in ("PGPASSWORD", "MYSQL_PWD", "GH_TOKEN", "VAULT_SECRET", "HTTPS_PASSWD"):
        monkeypatch.setenv(name, "leak-" + name)
    monkeypatch.setenv("ODD_NAME", "Bearer sk-configured-key-123456")  # holds the API key
    monkeypatch.setenv("SHORT_MATCH", "abc")  # values under 8 characters are never matched
    ctx = {"secret_values": ("sk-configured-key-123456", "abc")}
    res = run_exec(ws, ctx=ctx, command="env")
    assert "leak-" not in res.content and "sk-configured" not in res.content
    assert "SHORT_MATCH=abc" in res.content
    assert "\nPWD=" in "\n" + res.content  # the shell's own PWD is not a secret
    for harmless in ("PWD", "OLDPWD", "MONKEY", "PASSWORD_HINT_SHOWN", "TOKEN_COUNT"):
        assert not is_secret_name(harmless), harmless


def test_commands_that_cannot_run_as_shown_are_refused_before_asking(ws: Path) -> None:
    context = ToolContext(workspace=ws)
    reg = ToolRegistry(default_tools(context), context)
    for command, why in (
        ("touch a\x00b", "NUL byte"),
        ("   ", "command is empty"),
        ("echo " + "x" * 40_000, "write a script"),
    ):
        prepared = reg.prepare(ToolCall("c1", "exec", json.dumps({"command": command})))
        assert prepared.error is not None and why in prepared.error
        assert not reg.run(prepared).ok
    assert os.listdir(ws) == []
