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


def test_a_price_that_is_not_a_finite_number_is_a_config_error(tmp_path: Path) -> None:
    import pytest

    from countbot_cli.config.settings import load_settings
    from countbot_cli.errors import ConfigError

    for figure in (".nan", ".inf"):
        path = tmp_path / "config.yaml"
        path.write_text(
            "providers:\n  p: {type: openai, api_base: 'http://127.0.0.1:9/v1', api_key: k,"
            f" model: m}}\nprices:\n  m: {{input: {figure}, output: 1}}\n",
            encoding="utf-8",
        )
        with pytest.raises(ConfigError, match="must be a finite number") as info:
            load_settings(config_path=path, env={"HOME": str(tmp_path)}, cwd=tmp_path)
        assert info.value.line == 4


def test_non_finite_amounts_are_damage_and_the_good_days_are_kept(tmp_path: Path) -> None:
    path = tmp_path / COSTS_FILE
    path.write_text('{"2026-11-29": 1.0, "2026-11-30": NaN}', encoding="utf-8")
    tally = DayCosts(path)
    assert tally.get(DAY) is None and tally.damage is not None and "nan" in tally.damage
    notice = tally.add(0.5, DAY)
    assert notice is not None and "moved aside" in notice
    assert json.loads(path.read_text("utf-8")) == {"2026-11-29": 1.0, "2026-11-30": 0.5}
    assert DayCosts(path).add(0.5, DAY) is None  # healthy again
    assert day_cost(tmp_path, DAY) == 1.0
    assert DayCosts(path).add(float("nan"), DAY) is None and day_cost(tmp_path, DAY) == 1.0
