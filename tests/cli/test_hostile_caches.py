"""The caches countbot reads (the token ratios, the servers' context windows and kinds, the
sessions listing and the search index), each replaced by a FIFO, a symbolic link
to /dev/zero, a folder or an empty file, as a cloned repository or a bad disk could leave them:
`countbot ask` answers within its hang bound, in bounded memory, says one line a cache, and the
caches are built again; `sessions search` still finds the session."""

from __future__ import annotations

import json
import sys
from pathlib import Path

import fakeserver as fs
import pytest
from cbenv import CB, COUNTBOT, make_cb
from hostile_files import damage
from processes import run_measured

from countbot_cli.config.own_files import (
    CONTEXT_WINDOWS_FILE,
    RATIOS_FILE,
    SERVERS_FILE,
)
from countbot_cli.config.own_files import SEARCH_INDEX_FILE as INDEX_FILE
from countbot_cli.conversation.sessions.listing import INDEX_NAME

pytestmark = pytest.mark.skipif(sys.platform == "win32", reason="FIFOs and /dev/zero are POSIX")

BOUND = 60.0  # seconds: a hang bound (a FIFO read blocks forever), never a speed claim
PEAK_MIB = 300  # countbot ask takes about 35 MiB; reading /dev/zero whole takes everything
KINDS = {
    "fifo": "a named pipe (FIFO)",
    "zero": "a symbolic link",
    "folder": "a folder",
    "empty": "empty",
}


def _caches(cb: CB) -> list[Path]:
    """Where countbot keeps them (the data folder's derived files are in the cache folder)."""
    sessions = cb.sessions_dir
    return [
        cb.derived(cb.work, RATIOS_FILE),
        cb.derived(cb.work, CONTEXT_WINDOWS_FILE),
        cb.derived(cb.work, SERVERS_FILE),
        cb.derived(sessions, INDEX_NAME),
        cb.derived(sessions, INDEX_FILE),
        cb.derived(sessions, INDEX_FILE + "-wal"),
    ]


@pytest.mark.parametrize("kind", list(KINDS))
def test_every_cache_damaged_at_once_is_said_once_and_built_again(
    tmp_path: Path, server: fs.FakeServer, kind: str
) -> None:
    cb = make_cb(tmp_path, server.base_url)
    server.default = fs.text("the answer")
    assert cb.run("ask", "first question").returncode == 0  # every cache made once
    caches = _caches(cb)
    for path in caches:
        damage(path, kind)

    run = run_measured([COUNTBOT, "ask", "second question"], env=cb.env, cwd=cb.work, timeout=BOUND)
    assert run.returncode == 0, run.stderr
    assert run.stdout == "the answer\n"
    assert run.peak_mib < PEAK_MIB, run
    said = run.stderr.splitlines()
    # SQLite makes an empty index file itself: an empty one is a new index, not damage
    damaged = [p for p in caches if not (kind == "empty" and p.name.startswith(INDEX_FILE))]
    for path in damaged:
        (line,) = [ln for ln in said if ln.startswith(f"countbot: the cache {path} was ")]
        assert line.startswith(f"countbot: the cache {path} was {KINDS[kind]}"), line
        assert line.endswith("countbot builds it again"), line
        if kind != "empty":  # what is not a file is moved aside, never deleted
            assert ": moved aside to " in line
            (aside,) = path.parent.glob(path.name + ".damaged-*")
            assert aside.is_symlink() if kind == "zero" else aside.exists()
    assert len(said) == len(damaged), said  # nothing else: one line a cache
    listing = cb.derived(cb.sessions_dir, INDEX_NAME)
    assert listing.is_file() and not listing.is_symlink() and listing.stat().st_size > 0

    found = cb.run("sessions", "search", "second")
    assert found.returncode == 0, found.stderr
    assert "second question" in found.stdout
    assert found.stderr == ""  # said once: the caches were built again


@pytest.mark.parametrize("kind", ["fifo", "zero", "folder"])
def test_the_days_cost_tallies_not_files_are_moved_aside_and_counted_afresh(
    tmp_path: Path, server: fs.FakeServer, kind: str
) -> None:
    prices = {"test-model": {"input": 2.0, "cached_input": 0.5, "output": 8.0}}
    cb = make_cb(tmp_path, server.base_url, prices=prices)
    tallies = [cb.work / "costs.json", cb.work / "cache_savings.json"]
    for path in tallies:
        damage(path, kind)
    server.add(fs.text("a", usage=fs.cached_usage(1200, 85, 1100)))
    run = run_measured([COUNTBOT, "ask", "--json", "x"], env=cb.env, cwd=cb.work, timeout=BOUND)
    assert run.returncode == 0, run.stderr
    assert run.peak_mib < PEAK_MIB, run
    assert json.loads(run.stdout)["saved_today"] == pytest.approx(1100 * 1.5 / 1_000_000)
    for path in tallies:
        assert f"{path} held {KINDS[kind]}, not a file: moved aside" in run.stderr
        (aside,) = cb.work.glob(path.name + ".damaged-*")
        assert path.is_file() and not path.is_symlink()
