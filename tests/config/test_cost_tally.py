"""The per-day cost tally (`costs.json`) adds up when several countbot processes price calls at
the same moment: each addition is made under the tally's lock."""

from __future__ import annotations

import json
import multiprocessing
from datetime import date
from pathlib import Path

from countbot_cli.config.prices import COSTS_FILE, DayCosts, day_cost

DAY = date(2026, 11, 30)


def _add_many(folder: str, n: int) -> None:
    tally = DayCosts(Path(folder) / COSTS_FILE)
    for _ in range(n):
        tally.add(0.001, DAY)


def test_concurrent_processes_lose_no_amount(tmp_path: Path) -> None:
    ctx = multiprocessing.get_context("fork")
    procs = [ctx.Process(target=_add_many, args=(str(tmp_path), 40)) for _ in range(4)]
    for p in procs:
        p.start()
    for p in procs:
        p.join(60)
        assert p.exitcode == 0
    assert day_cost(tmp_path, DAY) == round(4 * 40 * 0.001, 8)
    data = json.loads((tmp_path / COSTS_FILE).read_text("utf-8"))
    assert list(data) == [DAY.isoformat()]


def test_a_tally_that_cannot_be_written_is_skipped_quietly(tmp_path: Path) -> None:
    blocked = tmp_path / "not-a-folder"
    blocked.write_text("x", encoding="utf-8")
    DayCosts(blocked / COSTS_FILE).add(0.5, DAY)  # no exception: the answer is never held up
    assert day_cost(blocked, DAY) is None
