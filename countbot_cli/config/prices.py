"""The `prices:` section of the config: what a model's tokens cost, set by the user.

```yaml
prices:
  gpt-4o-mini: {input: 0.15, cached_input: 0.075, output: 0.60}   # per million tokens
```
No price table is shipped (prices change); with none set for a model no cost is shown. The
figures are in whatever currency the user writes them in. A price that is missing, zero,
negative or not a number is a ConfigError naming file, line and key. `cached_input` defaults
to `input`.

`charge` gives one call's usage its cost and adds it to today's total in
`<data_dir>/costs.json` (one number a day, best effort: it is only a tally).
"""

from __future__ import annotations

import contextlib
import json
import math
from collections.abc import Mapping
from datetime import date
from pathlib import Path
from types import MappingProxyType
from typing import NamedTuple

from countbot_cli import fileio
from countbot_cli.config.file import Section
from countbot_cli.config.own_files import COSTS_FILE, SAVED_FILE
from countbot_cli.errors import CountbotError
from countbot_cli.jsonsafe import loads_bounded
from countbot_cli.messages import Usage

PRICE_KEYS = ("input", "cached_input", "output")
LOCK_TIMEOUT = 2.0
PER = 1_000_000
MAX_TALLY_BYTES = 1 << 20  # a row a day: some 30,000 days


class Price(NamedTuple):
    """Per million tokens: prompt tokens, prompt tokens read from the cache, answer tokens."""

    input: float
    output: float
    cached_input: float | None = None

    def cost(self, u: Usage) -> float:
        cached = min(u.cached_tokens or 0, u.prompt_tokens)
        cached_price = self.input if self.cached_input is None else self.cached_input
        fresh = u.prompt_tokens - cached
        return (
            fresh * self.input + cached * cached_price + u.completion_tokens * self.output
        ) / PER

    def saved(self, u: Usage) -> float:
        """What the cached prompt tokens saved: their count at input less cached_input."""
        cached = min(u.cached_tokens or 0, u.prompt_tokens)
        cached_price = self.input if self.cached_input is None else self.cached_input
        return cached * max(0.0, self.input - cached_price) / PER


def parse_prices(sec: Section) -> Mapping[str, Price]:
    """Model name -> Price, each figure checked (above zero, a number)."""
    out: dict[str, Price] = {}
    for model in sec.names():
        entry = sec.section(model)
        entry.check_keys(PRICE_KEYS)
        figures = {k: _positive(entry, k) for k in PRICE_KEYS}
        for key in ("input", "output"):
            if figures[key] is None:
                hint = "e.g. {input: 0.15, cached_input: 0.075, output: 0.60} per million tokens"
                raise entry.error(key, "missing: a price needs input and output", hint)
        inp, outp = figures["input"], figures["output"]
        assert inp is not None and outp is not None
        out[model] = Price(input=inp, output=outp, cached_input=figures["cached_input"])
    return MappingProxyType(out)


def _positive(sec: Section, key: str) -> float | None:
    value = sec.number(key, 0.0)
    if value is not None and value <= 0:
        raise sec.error(key, f"must be more than 0, got {value:g}", "leave it out for no cost")
    return value


def price_for(prices: Mapping[str, Price], *models: str | None) -> Price | None:
    """The first of `models` (the one asked for, then the one that answered) with a price."""
    for model in models:
        if model and model in prices:
            return prices[model]
    return None


def charge(
    prices: Mapping[str, Price],
    usage: Usage,
    models: tuple[str | None, ...],
    data_dir: Path | None,
    today: date | None = None,
) -> list[str]:
    """Give `usage` its cost (when the model has a price) and add it to the day's total.
    Returns a notice for each tally that was damaged (moved aside, started again)."""
    price = price_for(prices, *models)
    if price is None:
        return []
    usage.cost = price.cost(usage)
    if usage.cached_tokens is not None and price.cached_input is not None:  # a discount
        usage.saved = price.saved(usage)
    if data_dir is None:
        return []
    day = today or date.today()
    notices = [DayCosts(data_dir / COSTS_FILE).add(usage.cost, day)]
    if usage.saved is not None:
        notices.append(DayCosts(data_dir / SAVED_FILE).add(usage.saved, day))
    return [n for n in notices if n is not None]


class DayCosts:
    """`{"2026-11-30": 0.0123, ...}`: what the priced calls of each day cost, all sessions.

    A file that is not such an object, or holds a value that is not a finite number of at
    least 0 (`NaN`, `Infinity`, which json reads, would keep every later total `NaN`), is
    damaged: its good days are read, and the next addition moves it aside first."""

    def __init__(self, path: Path) -> None:
        self.path = path
        self.damage: str | None = None  # what the last read found wrong

    def read(self) -> dict[str, float]:
        self.damage = None
        try:
            raw, size = fileio.read_capped(self.path, MAX_TALLY_BYTES + 1, follow_links=False)
            data = loads_bounded(raw) if size <= MAX_TALLY_BYTES else None
        except FileNotFoundError:
            return {}
        except fileio.NotRegularFile as e:
            self.damage = f"{e.kind}, not a file"  # moved aside by the next addition
            return {}
        except (OSError, ValueError) as e:
            self.damage = "not readable JSON" if isinstance(e, ValueError) else None
            return {}
        if data is None:
            self.damage = f"over {MAX_TALLY_BYTES:,} bytes"
            return {}
        if not isinstance(data, dict):
            self.damage = "not a JSON object"
            return {}
        good = {str(k): float(v) for k, v in data.items() if _amount(v)}
        bad = [f"{k}: {v!r}" for k, v in data.items() if not _amount(v)]
        if bad:
            self.damage = "not a finite amount (" + ", ".join(bad[:3]) + ")"
        return good

    def get(self, day: date) -> float | None:
        return self.read().get(day.isoformat())

    def add(self, cost: float, day: date) -> str | None:
        """Add under the tally's sidecar lock, so two processes never lose each other's amount
        (a lock that cannot be had in time skips the tally: it never holds up an answer).
        Returns a notice when the file was damaged and moved aside."""
        if not _amount(cost):
            return None
        notice = None
        with contextlib.suppress(OSError, CountbotError):
            self.path.parent.mkdir(parents=True, exist_ok=True)
            lock = self.path.with_name(self.path.name + ".lock")
            with fileio.locked(lock, LOCK_TIMEOUT, "the cost tally"):
                data = self.read()
                if self.damage is not None:
                    aside = fileio.move_aside(self.path, "damaged")
                    notice = (
                        f"{self.path} held {self.damage}: moved aside to {aside.name}; "
                        "the tally goes on without those days"
                    )
                data[day.isoformat()] = round(data.get(day.isoformat(), 0.0) + cost, 8)
                blob = json.dumps(data, sort_keys=True, indent=1, allow_nan=False) + "\n"
                fileio.atomic_write(self.path, blob.encode("utf-8"), durable=False)
        return notice


def _amount(value: object) -> bool:
    """A cost: a finite number of at least 0 (bool is not one)."""
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        return False
    return math.isfinite(value) and value >= 0


def day_saved(data_dir: Path, day: date | None = None) -> float | None:
    """What cached tokens saved on today's (or `day`'s) priced calls; None: nothing known."""
    return DayCosts(data_dir / SAVED_FILE).get(day or date.today())


def day_cost(data_dir: Path, day: date | None = None) -> float | None:
    """What today's (or `day`'s) priced calls cost; None when nothing was priced that day."""
    return DayCosts(data_dir / COSTS_FILE).get(day or date.today())
