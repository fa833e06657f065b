"""When things were said: a message's local date, and the relative dates in its text resolved.

A memory line is dated with the day its messages were written (not the day the line was
written: a session resumed a week later, or `/compact` of old messages, must not move a fact
to today). A relative date in the text ("yesterday", "next Friday", "上周五", "3 days ago") is
resolved against that day and written beside the words, which are kept:
`I sold my cello yesterday (2026-12-03)`. Weeks are calendar weeks from Monday: "last Friday"
and 上周五 are the Friday of the week before, "next Friday" and 下周五 that of the week after,
"this Friday" and 这周五 that of the same week. A week resolves to its Monday ("the week of"),
a month to YYYY-MM, a year to YYYY. Text already followed by a date in brackets is left alone.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Iterator
from datetime import date, datetime, timedelta

from countbot_cli.textsafe import LazyPattern

_WEEKDAYS = ("monday", "tuesday", "wednesday", "thursday", "friday", "saturday", "sunday")
_ZH_WEEKDAYS = "一二三四五六日天"  # 日 and 天 are both Sunday
_ZH_DIGITS = {"一": 1, "二": 2, "两": 2, "三": 3, "四": 4, "五": 5, "六": 6, "七": 7, "八": 8}
_ZH_DIGITS |= {"九": 9}
_EN_NUMBERS = {"a": 1, "an": 1, "one": 1, "two": 2, "three": 3, "four": 4, "five": 5, "six": 6}
_EN_NUMBERS |= {"seven": 7, "eight": 8, "nine": 9, "ten": 10, "couple of": 2, "few": 3}
_DAYS = {
    "the day before yesterday": -2,
    "the day after tomorrow": 2,
    "yesterday": -1,
    "last night": -1,
    "tomorrow": 1,
    "today": 0,
    "tonight": 0,
    "大前天": -3,
    "大后天": 3,
    "前天": -2,
    "昨天": -1,
    "昨晚": -1,
    "昨日": -1,
    "今天": 0,
    "今晚": 0,
    "明天": 1,
    "明晚": 1,
    "明日": 1,
    "后天": 2,
}
_SHIFT_EN = {"last": -1, "this": 0, "next": 1}
_SHIFT_ZH = {"上": -1, "这": 0, "本": 0, "今": 0, "下": 1, "去": -1, "明": 1, "前": -2}
_NUM_EN = r"(\d+|an?|one|two|three|four|five|six|seven|eight|nine|ten|couple of|few)"
_NUM_ZH = r"(\d+|[一二两三四五六七八九十]+)"
_EN_DAYS = "|".join(sorted((k for k in _DAYS if k.isascii()), key=len, reverse=True))
_ZH_DAYS = "|".join(sorted((k for k in _DAYS if not k.isascii()), key=len, reverse=True))
_PATTERN = LazyPattern(
    rf"(?P<day>\b(?:{_EN_DAYS})\b|(?<![之以然最先落背])(?:{_ZH_DAYS})(?![气性]))"
    rf"|\b(?P<wshift>last|this|next|coming) (?P<wday>{'|'.join(_WEEKDAYS)})\b"
    rf"|(?P<zwshift>[上这本下])(?:个)?(?:周|星期|礼拜)(?P<zwday>[{_ZH_WEEKDAYS}])"
    r"|\b(?P<pshift>last|this|next) (?P<period>week|month|year|weekend)\b"
    r"|(?P<zpshift>[上这本下])(?:个)?(?P<zperiod>周|星期|礼拜|月)(?![一二三四五六日天末])"
    r"|(?P<zyshift>[去今明前])年"
    rf"|\b(?P<ago>{_NUM_EN}) (?P<agounit>days?|weeks?|months?|years?) ago\b"
    rf"|\bin (?P<in>{_NUM_EN}) (?P<inunit>days?|weeks?)\b"
    rf"|(?P<zago>{_NUM_ZH})(?:个)?(?P<zagounit>天|周|星期|礼拜|月|年)(?P<zdir>前|后|以前|以后)",
    re.IGNORECASE,
)  # compiled on first use: digest.py, loaded at start-up, imports this module
WEEK_OF = "week of "  # a resolved week: its Monday
_BRACKETED_DATE = LazyPattern(r"\s?[（(](?:week of )?\d{4}(?:-\d\d){0,2}(?: 那周)?[)）]")


def said_on(created_at: str) -> date | None:
    """The local date of a message's UTC `created_at` (`2026-11-29T19:30:00Z`); None if bad."""
    try:
        moment = datetime.fromisoformat(created_at.replace("Z", "+00:00"))
    except ValueError:
        return None
    return moment.astimezone().date() if moment.tzinfo is not None else moment.date()


def _week_start(day: date) -> date:
    return day - timedelta(days=day.weekday())


def _month(day: date, shift: int) -> str:
    n = day.year * 12 + day.month - 1 + shift
    return f"{n // 12:04d}-{n % 12 + 1:02d}"


def _count(text: str) -> int:
    """`3`, `three`, `a`, `三`, `十五`, `二十` as a number."""
    t = text.lower()
    if t.isdigit():
        return int(t)
    if t in _EN_NUMBERS:
        return _EN_NUMBERS[t]
    tens, _, ones = t.partition("十")
    if "十" not in t:
        return _ZH_DIGITS.get(t, 1)
    return _ZH_DIGITS.get(tens, 1) * 10 + _ZH_DIGITS.get(ones, 0)


def _resolve(m: re.Match[str], day: date) -> str | None:
    g = m.groupdict()
    if g["day"]:
        return (day + timedelta(days=_DAYS[g["day"].lower()])).isoformat()
    if g["wshift"]:
        target = _WEEKDAYS.index(g["wday"].lower())
        if g["wshift"].lower() == "coming":  # the next one after today
            return (day + timedelta(days=(target - day.weekday() - 1) % 7 + 1)).isoformat()
        week = _week_start(day) + timedelta(weeks=_SHIFT_EN[g["wshift"].lower()])
        return (week + timedelta(days=target)).isoformat()
    if g["zwshift"]:
        target = min(_ZH_WEEKDAYS.index(g["zwday"]), 6)
        week = _week_start(day) + timedelta(weeks=_SHIFT_ZH[g["zwshift"]])
        return (week + timedelta(days=target)).isoformat()
    if g["pshift"] or g["zpshift"]:
        shift = _SHIFT_EN[g["pshift"].lower()] if g["pshift"] else _SHIFT_ZH[g["zpshift"]]
        period = (g["period"] or "").lower() or ("month" if g["zperiod"] == "月" else "week")
        if period == "month":
            return _month(day, shift)
        if period == "year":
            return f"{day.year + shift:04d}"
        monday = _week_start(day) + timedelta(weeks=shift)
        if period == "weekend":
            return (monday + timedelta(days=5)).isoformat()
        return WEEK_OF + monday.isoformat()
    if g["zyshift"]:
        return f"{day.year + _SHIFT_ZH[g['zyshift']]:04d}"
    if g["ago"] or g["in"] or g["zago"]:
        n = _count(g["ago"] or g["in"] or g["zago"])
        unit = (g["agounit"] or g["inunit"] or g["zagounit"] or "").lower()
        sign = -1 if g["ago"] or (g["zdir"] or "").endswith("前") else 1
        if unit.startswith(("month", "月")):
            return _month(day, sign * n)
        if unit.startswith(("year", "年")):
            return f"{day.year + sign * n:04d}"
        days = n * (1 if unit.startswith(("day", "天")) else 7)
        return (day + timedelta(days=sign * days)).isoformat()
    return None


def mentions(text: str, day: date) -> Iterator[tuple[int, int, str]]:
    """(start, end, resolved) for each relative date in `text`, said on `day`: resolved is
    YYYY-MM-DD, `week of YYYY-MM-DD`, YYYY-MM or YYYY."""
    for m in _PATTERN.re.finditer(text):
        resolved = _resolve(m, day)
        if resolved is not None:
            yield m.start(), m.end(), resolved


def resolved_dates(text: str, day: date) -> set[str]:
    """The dates, months and years the relative dates in `text` stand for, said on `day`."""
    return {r.removeprefix(WEEK_OF) for _s, _e, r in mentions(text, day)}


def annotate(text: str, day: date, said: Callable[[str], date | None] | None = None) -> str:
    """`text` with each relative date followed by what it resolves to: `yesterday (2026-12-03)`,
    `昨天（2026-12-03）`. A mention already followed by a bracketed date is left as it is.
    `said(words)`: the day a mention was said, when it is known (else `day`)."""
    out: list[str] = []
    at = 0
    for m in _PATTERN.re.finditer(text):
        start, end = m.start(), m.end()
        when = (said(m.group()) if said is not None else None) or day
        resolved = _resolve(m, when)
        if resolved is None or _BRACKETED_DATE.re.match(text, end):
            continue
        if "\u4e00" <= text[start] <= "\u9fff":  # Chinese: 上周（2026-11-23 那周）
            week = resolved.startswith(WEEK_OF)
            resolved = resolved.removeprefix(WEEK_OF) + (" 那周" if week else "")
            out += [text[at:end], f"（{resolved}）"]
        else:
            out += [text[at:end], f" ({resolved})"]
        at = end
    return "".join(out) + text[at:]
