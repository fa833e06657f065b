"""MEMORY.md on disk: symlinks, stale temp files, the lock, unusable paths, two processes
appending at once and SIGKILL during writes."""

from __future__ import annotations

import fcntl
import signal
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest
from waits import wait_until

from countbot_cli.config.derived import lock_file
from countbot_cli.errors import DamagedDataError, StorageError
from countbot_cli.memory.store import DEFAULT_HEADER, MemoryStore


@pytest.fixture
def path(tmp_path: Path) -> Path:
    return tmp_path / "MEMORY.md"


def contents(store: MemoryStore) -> list[str]:
    return [e.content for e in store.entries()]


# ---- files, locks, processes ----


def test_writes_go_through_a_symlink_and_clear_stale_temp_files(tmp_path: Path) -> None:
    real = tmp_path / "data" / "MEMORY.md"
    link = tmp_path / "MEMORY.md"
    real.parent.mkdir()
    link.symlink_to(real)
    stale = real.parent / ".MEMORY.md.abc123.tmp"
    stale.write_text("half a file")
    MemoryStore(link).add("via link", date="2024-01-01")
    assert link.is_symlink()
    assert real.read_text(encoding="utf-8").endswith("2024-01-01|user|via link\n")
    assert not stale.exists()
    assert sorted(p.name for p in real.parent.iterdir()) == ["MEMORY.md"]  # its lock: cached


def test_lock_held_elsewhere_times_out_with_storage_error(path: Path) -> None:
    store = MemoryStore(path, lock_timeout=0.2)
    store.add("first")
    before = path.read_bytes()
    with open(lock_file(path), "a") as held:
        fcntl.flock(held.fileno(), fcntl.LOCK_EX)
        with pytest.raises(StorageError, match="busy in another countbot process") as err:
            store.add("second")
        assert err.value.hint == "waited 0.2 s for MEMORY.md.lock"  # then gave up
    assert path.read_bytes() == before
    assert store.add("second") is not None  # lock released


def test_unusable_paths_are_storage_errors(tmp_path: Path) -> None:
    folder = tmp_path / "is_a_dir"
    folder.mkdir()
    with pytest.raises(DamagedDataError, match="is a folder, not the memory file") as info:
        MemoryStore(folder).entries()
    assert info.value.exit_code == 2  # not a bug: the user can move the folder
    with pytest.raises(DamagedDataError, match="is a folder"):
        MemoryStore(folder).add("x")
    not_a_dir = tmp_path / "file"
    not_a_dir.write_text("")
    for use in (lambda s: s.add("x"), lambda s: s.entries()):
        with pytest.raises(StorageError, match=f"{not_a_dir} is a file, not a folder") as info:
            use(MemoryStore(not_a_dir / "MEMORY.md"))
        assert info.value.exit_code == 2  # the user's to fix, as the message says


APPENDER = textwrap.dedent(
    """
    import sys, time
    from pathlib import Path
    from countbot_cli.memory.store import MemoryStore
    path, tag, count, go = Path(sys.argv[1]), sys.argv[2], int(sys.argv[3]), Path(sys.argv[4])
    store = MemoryStore(path, lock_timeout=60)
    Path(f"{go}.{tag}").touch()  # ready
    while not go.exists():
        time.sleep(0.001)
    for i in range(count):
        assert store.add(f"{tag} entry {i}", source="tool") is not None
    """
)


def test_two_processes_appending_at_once_lose_nothing(path: Path, tmp_path: Path) -> None:
    go = tmp_path / "go"
    procs = [
        subprocess.Popen([sys.executable, "-c", APPENDER, str(path), tag, "200", str(go)])
        for tag in ("left", "right")
    ]
    for tag in ("left", "right"):  # both started, they start appending together
        wait_until(Path(f"{go}.{tag}").exists, f"the {tag} appender to start", 60)
    go.touch()
    assert [p.wait(timeout=120) for p in procs] == [0, 0]
    found = contents(MemoryStore(path))
    expected = {f"{tag} entry {i}" for tag in ("left", "right") for i in range(200)}
    assert len(found) == 400 and set(found) == expected
    assert MemoryStore(path).stats().unparsed_lines == ()


KILLED_WRITER = textwrap.dedent(
    """
    import os, signal, sys
    from pathlib import Path
    from countbot_cli.memory.store import MemoryStore
    store = MemoryStore(Path(sys.argv[1]))
    tag, last, stage = sys.argv[2], int(sys.argv[3]), sys.argv[4]
    armed = False  # True during the add that is killed at `stage`

    def stop(where):
        print("at", where, flush=True)
        signal.pause()  # the parent's SIGKILL lands here

    real_write, real_fsync, real_replace = os.write, os.fsync, os.replace

    def write(fd, data):
        if armed and stage == "write":  # half the new file written
            real_write(fd, memoryview(data)[: len(data) // 2])
            stop(stage)
        return real_write(fd, data)

    def fsync(fd):
        if armed and stage == "fsync":  # the whole new file written, not yet on disk or renamed
            stop(stage)
        return real_fsync(fd)

    def replace(src, dst):
        real_replace(src, dst)
        if armed and stage == "replace":  # renamed, the folder not yet fsynced, lock held
            stop(stage)

    os.write, os.fsync, os.replace = write, fsync, replace
    print("ready", flush=True)
    for i in range(last + 1):
        armed = i == last
        if store.add(f"{tag} fact {i} " + "x" * 40, source="auto-memory") is not None:
            print(i, flush=True)
    stop("between")
    """
)
STAGES = ("write", "fsync", "replace", "between")


@pytest.mark.slow
def test_sigkill_during_writes_never_corrupts_or_loses_returned_entries(path: Path) -> None:
    """Each writer stops itself at a known point of its last write (half the temp file written,
    before the fsync, after the rename, after the write returned) and is killed there: the
    file stays whole and holds every entry an add returned, whatever the machine's speed."""
    MemoryStore(path).add_many([f"seed {i} " + "y" * 60 for i in range(3000)], source="user")
    confirmed: set[str] = set()
    for run, (stage, last) in enumerate((s, n) for n in (0, 3, 11) for s in STAGES):
        proc = subprocess.Popen(
            [sys.executable, "-c", KILLED_WRITER, str(path), f"run{run}", str(last), stage],
            stdout=subprocess.PIPE,
            text=True,
        )
        assert proc.stdout is not None
        assert proc.stdout.readline() == "ready\n"
        done = []
        while (line := proc.stdout.readline()) != f"at {stage}\n":
            assert line.strip().isdigit(), (stage, line)
            done.append(int(line))
        temps = [p.name for p in path.parent.iterdir() if p.name.endswith(".tmp")]
        assert bool(temps) == (stage in ("write", "fsync")), (stage, temps)  # killed mid-write
        proc.send_signal(signal.SIGKILL)
        proc.communicate(timeout=30)
        assert proc.returncode == -signal.SIGKILL
        assert done == list(range(last + (stage == "between")))
        confirmed |= {f"run{run} fact {i} " + "x" * 40 for i in done}
        store = MemoryStore(path)
        found = contents(store)
        assert store.stats().unparsed_lines == ()
        assert len(found) == len(set(found))
        assert confirmed <= set(found)
        killed = f"run{run} fact {last} " + "x" * 40  # the write cut short: all or nothing
        assert (killed in found) == (stage in ("replace", "between")), stage
        assert path.read_bytes().startswith(DEFAULT_HEADER.encode())
    MemoryStore(path).add("after the storm")
    assert [p.name for p in path.parent.iterdir() if p.name.endswith(".tmp")] == []
