"""The embedded model's process does not get to break countbot: `countbot ask` on a local model
whose process (the real provider/local_child.py, with tests/helpers/fake_llama_path standing in
for llama-cpp-python) sends a malformed reply or a line of 64 MiB, never becomes ready, or stops
answering mid-stream. Each time: countbot's exit code, the one line, the question kept, how long
countbot took after a signal, and no process left behind."""

from __future__ import annotations

import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
from cbenv import CB, COUNTBOT
from fake_llama import local_cb
from processes import alive, run_measured, wait_gone
from terminal import expect, finish, spawn_ask
from waits import file_text

from countbot_cli.errors import EXIT_INTERRUPTED, EXIT_NETWORK

pytestmark = pytest.mark.skipif(sys.platform == "win32", reason="POSIX signals and a pty")

BOUND = 60.0  # seconds: a hang bound for one scripted answer on a loaded machine
AFTER_SIGNAL = 1.5  # seconds from SIGTERM or Ctrl-C to countbot's exit, whatever the child does
PEAK_MIB = 200  # countbot holds a protocol line of at most 16 MiB (ask alone is about 35 MiB)
QUESTION = "what is the capital of France?"


def _child(cb: CB) -> int:
    """The pid of the model process countbot started (the scripted model writes it)."""
    return int(file_text(cb.root / "child.pid", timeout=BOUND))


def _one_line(stderr: str, what: str) -> str:
    lines = [ln for ln in stderr.splitlines() if "broke off" in ln]
    assert len(lines) == 1, stderr
    line = lines[0]
    assert line.startswith("countbot: error: the local model scripted (scripted.gguf) broke off")
    assert f"its process sent {what} and was stopped" in line
    assert "your message is kept" in line and "Traceback" not in stderr
    return line


def _question_kept(cb: CB) -> None:
    messages = cb.only_session()["messages"]
    assert messages[0]["role"] == "user" and messages[0]["content"] == QUESTION
    assert messages[0].get("status") == "failed"


@pytest.mark.parametrize(
    ("reply", "what"),
    [
        ("no-kind", "a reply with no chunk, end or error"),
        ("not-json", "a line that is not a JSON object"),
        ("bad-end", "an end whose usage is not counts"),
    ],
)
def test_a_malformed_reply_is_the_childs_death(tmp_path: Path, reply: str, what: str) -> None:
    cb = local_cb(tmp_path, tools=False, reply=reply, pid_file=str(tmp_path / "child.pid"))
    proc = cb.run("ask", QUESTION, timeout=BOUND)
    assert proc.returncode == EXIT_NETWORK, proc.stderr
    _one_line(proc.stderr, what)
    _question_kept(cb)
    wait_gone(_child(cb))


@pytest.mark.parametrize("newline", [True, False], ids=["64 MiB line", "no end, then silence"])
def test_a_line_of_64_mib_is_refused_in_bounded_memory(tmp_path: Path, newline: bool) -> None:
    cb = local_cb(
        tmp_path,
        tools=False,
        line_bytes=64 << 20,
        newline=newline,
        pid_file=str(tmp_path / "child.pid"),
    )
    run = run_measured([COUNTBOT, "ask", QUESTION], env=cb.env, cwd=cb.work, timeout=BOUND)
    assert run.returncode == EXIT_NETWORK, run.stderr
    _one_line(run.stderr, "a line over 16,777,216 bytes")
    assert run.peak_mib < PEAK_MIB, run  # the scripted child writes it a MiB at a time
    _question_kept(cb)
    wait_gone(_child(cb))


def test_sigterm_while_the_child_never_becomes_ready_leaves_no_child(tmp_path: Path) -> None:
    cb = local_cb(tmp_path, tools=False, ready="hang", pid_file=str(tmp_path / "child.pid"))
    proc = subprocess.Popen(
        [COUNTBOT, "ask", QUESTION],
        cwd=cb.work,
        env=cb.env,
        stdin=subprocess.DEVNULL,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    child = _child(cb)
    assert alive(child)  # importing "llama_cpp" forever: it never says it is ready
    sent = time.monotonic()
    proc.send_signal(signal.SIGTERM)
    _out, err = proc.communicate(timeout=BOUND)
    took = time.monotonic() - sent
    assert proc.returncode == EXIT_INTERRUPTED, err
    assert took < AFTER_SIGNAL, took
    wait_gone(child)
    _question_kept_as_interrupted(cb)


def _question_kept_as_interrupted(cb: CB) -> None:
    messages = cb.only_session()["messages"]
    assert messages[0]["role"] == "user" and messages[0]["content"] == QUESTION


@pytest.mark.parametrize("how", ["SIGTERM", "Ctrl-C"])
def test_a_child_stuck_mid_answer_does_not_hold_countbot(tmp_path: Path, how: str) -> None:
    cb = local_cb(
        tmp_path,
        tools=False,
        answers=["Paris is the capital, and more to come"],
        stall=True,
        pid_file=str(tmp_path / "child.pid"),
    )
    term = spawn_ask(cb, QUESTION, timeout=BOUND)
    try:
        expect(term, "Paris is", BOUND)  # the first piece; then it hears no cancel
        child = _child(cb)
        sent = time.monotonic()
        if how == "SIGTERM":
            term.kill(signal.SIGTERM)
        else:
            term.sendcontrol("c")
        code, _rest = finish(term)
        took = time.monotonic() - sent
    finally:
        term.close(force=True)
    assert code == EXIT_INTERRUPTED
    assert took < AFTER_SIGNAL, took
    wait_gone(child)
    messages = cb.only_session()["messages"]
    assert messages[1]["status"] == "interrupted" and messages[1]["content"].startswith("Paris")


def test_the_model_process_imports_nothing_from_the_folder_ask_runs_in(tmp_path: Path) -> None:
    """A `json.py` (or `llama_cpp.py`) in the folder where `countbot ask` runs is the user's
    file, not a module: the model process never runs it, and the model answers."""
    cb = local_cb(tmp_path, tools=False, answers=["Paris."])
    marker = tmp_path / "ran"
    for name in ("json", "llama_cpp", "threading"):
        (cb.work / f"{name}.py").write_text(f"open({str(marker)!r}, 'a').write('{name}')\n")
    proc = cb.run("ask", "--plain", "--no-save", QUESTION, timeout=BOUND)
    assert proc.returncode == 0 and proc.stdout.strip() == "Paris.", proc.stderr
    assert not marker.exists()
