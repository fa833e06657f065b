"""A tool round stopped by something other than Ctrl-C says what it was: the `tool` message
the session keeps (what the model was told) names SIGTERM, SIGHUP or the closed output, never
"the user". Driven as a user meets it: `countbot ask` as a subprocess running an allowed
command, signalled while the command runs, or its output's reader gone mid-round."""

from __future__ import annotations

import signal
from pathlib import Path

import fakeserver as fs
import pytest
from tools_env import tools_cb
from waits import file_text

# the command the model runs: says it started, then waits for the test (or a long time)
GATE = "echo $$ > started.pid\nwhile [ ! -e go ]; do sleep 0.05; done\necho gate-open\n"


@pytest.mark.parametrize(
    ("signame", "cause"),
    [
        ("SIGTERM", "countbot was terminated (SIGTERM)"),
        ("SIGHUP", "the terminal was closed (SIGHUP)"),
    ],
)
def test_a_signal_while_a_tool_runs_is_named_in_what_the_model_is_told(
    tmp_path: Path, server: fs.FakeServer, signame: str, cause: str
) -> None:
    cb = tools_cb(tmp_path, server, allow=["sh gate.sh"])
    (cb.work / "gate.sh").write_text(GATE, encoding="utf-8")
    server.add(
        fs.tool_calls(
            [("exec", {"command": "sh gate.sh"}), ("list_dir", {})], content="Running it."
        )
    )
    proc = cb.popen("ask", "--plain", "run the gate")
    try:
        file_text(cb.work / "started.pid", timeout=30)  # the command runs
        proc.send_signal(getattr(signal, signame))
        _, err = proc.communicate(timeout=30)
    finally:
        proc.kill()
    assert proc.returncode == 130, err
    ran, skipped = cb.only_session()["tool_conversations"]
    assert (ran["tool"], ran["outcome"]) == ("exec", "interrupted")
    assert ran["result"].endswith(f"[interrupted: {cause}]"), ran["result"]
    assert (skipped["tool"], skipped["outcome"]) == ("list_dir", "interrupted")
    assert skipped["result"] == f"Not run: {cause}."
    assert "the user" not in ran["result"] + skipped["result"]


def test_output_closed_mid_round_answers_every_call_saying_so(
    tmp_path: Path, server: fs.FakeServer
) -> None:
    cb = tools_cb(tmp_path, server, allow=["sh gate.sh"])
    (cb.work / "gate.sh").write_text(GATE, encoding="utf-8")
    server.add(fs.tool_calls([("exec", {"command": "sh gate.sh"}), ("list_dir", {})]))
    proc = cb.popen("ask", "--jsonl", "run the gate")
    try:
        assert proc.stdout is not None
        first = proc.stdout.readline()
        assert '"type": "tool_call"' in first and '"exec"' in first, first
        file_text(cb.work / "started.pid", timeout=30)
        proc.stdout.close()  # the reader goes away while the command runs
        (cb.work / "go").touch()  # the command ends; its result cannot be written
        _, err = proc.communicate(timeout=30)
    finally:
        proc.kill()
    assert proc.returncode == 0, err  # as `| head` always does: the reader had enough
    ran, skipped = cb.only_session()["tool_conversations"]
    assert (ran["tool"], ran["outcome"]) == ("exec", "ok")
    assert "gate-open" in ran["result"]
    assert (skipped["tool"], skipped["outcome"]) == ("list_dir", "interrupted")
    assert skipped["result"] == "Not run: the output was closed."
    assert len(server.chat_bodies()) == 1  # no request after the stopped round
