"""SIGTERM at each moment of start-up (importing, parsing the command line, loading the
settings, the first save) ends `countbot ask` with exit 130, never 1 (a bug's code) or a
traceback; signals held back around a save are delivered after it, with the save complete.

Deterministic: a sitecustomize on PYTHONPATH makes the countbot process send itself SIGTERM at
the named stage (when a module is first imported, or right after a function returned), instead
of a timer hoping to land there."""

from __future__ import annotations

import ast
import signal
import threading
from collections.abc import Iterator
from pathlib import Path

import fakeserver as fs
import pytest
from cbenv import COUNTBOT, make_cb

from countbot_cli import interrupts
from countbot_cli.errors import Terminated

SIGTERM_AT = """
import importlib.util, os, signal, sys

kind, _, target = os.environ["CB_SIGTERM_AT"].partition(":")
marker = os.environ["CB_SIGTERM_MARK"]


def term():
    open(marker, "w").close()
    os.kill(os.getpid(), signal.SIGTERM)


class Hook:
    def find_spec(self, name, path=None, target_=None):
        if kind == "import" and name == target:
            sys.meta_path.remove(self)
            term()
            return None
        if kind == "call" and name == target.split(":")[0]:
            sys.meta_path.remove(self)
            spec = importlib.util.find_spec(name)
            run = spec.loader.exec_module

            def exec_module(module):
                run(module)
                *path, attr = target.split(":")[1].split(".")
                owner = module
                for part in path:
                    owner = getattr(owner, part)
                fn = getattr(owner, attr)

                def then_term(*args, **kwargs):
                    result = fn(*args, **kwargs)
                    term()
                    return result

                setattr(owner, attr, then_term)

            spec.loader.exec_module = exec_module
            return spec
        return None


sys.meta_path.insert(0, Hook())
"""

STAGES = [
    "import:typing",  # the first module countbot imports after the handler (its window's end)
    "call:countbot_cli.interrupts:stop_on_termination",  # the handler's first moment
    "import:countbot_cli.keyguard",  # right after the handler is installed
    "import:typer",  # importing the command-line app
    "import:countbot_cli.cli.routing",  # routing the arguments
    "call:typer._click.core:Command.make_context",  # parsing them (typer's own click)
    "import:countbot_cli.app",  # the command starting
    "import:yaml",  # reading the config
    "import:httpx",  # building the provider
    "call:countbot_cli.conversation.sessions.store:SessionStore.create",  # the question's first save
]


@pytest.mark.parametrize("stage", STAGES)
def test_sigterm_at_each_stage_of_start_up_exits_130(
    tmp_path: Path, server: fs.FakeServer, stage: str
) -> None:
    import subprocess

    cb = make_cb(tmp_path, server.base_url)
    hooks = tmp_path / "hooks"
    hooks.mkdir()
    (hooks / "sitecustomize.py").write_text(SIGTERM_AT, encoding="utf-8")
    mark = tmp_path / "fired"
    server.default = fs.text("an answer")
    env = {**cb.env, "PYTHONPATH": str(hooks), "CB_SIGTERM_AT": stage, "CB_SIGTERM_MARK": str(mark)}
    proc = subprocess.run(
        [COUNTBOT, "ask", "--plain", "a question"],
        cwd=cb.work,
        env=env,
        stdin=subprocess.DEVNULL,
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert mark.exists(), f"the stage {stage} was never reached"
    assert proc.returncode == 130, (proc.returncode, proc.stderr)
    assert "Traceback" not in proc.stderr and "already exists" not in proc.stderr
    if stage.endswith("SessionStore.create"):  # the question is kept, marked interrupted
        saved = cb.only_session()["messages"]
        assert [(m["content"], m["status"]) for m in saved] == [("a question", "interrupted")]
        assert server.chat_bodies() == []


def test_signals_held_around_a_save_are_delivered_after_it() -> None:
    previous = {s: signal.getsignal(s) for s in (signal.SIGTERM, signal.SIGHUP)}
    try:
        interrupts.stop_on_termination()
        done: list[str] = []
        with pytest.raises(Terminated), interrupts.sigint_deferred():
            signal.raise_signal(signal.SIGTERM)
            signal.raise_signal(signal.SIGINT)
            done.append("saved")  # the block ran to its end
        assert done == ["saved"]
        with pytest.raises(KeyboardInterrupt) as info, interrupts.sigint_deferred():
            signal.raise_signal(signal.SIGINT)
            done.append("again")
        assert not isinstance(info.value, Terminated) and done == ["saved", "again"]
    finally:
        for sig, handler in previous.items():
            signal.signal(sig, handler)
    assert threading.current_thread() is threading.main_thread()


# ---- no handler takes SIGTERM for Ctrl-C ----

PACKAGE = Path(__file__).resolve().parents[1] / "countbot_cli"
# handlers that end countbot themselves, whichever signal it was (exit 130 either way), or skip
# only work that SIGTERM would skip too (`ask`'s memory upkeep after the saved answer)
ENDS_ANYWAY = {"__main__.py", "cli/options.py", "conversation/upkeep.py"}


def _names(node: ast.expr | None) -> set[str]:
    elts = node.elts if isinstance(node, ast.Tuple) else [node] if node is not None else []
    return {e.id if isinstance(e, ast.Name) else getattr(e, "attr", "") for e in elts}


def _swallowing_handlers(tree: ast.AST) -> Iterator[int]:
    """Lines of `except KeyboardInterrupt` handlers (alone or in a tuple) that neither keep the
    exception (`as exc`) nor raise, with no `except Terminated` before them in their `try`."""
    for node in ast.walk(tree):
        if not isinstance(node, ast.Try):
            continue
        terminated = False
        for handler in node.handlers:
            names = _names(handler.type)
            terminated = terminated or "Terminated" in names
            if "KeyboardInterrupt" not in names or terminated or handler.name:
                continue
            if not any(isinstance(n, ast.Raise) for n in ast.walk(handler)):
                yield handler.lineno


def test_no_handler_takes_sigterm_for_ctrl_c() -> None:
    """errors.Terminated (SIGTERM, SIGHUP) is a KeyboardInterrupt, so a handler meant for Ctrl-C
    catches it too: one that answers "no", cancels, skips or carries on then leaves countbot
    running where it must stop with 130. Seven did (an MCP server's start, a REPL question,
    /edit, a stopped tool's grace, the wait for the upkeep at exit, a line asked on stdin, the
    session picker). Each such handler is preceded by `except Terminated: raise` (or keeps and
    re-raises it)."""
    found = []
    for path in sorted(PACKAGE.rglob("*.py")):
        rel = path.relative_to(PACKAGE).as_posix()
        if rel in ENDS_ANYWAY:
            continue
        found += [f"{rel}:{n}" for n in _swallowing_handlers(ast.parse(path.read_text("utf-8")))]
    assert found == []
