"""The embedded model's process killed with SIGSEGV in the middle of an answer,
on the real bundled SmolLM2 GGUF: in-process, `countbot ask`, and the REPL on a pseudo-terminal.

The child kills itself with a real SIGSEGV after its third chunk when the file named by
COUNTBOT_TEST_MODEL_CRASH exists (it deletes the file first: one crash per file), which is how
llama.cpp dies on a CPU where its AMX repack crashes. countbot must say so in one line (the
model, the signal, what to try), keep the question (marked failed) and the partial answer, exit
6 from `ask`, stay up in the REPL, and answer the next message with a new child.
"""

from __future__ import annotations

import signal
import sys
from pathlib import Path

import pexpect
import pytest
from cbenv import CB, local_settings, make_cb
from local_extra import needs_local
from processes import wait_gone
from terminal import expect, spawn

from countbot_cli.errors import EXIT_NETWORK
from countbot_cli.messages import ChatRequest, Finished, TextDelta
from countbot_cli.provider.local import LocalProvider, ModelCrashed
from countbot_cli.provider.local_child import CRASH_FILE_ENV
from countbot_cli.provider.local_process import current_process, stop_model_process

pytestmark = needs_local

BOUND = 240.0  # seconds: a hang bound for a turn of the real model on a busy machine
LONG = "Write a very long story about a dragon who learns to cook, with many chapters."


@pytest.fixture
def crash_file(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """A crash armed for the next answer of a model process started from now on."""
    marker = tmp_path / "crash-next-answer"
    marker.write_text("")
    monkeypatch.setenv(CRASH_FILE_ENV, str(marker))
    stop_model_process()  # the next request starts a child that sees the variable
    yield marker
    stop_model_process()  # later tests get a child without it


def test_a_crash_mid_answer_is_a_model_crashed_error_and_pytest_survives(
    crash_file: Path,
) -> None:
    prov = LocalProvider(local_settings())
    req = ChatRequest(model="", messages=[{"role": "user", "content": LONG}], max_tokens=300)
    events = []
    with pytest.raises(ModelCrashed) as info:
        events.extend(prov.stream(req))
    assert not crash_file.exists()  # the child did crash
    err = info.value
    assert err.exit_code == EXIT_NETWORK == 6 and not err.retryable
    line = err.user_message()
    assert "\n" not in line
    assert "SmolLM2-135M-Instruct" in line and "SIGSEGV" in line
    assert "/retry" in line and "model_path" in line  # what to try
    text = "".join(e.text for e in events if isinstance(e, TextDelta))
    assert text and err.partial_text == text  # what arrived before the crash is kept
    first = current_process()
    assert first is None  # the dead child is not reused
    fin = list(prov.stream(ChatRequest(model="", messages=req.messages, max_tokens=5)))[-1]
    assert isinstance(fin, Finished) and fin.usage is not None and fin.usage.completion_tokens
    assert prov.last_stats is not None  # a new child loaded the model, as the stats line says
    assert prov.last_stats.describe().startswith("model loaded in ")


def test_ask_says_so_in_one_line_exits_6_and_keeps_the_question(tmp_path: Path) -> None:
    cb = make_cb(tmp_path, None)  # nothing configured: the embedded model
    marker = tmp_path / "crash"
    marker.write_text("")
    proc = cb.run(
        "ask",
        "--no-tools",
        "-o",
        "max_tokens",
        "60",
        LONG,
        timeout=BOUND,
        env={CRASH_FILE_ENV: str(marker)},
    )
    assert proc.returncode == 6, proc.stderr
    assert not marker.exists()
    errors = [ln for ln in proc.stderr.splitlines() if "crashed" in ln]
    assert len(errors) == 1, proc.stderr
    assert "SmolLM2-135M-Instruct" in errors[0] and "SIGSEGV" in errors[0]
    assert "Traceback" not in proc.stderr and "Segmentation" not in proc.stderr
    msgs = home_session(cb)["messages"]
    assert [(m["role"], m.get("status")) for m in msgs] == [
        ("user", "failed"),
        ("assistant", "failed"),
    ]
    assert msgs[0]["content"] == LONG and msgs[1]["content"].strip()


def home_session(cb: CB) -> dict[str, object]:
    """The one session file (with no config file, sessions live in the XDG home)."""
    import json

    folder = Path(cb.env["XDG_CONFIG_HOME"]) / "countbot" / "sessions"
    files = [p for p in folder.glob("*.json") if p.name != "index.json"]
    assert len(files) == 1, files
    data: dict[str, object] = json.loads(files[0].read_text(encoding="utf-8"))
    return data


@pytest.mark.skipif(sys.platform == "win32", reason="needs a POSIX pty")
def test_the_repl_stays_up_and_answers_the_next_message_with_a_new_child(tmp_path: Path) -> None:
    cb = make_cb(tmp_path, None)
    marker = tmp_path / "crash"
    marker.write_text("")
    child = spawn(cb, "-o", "max_tokens", "60", env={CRASH_FILE_ENV: str(marker)}, cols=200)
    try:
        expect(child, "tools", BOUND)  # the toolbar: the prompt is up
        child.send(LONG + "\r")
        expect(child, "crashed: llama.cpp was killed by SIGSEGV", BOUND)
        expect(child, "tools", BOUND)  # the REPL is still up, with its prompt
        assert not marker.exists() and child.isalive()
        child.send("/retry\r")  # a new child answers
        expect(child, "tokens/s", BOUND)  # the answer's stats line: it was answered
        expect(child, "tools", BOUND)
        child.sendcontrol("d")
        child.expect(pexpect.EOF, timeout=BOUND)
    finally:
        child.close(force=True)
    assert child.exitstatus == 0, (child.exitstatus, child.signalstatus)
    msgs = home_session(cb)["messages"]
    assert isinstance(msgs, list)
    assert [m["role"] for m in msgs] == ["user", "assistant"]
    assert msgs[0]["content"] == LONG and "status" not in msgs[0] and "status" not in msgs[1]


def test_countbot_ends_its_model_process_when_it_ends(tmp_path: Path) -> None:
    """No orphan: the child exits when countbot does (its stdin closes), even after SIGKILL."""
    import os
    import subprocess

    code = (
        "import os, sys, time\n"
        "from cbenv import local_settings\n"
        "from countbot_cli.provider.local import LocalProvider\n"
        "from countbot_cli.provider.local_process import current_process\n"
        "p = LocalProvider(local_settings(context_window=512))\n"
        "p.count_tokens('hi')\n"
        "print(current_process().pid, flush=True)\n"
        "time.sleep(600)\n"
    )
    helpers = str(Path(__file__).resolve().parent.parent / "helpers")
    proc = subprocess.Popen(
        [sys.executable, "-c", code],
        stdout=subprocess.PIPE,
        text=True,
        env={**os.environ, "PYTHONPATH": helpers},
    )
    assert proc.stdout is not None
    pid = int(proc.stdout.readline())
    os.kill(pid, 0)  # the model process runs
    proc.send_signal(signal.SIGKILL)
    proc.wait(BOUND)
    wait_gone(pid, within=BOUND)  # the model process does not outlive countbot
