"""How many session files a session search read again to bring its index up to date (the
count `search_index.refresh` returns), seen from outside by running one search."""

from __future__ import annotations

from typing import Any

import pytest

from countbot_cli.conversation.sessions import search_index
from countbot_cli.conversation.sessions.search import SessionSearch


def reindexed(search: SessionSearch) -> int:
    """Run one search and return how many files its refresh of the index read."""
    counts: list[int] = []
    real = search_index.refresh

    def counting(*args: Any, **kwargs: Any) -> int:
        counts.append(real(*args, **kwargs))
        return counts[-1]

    with pytest.MonkeyPatch.context() as m:
        m.setattr(search_index, "refresh", counting)
        search.search("anything")
    assert len(counts) == 1, counts
    return counts[0]
