"""MEMORY.md on disk: symlinks, stale temp files, the lock, unusable paths, two processes
appending at once and SIGKILL during writes."""

from __future__ import annotations

import fcntl
import random
import signal
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import pytest

from countbot_cli.errors import StorageError
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
    assert sorted(p.name for p in real.parent.iterdir()) == ["MEMORY.md", "MEMORY.md.lock"]


def test_lock_held_elsewhere_times_out_with_storage_error(path: Path) -> None:
    store = MemoryStore(path, lock_timeout=0.2)
    store.add("first")
    before = path.read_bytes()
    with open(str(path) + ".lock", "a") as held:
        fcntl.flock(held.fileno(), fcntl.LOCK_EX)
        t0 = time.monotonic()
        with pytest.raises(StorageError, match="busy in another countbot process"):
            store.add("second")
        assert 0.15 < time.monotonic() - t0 < 2
    assert path.read_bytes() == before
    assert store.add("second") is not None  # lock released


def test_unusable_paths_are_storage_errors(tmp_path: Path) -> None:
    folder = tmp_path / "is_a_dir"
    folder.mkdir()
    with pytest.raises(StorageError, match="cannot read"):
        MemoryStore(folder).entries()
    with pytest.raises(StorageError, match="cannot"):
        MemoryStore(folder).add("x")
    not_a_dir = tmp_path / "file"
    not_a_dir.write_text("")
    with pytest.raises(StorageError, match="cannot"):
        MemoryStore(not_a_dir / "MEMORY.md").add("x")
    with pytest.raises(StorageError, match="Not a directory"):
        MemoryStore(not_a_dir / "MEMORY.md").entries()


APPENDER = textwrap.dedent(
    """
    import sys, time
    from pathlib import Path
    from countbot_cli.memory.store import MemoryStore
    path, tag, count, go = Path(sys.argv[1]), sys.argv[2], int(sys.argv[3]), Path(sys.argv[4])
    store = MemoryStore(path, lock_timeout=60)
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
    time.sleep(0.3)
    go.touch()
    assert [p.wait(timeout=120) for p in procs] == [0, 0]
    found = contents(MemoryStore(path))
    expected = {f"{tag} entry {i}" for tag in ("left", "right") for i in range(200)}
    assert len(found) == 400 and set(found) == expected
    assert MemoryStore(path).stats().unparsed_lines == ()


KILLED_WRITER = textwrap.dedent(
    """
    import sys
    from pathlib import Path
    from countbot_cli.memory.store import MemoryStore
    store = MemoryStore(Path(sys.argv[1]))
    tag = sys.argv[2]
    print("ready", flush=True)
    for i in range(100000):
        if store.add(f"{tag} fact {i} " + "x" * 40, source="auto-memory") is not None:
            print(i, flush=True)
    """
)


@pytest.mark.slow
def test_sigkill_during_writes_never_corrupts_or_loses_returned_entries(path: Path) -> None:
    MemoryStore(path).add_many([f"seed {i} " + "y" * 60 for i in range(3000)], source="user")
    rng = random.Random(1234)
    confirmed: set[str] = set()
    mid_write = 0  # kills that left a temp file behind: they hit a write in progress
    for run in range(55):
        proc = subprocess.Popen(
            [sys.executable, "-c", KILLED_WRITER, str(path), f"run{run}"],
            stdout=subprocess.PIPE,
            text=True,
        )
        assert proc.stdout is not None
        assert proc.stdout.readline() == "ready\n"
        time.sleep(rng.uniform(0.0, 0.08))
        proc.send_signal(signal.SIGKILL)
        out, _ = proc.communicate(timeout=30)
        assert proc.returncode == -signal.SIGKILL
        mid_write += any(p.name.endswith(".tmp") for p in path.parent.iterdir())
        done = [line for line in out.split("\n") if line.isdigit()]
        confirmed |= {f"run{run} fact {i} " + "x" * 40 for i in done}
        store = MemoryStore(path)
        found = contents(store)
        assert store.stats().unparsed_lines == ()
        assert len(found) == len(set(found))
        assert confirmed <= set(found)
        assert path.read_bytes().startswith(DEFAULT_HEADER.encode())
    assert len(confirmed) > 55  # the kills did land between and during many writes
    assert mid_write >= 5, mid_write
    MemoryStore(path).add("after the storm")
    assert [p.name for p in path.parent.iterdir() if p.name.endswith(".tmp")] == []
