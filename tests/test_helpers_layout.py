"""Where test code lives: what several test modules share is in
tests/helpers/ (on the import path by conftest.py), so no test module imports another test
module, and a helper module is not named like a test module (pytest would collect it)."""

from __future__ import annotations

import ast
from pathlib import Path

TESTS = Path(__file__).resolve().parent
HELPERS = TESTS / "helpers"


def _imported(path: Path) -> set[str]:
    tree = ast.parse(path.read_text(encoding="utf-8"))
    names: set[str] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            names.update(alias.name.split(".")[0] for alias in node.names)
        elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            names.add(node.module.split(".")[0])
    return names


def test_no_test_module_imports_another_test_module() -> None:
    offenders = [
        f"{path.relative_to(TESTS)} imports {name}"
        for path in sorted(TESTS.rglob("*.py"))
        for name in sorted(_imported(path))
        if name.startswith("test_") or name == "tests"
    ]
    assert offenders == [], "move what they share into tests/helpers/: " + "; ".join(offenders)


def test_helpers_are_not_collected_as_tests() -> None:
    assert [p.name for p in HELPERS.glob("test_*.py")] == []
