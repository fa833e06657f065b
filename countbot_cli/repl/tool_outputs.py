"""The full output of every tool call of this REPL, for `/last-tool`.

What the model gets is capped (head and tail, the middle elided); the whole output as captured
is kept here for the REPL's lifetime, one file per call in a private temporary folder (mode
0700, each file 0600), removed when the REPL ends (and at interpreter exit as a fallback).
"""

from __future__ import annotations

import atexit
import os
import shutil
import tempfile
from pathlib import Path


class ToolOutputs:
    def __init__(self) -> None:
        self.folder: Path | None = None
        self._calls: list[tuple[str, Path]] = []

    def keep(self, call: str, output: str) -> Path:
        """Write one call's full output to its own private file."""
        if self.folder is None:
            self.folder = Path(tempfile.mkdtemp(prefix="countbot-tools-"))  # 0700
            atexit.register(self.close)
        path = self.folder / f"{len(self._calls) + 1:04d}.txt"
        fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
        with os.fdopen(fd, "w", encoding="utf-8", errors="replace") as f:
            f.write(output)
        self._calls.append((call, path))
        return path

    def last(self) -> tuple[str, str] | None:
        """(name and arguments, full output) of the latest call, or None."""
        if not self._calls:
            return None
        call, path = self._calls[-1]
        try:
            return call, path.read_text("utf-8", errors="replace")
        except OSError as exc:
            return call, f"(the saved output cannot be read: {exc.strerror})"

    def close(self) -> None:
        if self.folder is not None:
            shutil.rmtree(self.folder, ignore_errors=True)
            self.folder = None
            atexit.unregister(self.close)
        self._calls.clear()
