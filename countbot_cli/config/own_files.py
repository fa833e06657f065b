"""Countbot's own files: the one list of what countbot keeps for itself (SPEC §6).

The file tools never read or write one of these without asking, not with `--yes`, `/tools
auto`, "always" or `allow_outside_workspace`: `OwnFiles.paths` (each file, a folder's whole
contents, their locks and copies moved aside), `OwnFiles.families` (every `MEMORY.<anything>`
beside MEMORY.md) and the cache folder. The invariant: a new file countbot keeps for itself gets
its name here (`DATA_FILES` for the data folder) or lives beside MEMORY.md as
`MEMORY.<something>`, and the modules that write them take their names from here. Why each
matters: docs/design/tools.md.
"""

from __future__ import annotations

import os
import re
from collections.abc import Iterable
from pathlib import Path
from typing import NamedTuple

from countbot_cli.config.home import cache_home

COSTS_FILE = "costs.json"  # the day's total cost (config/prices.py)
SAVED_FILE = "cache_savings.json"  # what cached tokens saved each day (config/prices.py)
CONTEXT_WINDOWS_FILE = (
    "context_windows.json"  # servers' context windows (provider/context_window_probe.py)
)
RATIOS_FILE = ".countbot_tokens.json"  # learned token ratios (conversation/budget.py)
HISTORY_FILE = ".countbot_history"  # the REPL's input history (repl/loop.py)
SERVERS_FILE = "servers.json"  # what each server said it is (provider/server_facts.py)
NOTICES_FILE = "notices.json"  # the notices said today, said once a day (app.py)
DATA_FILES = (
    COSTS_FILE,
    SAVED_FILE,
    CONTEXT_WINDOWS_FILE,
    RATIOS_FILE,
    HISTORY_FILE,
    SERVERS_FILE,
    NOTICES_FILE,
)
SEARCH_INDEX_FILE = (
    "search-index.sqlite3"  # in the sessions folder (conversation/sessions/search.py)
)
SEARCH_VECTORS_FILE = "search-vectors.bin"  # ... beside it (memory/session_meaning.py)
VECTORS_SUFFIX = ".vectors.bin"  # MEMORY.md -> MEMORY.vectors.bin (memory/vectors.py)
# (the recall model's load, speedups/usem3_load.py, is in the cache folder: its own names)
OLD_MODEL_CACHE_SUFFIX = ".recall-model.bin"  # where it was before (beside MEMORY.md): removed
MARKS_SUFFIX = ".marks.json"  # MEMORY.md -> MEMORY.marks.json (memory/marks.py)
ARCHIVE_SUFFIX = ".archive.jsonl"  # MEMORY.md -> MEMORY.archive.jsonl (memory/archive.py)
SOURCES_SUFFIX = ".sources.jsonl"  # MEMORY.md -> MEMORY.sources.jsonl (memory/sources.py)

_COMPANION = re.compile(r"\.(lock|[a-z]+-\d{8}T\d{6}Z(-\d+)?)")  # after the name
REASON = "countbot's own file (config, sessions, memory or countbot's state)"


def memory_sidecar(memory_file: Path, suffix: str) -> Path:
    """MEMORY.md -> MEMORY<suffix>, in the same folder."""
    return memory_file.with_name(memory_file.stem + suffix)


def _forms(path: Path) -> set[Path]:
    """The path as given (its folder resolved) and fully resolved: a symlinked MEMORY.md keeps
    its sidecars beside the link's target."""
    folder = Path(os.path.realpath(path.parent))
    return {folder / path.name, Path(os.path.realpath(path))}


def _in_family(path: Path, member: Path) -> bool:
    return path.parent == member.parent and path.name.startswith(member.name + ".")


def _companion(path: Path, own: Path) -> bool:
    """`own`'s lock file, or a copy of it moved aside (fileio.move_aside)."""
    name = path.name
    if path.parent != own.parent or not name.startswith(own.name):
        return False
    return _COMPANION.fullmatch(name, len(own.name)) is not None


class OwnFiles(NamedTuple):
    """Which resolved paths are countbot's own (see the module docstring)."""

    paths: tuple[Path, ...] = ()
    families: tuple[Path, ...] = ()  # a file whose folder's STEM.<anything> files are own

    def reason(self, path: Path) -> str | None:
        """Why the resolved `path` is countbot's own, or None."""
        for own in (f for p in self.paths for f in _forms(p)):
            if path == own or path.is_relative_to(own) or _companion(path, own):
                return REASON
        for member in (f for p in self.families for f in _forms(p)):
            if _in_family(path, member.with_name(member.stem)):
                return REASON
        return None


def collect(
    *,
    config_file: Path | None,
    sessions_dir: Path,
    memory_file: Path,
    data_dir: Path,
    others: Iterable[Path | None] = (),
) -> OwnFiles:
    """The own files of one configuration (and the cache folder); `others`: files kept
    elsewhere (the trust store, saved approvals)."""
    paths = [config_file, sessions_dir, memory_file, *(data_dir / n for n in DATA_FILES), *others]
    paths.append(cache_home(os.environ))
    return OwnFiles(
        paths=tuple(p for p in paths if p is not None),
        families=(memory_file,),
    )
