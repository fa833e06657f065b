"""Shared pytest fixtures for countbot's tests."""

from __future__ import annotations

from collections.abc import Iterator

import pytest
from fakeserver import FakeServer


@pytest.fixture
def fake_server() -> Iterator[FakeServer]:
    """A started FakeServer (tests/fakeserver.py) on 127.0.0.1; stopped after the test.

    Script it with `fake_server.add(text(...))`, point clients at `fake_server.base_url`,
    assert on `fake_server.chat_bodies()`.
    """
    with FakeServer() as server:
        yield server
