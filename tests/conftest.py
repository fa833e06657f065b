"""Shared pytest fixtures for countbot's tests.

The tests mirror the package (tests/provider/ for countbot_cli/provider/, …); what several test
folders share lives in tests/helpers/ (the loopback server, the subprocess runner, the memory
rig), which is put on the import path here so every test imports it by name.
"""

from __future__ import annotations

import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parent / "helpers"))

from fakeserver import FakeServer  # noqa: E402


@pytest.fixture
def fake_server() -> Iterator[FakeServer]:
    """A started FakeServer (tests/fakeserver.py) on 127.0.0.1; stopped after the test.

    Script it with `fake_server.add(text(...))`, point clients at `fake_server.base_url`,
    assert on `fake_server.chat_bodies()`.
    """
    with FakeServer() as server:
        yield server
