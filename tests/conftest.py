"""Shared pytest fixtures for countbot's tests.

The tests mirror the package (tests/provider/ for countbot_cli/provider/, …); what several test
folders share lives in tests/helpers/ (the loopback server, the subprocess runner, the memory
rig, the in-process REPL harness, the pty helpers, waits on conditions: docs/DEVELOPING.md lists
them), which is put on the import path here so every test imports it by name; the fixtures
several folders use are here, one per rig: `server`, `harness` and `scripted` (the REPL
in-process, on the server or on a ScriptedProvider), `rig_factory` (the memory rig).

No test writes the user's cache: `pytest_configure` points `XDG_CACHE_HOME` at a folder of the
run's own before any test starts (the worker processes inherit it, and `cbenv.clean_env` passes
it to every countbot a test starts), so the recall model is cached once a run, there, and the
folder is removed when the run ends.
"""

from __future__ import annotations

import os
import shutil
import signal
import socket
import sys
import tempfile
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parent / "helpers"))

from fakeserver import FakeServer  # noqa: E402

# A shell without job control starts `make test &` with SIGINT ignored, and every countbot the
# tests start would inherit that and never see the Ctrl-C they send. Put the default back, so
# the Ctrl-C tests test countbot and not how pytest was launched.
if signal.getsignal(signal.SIGINT) is signal.SIG_IGN:
    signal.signal(signal.SIGINT, signal.default_int_handler)


def pytest_configure(config: pytest.Config) -> None:
    """The run's own cache folder (`$XDG_CACHE_HOME`), made by the controlling process; the
    xdist workers it starts inherit the variable and share the folder."""
    if not hasattr(config, "workerinput"):
        _users_cache.append(os.environ.get("XDG_CACHE_HOME"))
        os.environ["XDG_CACHE_HOME"] = tempfile.mkdtemp(prefix="countbot-test-cache-")


def pytest_unconfigure(config: pytest.Config) -> None:
    if not hasattr(config, "workerinput") and _users_cache:
        from lingering import end_serving

        end_serving(Path(os.environ["XDG_CACHE_HOME"]) / "countbot")  # a test's kept encoders
        shutil.rmtree(os.environ["XDG_CACHE_HOME"], ignore_errors=True)
        users = _users_cache.pop()
        if users is None:
            del os.environ["XDG_CACHE_HOME"]
        else:
            os.environ["XDG_CACHE_HOME"] = users


_users_cache: list[str | None] = []  # the variable as the run found it (put back at its end)


@pytest.fixture
def server() -> Iterator[FakeServer]:
    """A started FakeServer (tests/helpers/fakeserver.py) on 127.0.0.1; stopped after the test.

    Script it with `server.add(text(...))`, point clients at `server.base_url`, assert on
    `server.chat_bodies()`.
    """
    with FakeServer() as server:
        yield server


@pytest.fixture
def harness(tmp_path: Path, server: FakeServer) -> Callable[..., Any]:
    """`harness(**config)`: the in-process REPL (tests/helpers/repl_harness.py) on the loopback
    `server`, in tmp_path; for what goes over HTTP."""
    from repl_harness import Harness

    return lambda **config: Harness(tmp_path, server, **config)


@pytest.fixture
def scripted(tmp_path: Path) -> Callable[..., Any]:
    """`scripted(**config)`: the in-process REPL on a ScriptedProvider of its own
    (`h.provider.enqueue`, `h.provider.requests`; no memory upkeep), in tmp_path (or `root=`);
    for the REPL's own logic."""
    from repl_harness import Harness

    from countbot_cli.provider.fake import ScriptedProvider

    def make(root: Path = tmp_path, **config: Any) -> Harness:
        return Harness(root, ScriptedProvider(model="test-model"), **config)

    return make


@pytest.fixture
def rig_factory(tmp_path: Path) -> Iterator[Any]:
    """`rig_factory(persona=…, memory=…)` makes a memory rig (tests/helpers/memory_rig.py: an
    engine, a keeper and a scripted summariser on the loopback server); all closed after the
    test."""
    from memory_rig import RigFactory

    factory = RigFactory(tmp_path)
    yield factory
    factory.close()


@pytest.fixture
def no_network(monkeypatch: pytest.MonkeyPatch) -> list[str]:
    """Any attempt to resolve or connect is recorded and fails."""
    attempts: list[str] = []

    def refuse(name: str) -> Any:
        def _refuse(*args: Any, **kwargs: Any) -> Any:
            attempts.append(f"{name}{args[1:] if name.startswith('socket.') else args}")
            raise OSError("network disabled in tests")

        return _refuse

    monkeypatch.setattr(socket, "getaddrinfo", refuse("getaddrinfo"))
    monkeypatch.setattr(socket, "create_connection", refuse("create_connection"))
    monkeypatch.setattr(socket.socket, "connect", refuse("socket.connect"))
    monkeypatch.setattr(socket.socket, "connect_ex", refuse("socket.connect_ex"))
    return attempts
