"""The Makefile's install steps say what they do (`make run` must not stay silent for 10+
minutes behind `pip -q` while llama.cpp compiles). `make -n` prints the recipe without running
it; `-W pyproject.toml` makes the install stamps out of date, as on a fresh clone."""

from __future__ import annotations

import shutil
import subprocess
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parent.parent


@pytest.mark.parametrize("target", ["run", "test"])
def test_the_install_says_it_compiles_llama_cpp_and_shows_pips_progress(target: str) -> None:
    make = shutil.which("make")
    assert make is not None, "make is needed to build countbot (`make run`, `make test`)"
    proc = subprocess.run(
        [make, "-n", "-W", "pyproject.toml", target],
        cwd=REPO,
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert proc.returncode == 0, proc.stderr
    lines = proc.stdout.splitlines()
    install = next(i for i, line in enumerate(lines) if "pip install" in line)
    note = next(i for i, line in enumerate(lines) if "compiles llama.cpp" in line)
    assert note < install and "10-15 minutes" in lines[note]
    assert " -q" not in lines[install] and "--quiet" not in lines[install]
