"""Models pulled for the embedded provider: the curated catalogue, and the folder they live in.

`countbot models pull NAME` fetches a catalogue entry (a GGUF file on the Hugging Face Hub);
`pull URL` any GGUF. A pulled model is `<models folder>/<name>.gguf` with its record beside
it (`<name>.json`: where it came from, its sha256, its size); `-p local -m NAME` and
`local: model: NAME` find it here. The folder is `$XDG_DATA_HOME/countbot/models` (else
`~/.local/share/countbot/models`): the files are large and fetched again on demand, so they
stay out of the config folder, which a user may sync. The invariant: a `<name>.gguf` is only
ever a complete, checked file (a download in progress is `<name>.gguf.part`), so every model
listed here can be loaded.
"""

from __future__ import annotations

import json
import os
import re
from collections.abc import Mapping
from pathlib import Path
from typing import NamedTuple

from countbot_cli.config.file import user_home

PULLED_CONTEXT_WINDOW = 8192  # what a pulled model is loaded with unless context_window says
PULLED_CONTEXT_WINDOW_SOURCE = (
    f"the {PULLED_CONTEXT_WINDOW:,} tokens countbot loads a pulled model with"
)
NAME = re.compile(r"^[a-z0-9][a-z0-9._-]{0,63}$")


class CatalogueEntry(NamedTuple):
    """One model `models pull NAME` knows: a GGUF file in a Hub repository."""

    name: str
    repo: str
    file: str
    size: int  # bytes, about (the Hub's own figure is the one checked)
    licence: str
    good_for: str


_GB = 1_000_000_000
CATALOGUE: tuple[CatalogueEntry, ...] = (
    CatalogueEntry(
        "qwen3-0.6b",
        "Qwen/Qwen3-0.6B-GGUF",
        "Qwen3-0.6B-Q8_0.gguf",
        int(0.64 * _GB),
        "Apache-2.0",
        "the smallest that calls tools reliably; quick answers on any laptop",
    ),
    CatalogueEntry(
        "qwen3-1.7b",
        "Qwen/Qwen3-1.7B-GGUF",
        "Qwen3-1.7B-Q8_0.gguf",
        int(1.83 * _GB),
        "Apache-2.0",
        "the best all-rounder here: tools, code, several languages",
    ),
    CatalogueEntry(
        "qwen2.5-1.5b",
        "Qwen/Qwen2.5-1.5B-Instruct-GGUF",
        "qwen2.5-1.5b-instruct-q4_k_m.gguf",
        int(1.12 * _GB),
        "Apache-2.0",
        "steady instruction following and tool calls, no thinking pass",
    ),
    CatalogueEntry(
        "smollm2-1.7b",
        "HuggingFaceTB/SmolLM2-1.7B-Instruct-GGUF",
        "smollm2-1.7b-instruct-q4_k_m.gguf",
        int(1.06 * _GB),
        "Apache-2.0",
        "English chat and summaries; the bundled model's big sibling",
    ),
    CatalogueEntry(
        "llama-3.2-1b",
        "bartowski/Llama-3.2-1B-Instruct-GGUF",
        "Llama-3.2-1B-Instruct-Q4_K_M.gguf",
        int(0.81 * _GB),
        "Llama 3.2 Community Licence",
        "fast English chat with tool calls",
    ),
)


def catalogue_entry(name: str) -> CatalogueEntry | None:
    key = name.strip().lower()
    return next((e for e in CATALOGUE if e.name == key), None)


def models_dir(env: Mapping[str, str] | None = None) -> Path:
    """Where pulled models live (see the module)."""
    env = os.environ if env is None else env
    xdg = env.get("XDG_DATA_HOME", "").strip()
    base = Path(xdg) if xdg and os.path.isabs(xdg) else user_home(env) / ".local" / "share"
    return base / "countbot" / "models"


class Pulled(NamedTuple):
    """A model in the folder: its file and what its record says."""

    name: str
    path: Path
    size: int
    source: str  # the catalogue's repo/file, or the URL it came from
    sha256: str


def model_file(folder: Path, name: str) -> Path:
    return folder / f"{name}.gguf"


def record_file(folder: Path, name: str) -> Path:
    return folder / f"{name}.json"


def pulled_models(folder: Path | None = None) -> list[Pulled]:
    """Every complete model in the folder, by name (a file without a readable record too)."""
    folder = models_dir() if folder is None else folder
    try:
        files = sorted(p for p in folder.glob("*.gguf") if p.is_file())
    except OSError:
        return []
    return [_pulled(folder, f.stem) for f in files if NAME.match(f.stem)]


def find_pulled(name: str, folder: Path | None = None) -> Pulled | None:
    """The pulled model called `name` (any case), or None."""
    folder = models_dir() if folder is None else folder
    key = name.strip().lower()
    if not NAME.match(key) or not model_file(folder, key).is_file():
        return None
    return _pulled(folder, key)


def _pulled(folder: Path, name: str) -> Pulled:
    path = model_file(folder, name)
    try:
        record = json.loads(record_file(folder, name).read_text(encoding="utf-8"))
    except (OSError, ValueError):
        record = {}
    record = record if isinstance(record, dict) else {}
    try:
        size = path.stat().st_size
    except OSError:
        size = 0
    return Pulled(
        name, path, size, str(record.get("source") or "?"), str(record.get("sha256") or "")
    )


def known_names(folder: Path | None = None) -> list[str]:
    """Names `-m` may give the embedded provider: pulled ones, then the catalogue's."""
    pulled = [p.name for p in pulled_models(folder)]
    return pulled + [e.name for e in CATALOGUE if e.name not in pulled]
