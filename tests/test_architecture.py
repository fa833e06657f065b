"""The package's structure, checked as a test (docs/ARCHITECTURE.md draws it).

- Layers: a module imports only from its own layer or below (type-only and in-function imports
  count too). Lowest first: core, config, provider, tools, conversation, memory, ui, repl, app,
  cli.
- No import circles between modules.
- rich, prompt_toolkit and typer (and what they bring: pygments, markdown_it) are imported only in
  `ui/`, `repl/` and `cli/`.
- No module over its line budget.
"""

from __future__ import annotations

import ast
from collections.abc import Iterator
from pathlib import Path

import pytest

PACKAGE = Path(__file__).resolve().parents[1] / "countbot_cli"
LAYERS = [
    "core",
    "config",
    "provider",
    "tools",
    "conversation",
    "memory",
    "ui",
    "repl",
    "app",
    "cli",
]
TERMINAL_LIBRARIES = {"rich", "prompt_toolkit", "typer", "click", "pygments", "markdown_it"}
TERMINAL_LAYERS = {"ui", "repl", "cli"}
LINE_BUDGET = 500


def module_name(path: Path) -> str:
    parts = list(path.relative_to(PACKAGE.parent).with_suffix("").parts)
    if parts[-1] == "__init__":
        parts.pop()
    return ".".join(parts)


def modules() -> dict[str, Path]:
    return {module_name(p): p for p in sorted(PACKAGE.rglob("*.py"))}


def layer(module: str) -> str:
    parts = module.split(".")
    if len(parts) > 1 and parts[1] in LAYERS:
        return parts[1]
    if parts[-1] == "app":
        return "app"
    if parts[-1] == "__main__":
        return "cli"
    return "core"


def imports(path: Path, module: str) -> Iterator[tuple[str, int]]:
    """Every imported module name (absolute), with its line; `from X import y` yields X.y too."""
    tree = ast.parse(path.read_text("utf-8"))
    is_package = path.name == "__init__.py"
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            for alias in node.names:
                yield alias.name, node.lineno
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                parts = module.split(".")
                keep = len(parts) - node.level + (1 if is_package else 0)
                base = ".".join(parts[:keep] + ([base] if base else []))
            yield base, node.lineno
            for alias in node.names:
                yield f"{base}.{alias.name}", node.lineno


def internal_graph() -> dict[str, dict[str, int]]:
    known = modules()
    graph: dict[str, dict[str, int]] = {}
    for name, path in known.items():
        edges: dict[str, int] = {}
        for target, line in imports(path, name):
            if target in known and target != name and not name.startswith(target + "."):
                edges.setdefault(target, line)
        graph[name] = edges
    return graph


def test_the_package_is_found() -> None:
    assert len(modules()) > 40 and "countbot_cli.conversation.engine" in modules()


def test_no_module_imports_from_a_higher_layer() -> None:
    wrong = [
        f"{name}:{line} ({layer(name)}) imports {target} ({layer(target)})"
        for name, edges in internal_graph().items()
        for target, line in edges.items()
        if LAYERS.index(layer(target)) > LAYERS.index(layer(name))
    ]
    assert wrong == []


def test_there_are_no_import_circles() -> None:
    graph = internal_graph()
    circles: list[list[str]] = []
    state: dict[str, int] = {}

    def visit(node: str, trail: list[str]) -> None:
        state[node] = 1
        for nxt in graph[node]:
            if state.get(nxt) == 1:
                circles.append(trail[trail.index(nxt) :] + [nxt])
            elif nxt not in state:
                visit(nxt, [*trail, nxt])
        state[node] = 2

    for start in graph:
        if start not in state:
            visit(start, [start])
    assert circles == []


def test_terminal_libraries_stay_in_the_terminal_layers() -> None:
    wrong = [
        f"{name}:{line} imports {target}"
        for name, path in modules().items()
        if layer(name) not in TERMINAL_LAYERS
        for target, line in imports(path, name)
        if target.split(".")[0] in TERMINAL_LIBRARIES
    ]
    assert wrong == []


@pytest.mark.parametrize("name", sorted(modules()))
def test_module_within_line_budget(name: str) -> None:
    lines = len(modules()[name].read_text("utf-8").splitlines())
    assert lines <= LINE_BUDGET, f"{name} has {lines} lines (budget {LINE_BUDGET}): split it"


def test_the_architecture_page_lists_every_module() -> None:
    page = (PACKAGE.parent / "docs" / "ARCHITECTURE.md").read_text("utf-8")
    missing = [
        name
        for name, path in modules().items()
        if path.name != "__init__.py" and str(path.relative_to(PACKAGE)) not in page
    ]
    assert missing == []
