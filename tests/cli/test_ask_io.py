"""Hostile input and output around `ask` and `models`: `-f` on a FIFO, a device or a
file swapped under it; piped stdin over its cap; escape sequences in model ids, provider error
text and an answer whose sequences are cut across stream events."""

from __future__ import annotations

import io
import json
import os
import subprocess
from collections.abc import Callable
from pathlib import Path
from typing import Any

import fakeserver as fs
import pytest
import yaml
from cbenv import CB, COUNTBOT, make_cb, provider_config
from waits import returns_within

from countbot_cli.commands.ask import AskOptions, run_ask
from countbot_cli.conversation.input import prompt_input
from countbot_cli.conversation.input.prompt_input import (
    MAX_INPUT_BYTES,
    read_attachment,
    read_stdin,
)
from countbot_cli.errors import EXIT_USAGE, UsageError

# bytes that must never reach a terminal from server- or model-supplied text
ESCAPES = ("\x1b", "\x07", "\x9b", "\x9c", "\x9d", "\x90")


@pytest.fixture
def isolated(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """An in-process user: own home, no local model; returns the config file to pass."""
    monkeypatch.setenv("HOME", str(tmp_path / "home"))
    monkeypatch.setenv("XDG_CONFIG_HOME", str(tmp_path / "home" / ".config"))
    monkeypatch.setenv("XDG_DATA_HOME", str(tmp_path / "home" / ".local" / "share"))
    monkeypatch.setenv("COUNTBOT_NO_LOCAL_MODEL", "1")
    monkeypatch.chdir(tmp_path)
    return tmp_path / "cfg" / "config.yaml"


def _write_config(path: Path, server: fs.FakeServer) -> None:
    cfg = provider_config(server.base_url)
    cfg["tools"] = {"enabled": False}
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(yaml.safe_dump(cfg), encoding="utf-8")


def _cb(tmp_path: Path, server: fs.FakeServer) -> CB:
    """A user whose config is named by COUNTBOT_CONFIG (always applied)."""
    cb = make_cb(tmp_path, server.base_url)
    cb.env["COUNTBOT_CONFIG"] = str(cb.config_file)
    return cb


def _one_error_line(stderr: str) -> str:
    lines = stderr.splitlines()
    assert len(lines) == 1, stderr
    assert lines[0].startswith("countbot: error: "), stderr
    return lines[0]


# ---- -f: regular files only, read at most the limit ----


def test_attaching_a_fifo_is_refused_at_once(tmp_path: Path, server: fs.FakeServer) -> None:
    cb = _cb(tmp_path, server)
    os.mkfifo(cb.work / "pipe")  # nobody ever writes to it: opening it to read would block
    proc = cb.run("ask", "what is in it?", "-f", "pipe", timeout=30)  # a hang fails it
    assert proc.returncode == EXIT_USAGE
    line = _one_error_line(proc.stderr)
    assert "-f pipe: is a named pipe (FIFO); only regular files can be attached" in line
    assert proc.stdout == ""
    assert server.requests == [] and cb.session_files() == []


def test_attaching_dev_zero_is_refused_without_reading_it(
    tmp_path: Path, server: fs.FakeServer
) -> None:
    cb = _cb(tmp_path, server)
    proc = cb.run("ask", "x", "-f", "/dev/zero", timeout=30)  # reading it forever fails it
    assert proc.returncode == EXIT_USAGE
    line = _one_error_line(proc.stderr)
    assert "-f /dev/zero: is a character device; only regular files can be attached" in line
    assert server.requests == [] and cb.session_files() == []


def test_a_folder_and_a_missing_file_keep_their_messages(tmp_path: Path) -> None:
    with pytest.raises(UsageError, match="is a folder, not a file"):
        read_attachment(tmp_path)
    with pytest.raises(UsageError, match="no such file"):
        read_attachment(tmp_path / "nope.txt")


def test_a_file_swapped_for_a_fifo_after_stat_is_refused_without_blocking(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The race: stat saw a regular file, then the name became a FIFO. The open must not
    block and the descriptor's own fstat must refuse it."""
    regular = tmp_path / "notes.txt"
    regular.write_text("hello\n", encoding="utf-8")
    fifo = tmp_path / "swapped"
    os.mkfifo(fifo)
    real_stat = os.stat

    def stat_before_the_swap(path: Any, *args: Any, **kw: Any) -> os.stat_result:
        return real_stat(regular if Path(path) == fifo else path, *args, **kw)

    monkeypatch.setattr(prompt_input.os, "stat", stat_before_the_swap)
    try:
        with pytest.raises(UsageError, match=r"is a named pipe \(FIFO\)"):
            returns_within(lambda: read_attachment(fifo), "reading a swapped-in FIFO")
    finally:
        try:  # had the open blocked, a writer releases the stuck thread
            os.close(os.open(fifo, os.O_WRONLY | os.O_NONBLOCK))
        except OSError:
            pass  # no reader: nothing is stuck


def test_a_file_over_the_limit_is_refused_reading_at_most_one_byte_past_it(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    big = tmp_path / "big.txt"
    big.write_bytes(b"a" * 5000)
    with pytest.raises(UsageError, match=r"-f .*big.txt: 5,000 bytes is over the 1,000-byte limit"):
        read_attachment(big, limit=1000)
    # a file whose size says 0 (as /proc files do, or one growing after fstat): the read
    # itself stops one byte past the limit
    read_sizes: list[int] = []
    real_read, real_stat, real_fstat = os.read, os.stat, os.fstat

    def counted_read(fd: int, n: int) -> bytes:
        data = real_read(fd, n)
        read_sizes.append(len(data))
        return data

    def sized_zero(real: Callable[..., os.stat_result]) -> Callable[..., os.stat_result]:
        def stat(target: Any, *args: Any, **kw: Any) -> os.stat_result:
            st = list(real(target, *args, **kw))
            st[6] = 0  # st_size
            return os.stat_result(st)

        return stat

    monkeypatch.setattr(prompt_input.os, "read", counted_read)
    monkeypatch.setattr(prompt_input.os, "stat", sized_zero(real_stat))
    monkeypatch.setattr(prompt_input.os, "fstat", sized_zero(real_fstat))
    with pytest.raises(
        UsageError, match=r"big.txt: is over the 1,000-byte limit; nothing was sent"
    ):
        read_attachment(big, limit=1000)
    assert sum(read_sizes) == 1001


def test_a_file_at_the_limit_is_attached_whole(tmp_path: Path) -> None:
    exact = tmp_path / "exact.txt"
    exact.write_bytes(b"b" * 1000)
    assert read_attachment(exact, limit=1000) == "b" * 1000


# ---- piped stdin: capped, with a clear error ----


def test_piped_stdin_over_the_cap_is_refused_and_nothing_is_sent(
    tmp_path: Path, server: fs.FakeServer
) -> None:
    cb = _cb(tmp_path, server)
    proc = cb.invoke("ask", "summarise", input="x" * (MAX_INPUT_BYTES + 1))
    assert proc.returncode == EXIT_USAGE
    line = _one_error_line(proc.stderr)
    assert f"piped input is over the {MAX_INPUT_BYTES:,}-byte limit; nothing was sent" in line
    assert "head -n" in line  # says how to send less
    assert server.requests == [] and cb.session_files() == []


def test_piped_stdin_at_the_cap_is_sent_whole(tmp_path: Path, server: fs.FakeServer) -> None:
    cb = _cb(tmp_path, server)
    server.add(fs.text("ok"))
    piped = "y" * (MAX_INPUT_BYTES - 1) + "\n"
    proc = cb.invoke("ask", "count them", input=piped)
    assert proc.returncode == 0, proc.stderr
    sent = server.chat_bodies()[0]["messages"][-1]["content"]
    assert sent == "count them\n\n" + piped.rstrip("\n")
    assert cb.only_session()["messages"][0]["content"] == sent


def test_endless_stdin_stops_at_the_cap(tmp_path: Path, server: fs.FakeServer) -> None:
    """`countbot ask < /dev/zero` ends with the cap error instead of reading forever."""
    cb = _cb(tmp_path, server)
    with open("/dev/zero", "rb") as zero:
        proc = subprocess.run(
            [COUNTBOT, "ask", "x"],
            stdin=zero,
            capture_output=True,
            text=True,
            cwd=cb.work,
            env=cb.env,
            timeout=30,  # the hang bound: reading forever fails the test here
        )
    assert proc.returncode == EXIT_USAGE
    assert "byte limit; nothing was sent" in _one_error_line(proc.stderr)
    assert server.requests == []


def test_stdin_reader_takes_at_most_the_cap_from_the_stream() -> None:
    raw = io.BytesIO(b"z" * (3 * 1000))
    stdin = io.TextIOWrapper(io.BufferedReader(raw, buffer_size=64), encoding="utf-8")
    with pytest.raises(UsageError, match="piped input is over the 1,000-byte limit"):
        read_stdin(stdin, limit=1000)
    assert raw.tell() <= 1000 + 1 + 64  # the cap, one byte, at most one buffer's read-ahead


def test_stdin_that_is_not_utf8_is_a_usage_error_not_silently_dropped() -> None:
    stdin = io.TextIOWrapper(io.BytesIO(b"caf\xe9\n"), encoding="utf-8", errors="strict")
    with pytest.raises(UsageError, match="piped input is not utf-8 text; nothing was sent"):
        read_stdin(stdin)


def test_text_only_stdin_is_measured_in_bytes() -> None:
    assert read_stdin(io.StringIO("中" * 333), limit=999) == "中" * 333
    with pytest.raises(UsageError, match="1,002 bytes is over the 999-byte limit"):
        read_stdin(io.StringIO("中" * 334), limit=999)


def test_over_cap_stdin_in_process_fails_before_any_session(
    isolated: Path, server: fs.FakeServer
) -> None:
    _write_config(isolated, server)
    opts = AskOptions(prompt=["hi"], config=str(isolated))
    with pytest.raises(UsageError) as info:
        run_ask(opts, stdin=io.StringIO("q" * (MAX_INPUT_BYTES + 1)), out=io.StringIO())
    assert info.value.exit_code == EXIT_USAGE
    assert server.requests == []
    assert not list((isolated.parent / "sessions").glob("*.json"))


# ---- output: nothing server-supplied reaches the terminal raw ----

HOSTILE_IDS = [
    "clip\x1b]52;c;cm0gLXJmIH4=\x07board",
    "\x1b]0;pwned title\x07titled",
    "clear\x1b[2J\x1b[Hed",
    "moved\x1b[10;10H\x1b[5A\x1b[?25l",
    "c1\x9b31m\x9d0;t\x9c-model",
    "bidi\u202eledom",
]
CLEAN_IDS = ["clipboard", "titled", "cleared", "moved", "c1-model", "bidiledom"]


def test_models_prints_hostile_ids_without_their_escapes(
    tmp_path: Path, server: fs.FakeServer
) -> None:
    cb = _cb(tmp_path, server)
    server.models = HOSTILE_IDS
    proc = cb.invoke("models")
    assert proc.returncode == 0, proc.stderr
    assert sorted(proc.stdout.splitlines()) == sorted(CLEAN_IDS)  # the client sorts them
    assert not [c for c in ESCAPES if c in proc.stdout]


def test_models_json_keeps_the_exact_ids_but_no_raw_escapes(
    tmp_path: Path, server: fs.FakeServer
) -> None:
    cb = _cb(tmp_path, server)
    server.models = HOSTILE_IDS
    proc = cb.invoke("models", "--json")
    assert proc.returncode == 0, proc.stderr
    assert not [c for c in ESCAPES if c in proc.stdout] and "\u202e" not in proc.stdout
    assert sorted(json.loads(proc.stdout)["models"]) == sorted(HOSTILE_IDS)


def test_config_check_shows_server_error_text_and_ids_sanitised(
    tmp_path: Path, server: fs.FakeServer
) -> None:
    cb = _cb(tmp_path, server)
    server.models = HOSTILE_IDS  # test-model is not among them: the ids appear in a hint
    server.add(fs.status(404, {"error": {"message": "no \x1b]0;pwned\x07such\x1b[2J model"}}))
    proc = cb.invoke("config", "check")
    assert not [c for c in ESCAPES if c in proc.stdout + proc.stderr]
    assert "titled" in proc.stdout and "no such model" in proc.stdout


def test_ask_json_escapes_c1_controls_in_the_answer(tmp_path: Path, server: fs.FakeServer) -> None:
    cb = _cb(tmp_path, server)
    answer = "csi\x9b2J osc\x9d0;t\x9c del\x7f"
    server.add(fs.text(answer, chunk_size=3))
    proc = cb.invoke("ask", "--json", "hi")
    assert proc.returncode == 0, proc.stderr
    assert not [c for c in (*ESCAPES, "\x7f") if c in proc.stdout]
    assert json.loads(proc.stdout)["answer"] == answer


@pytest.mark.parametrize("chunk_size", [1, 2, 3, 5, 8])
def test_plain_answer_is_the_same_however_the_stream_cuts_a_sequence(
    isolated: Path, server: fs.FakeServer, chunk_size: int
) -> None:
    _write_config(isolated, server)
    answer = "before \x1b]0;TITLE\x07 mid \x1b]52;c;Zm9v\x1b\\ csi \x1b[2J\x1b[10;4H end\r\n"
    server.add(fs.text(answer, chunk_size=chunk_size))
    out, err = io.StringIO(), io.StringIO()
    code = run_ask(
        AskOptions(prompt=["hi"], config=str(isolated)), stdin=io.StringIO(""), out=out, err=err
    )
    assert code == 0, err.getvalue()
    assert out.getvalue() == "before  mid  csi  end\n"
    files = [p for p in (isolated.parent / "sessions").glob("*.json") if p.name != "index.json"]
    saved = json.loads(files[0].read_text("utf-8"))
    assert [m["content"] for m in saved["messages"]] == ["hi", answer]
