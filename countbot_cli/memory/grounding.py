"""Whether a model-written memory line names only what its messages said.

A summariser can name what was never said: a project "Ferrum" the user called "ferrox", a
number it worked out wrong. A line is grounded when every thing it names is in the text it was
made from (the messages, and the summary so far): numbers, dates, identifiers (`gpt-4o`,
`config.yaml`, `camelCase`), proper names (a capital letter inside a sentence), quoted words,
and in CJK text any run of two or more characters found nowhere in that text. Case is ignored,
a word may differ by a short ending ("cello"/"cellos", "Lyon's"), 2,000 is 2000, a number
word in the messages stands for its digits, and a date may be one the messages were said on or
that a relative date in them resolves to (memory/dates.py). `Grounds.missing(line)` lists what
is not found; the keeper keeps back a line that names anything missing.
"""

from __future__ import annotations

import re
from collections.abc import Iterable
from datetime import date

from countbot_cli.memory.dates import resolved_dates
from countbot_cli.textsafe import CJK_CHARS, LazyPattern, sanitize_line
from countbot_cli.words import CJK_STOP, STOP

_CJK_RUN = LazyPattern(f"[{CJK_CHARS}]+")
# a token: letters, digits and the joiners identifiers use (CJK runs cut it, quotes end it)
_TOKEN = LazyPattern(
    r"[$€£¥]?\d{1,3}(?:,\d{3})+(?:\.\d+)?"  # $2,000 and 1,250.5 whole: a comma ends others
    rf"|[^\s{CJK_CHARS}\"“”‘’'`「」『』《》()（）\[\]{{}},;；，。！？!?、：:…*|]+"
)
_EDGES = ".-/+#@'’$€£¥%"  # stripped off a token
_JOINED = re.compile(r"[-–/]")
_DATE_WORDS = LazyPattern(
    r"(?i)\b(?:jan|feb|mar|apr|may|jun|jul|aug|sep|sept|oct|nov|dec)[a-z]*\b|[月日号]"
)  # 8-10, five-frame, and/or: parts checked one by one
_WORD = LazyPattern(r"[^\W\d_]+")
_NOT_ALNUM = LazyPattern(r"[\W_]+")
_NUMBER = re.compile(r"\d{1,3}(?:,\d{3})+(?:\.\d+)?|\d+(?:\.\d+)*")
_ISO_DATE = re.compile(r"^\d{4}-\d{2}-\d{2}$")
_QUOTES = LazyPattern(
    r"\"[^\"]+\"|“[^”]+”|`[^`]+`|「[^」]+」|『[^』]+』|《[^》]+》|(?<!\w)'[^']+'(?!\w)"
)
_ZH_NUMERAL = LazyPattern(
    r"([两二三四五六七八九十百千万]+|一[十百千万]+[一二三四五六七八九]?)"
    r"(?=[个岁年月日号天次人本只辆元块公里小时分钟周位名台家套间])"
)
_ZH_VALUES = dict(zip("一二三四五六七八九", range(1, 10), strict=True)) | {"两": 2}
_NUMBER_WORDS = (
    "zero one two three four five six seven eight nine ten eleven twelve thirteen fourteen "
    "fifteen sixteen seventeen eighteen nineteen twenty"
)
_EN_NUMBER_WORDS = _NUMBER_WORDS.split()
_EN_TENS = {"thirty": 30, "forty": 40, "fifty": 50, "sixty": 60, "seventy": 70, "eighty": 80}
_EN_TENS |= {"ninety": 90, "hundred": 100, "thousand": 1000, "dozen": 12}
_MONTH_NAMES = (
    "january february march april may june july august september october november december"
)
_MONTHS = _MONTH_NAMES.split()
_WEEKDAY_NAMES = "monday tuesday wednesday thursday friday saturday sunday"
_WEEKDAYS = _WEEKDAY_NAMES.split()
# words a summary opens an item with, and the CJK characters it writes around what was said
_SUMMARY_TEXT = (
    "user users assistant name named project prefers preference preferences likes favourite "
    "favorite decided decision decisions plans plan wants uses works lives has owns agreed "
    "recommended recommends suggested mentioned said asked note goal setting settings "
    "currently now today also both"
)
_SUMMARY_WORDS = frozenset(_SUMMARY_TEXT.split())
_SUMMARY_CJK = frozenset(
    "用户助手偏好喜欢习惯决定项目配置设置计划建议推荐名字叫住在工作使用正在目前提到表示说过希望想要"
    "需要已经打算考虑关于以及并且其中主要包括通过进行相关信息内容记录"
)
_CJK_CHECKED = 2  # a run of this many CJK characters none of the text has is a new name


def _fold(word: str) -> str:
    w = word.casefold()
    for tail in ("'s", "’s", "s'", "s’"):
        if w.endswith(tail) and len(w) > len(tail) + 1:
            return w[: -len(tail)] + ("s" if tail.startswith("s") else "")
    return w


def _compact(text: str) -> str:
    return _NOT_ALNUM.re.sub("", text.casefold())


def _number(text: str) -> str:
    return text.replace(",", "") if re.fullmatch(r"\d{1,3}(?:,\d{3})+(?:\.\d+)?", text) else text


def _zh_value(text: str) -> int:
    """A small Chinese numeral (三, 十五, 二十, 一百二) as an integer."""
    total = current = 0
    for ch in text:
        if ch in _ZH_VALUES:
            current = _ZH_VALUES[ch]
        elif ch in "十百千万":
            unit = {"十": 10, "百": 100, "千": 1000, "万": 10000}[ch]
            total += (current or 1) * unit
            current = 0
    return total + current


class Grounds:
    """What a line may name: the words, numbers and dates of the text it was made from, and the
    common words of `allowed` (the summariser's instructions)."""

    def __init__(self, texts: Iterable[str], days: Iterable[date] = (), allowed: str = "") -> None:
        source = "\n".join(sanitize_line(t) for t in texts)  # escape sequences glue words
        self.compact = _compact(source)
        self.chars = set(source) | set(allowed) | _SUMMARY_CJK | CJK_STOP
        self.words = {_fold(w) for w in set(_WORD.re.findall(source))}
        self.common = {_fold(w) for w in set(_WORD.re.findall(allowed))} | STOP | _SUMMARY_WORDS
        self.numbers = {_number(n) for n in _NUMBER.findall(source)}
        for i, word in enumerate(_EN_NUMBER_WORDS):
            if word in self.words:
                self.numbers.add(str(i))
        self.numbers |= {str(v) for w, v in _EN_TENS.items() if w in self.words}
        self.numbers |= {str(_zh_value(n)) for n in _ZH_NUMERAL.re.findall(source)}
        self.dates: set[str] = set()
        for day in set(days):
            self.dates |= {day.isoformat(), *resolved_dates(source, day)}
        self._dated = False  # the line being checked names a month (its numbers may be a date)
        self.date_numbers: set[str] = set()  # a known date's year, month, day: in a date only
        for d in list(self.dates):
            parts = d.split("-")
            self.date_numbers |= {p.lstrip("0") or "0" for p in parts} | set(parts)
            if len(parts) == 3:
                when = date.fromisoformat(d)
                self.words |= {_MONTHS[when.month - 1], _WEEKDAYS[when.weekday()]}
        self.prefixes = {
            w[:n] for w in self.words for n in range(max(4, len(w) - 3), len(w)) if len(w) > 4
        }

    def has_word(self, word: str) -> bool:
        """`word` (any case) or a form of it differing by an ending of up to 3 letters."""
        w = _fold(word)
        if w in self.words or (len(w) >= 4 and w in self.prefixes):
            return True
        return any(w[:n] in self.words for n in range(max(4, len(w) - 3), len(w)))

    def has_number(self, number: str) -> bool:
        n = _number(number)
        return n in self.numbers or any(s.startswith(n + ".") for s in self.numbers)

    def has_name(self, token: str) -> bool:
        """An identifier: the same letters and digits appear in the text, in any case."""
        return _compact(token) in self.compact

    def missing(self, line: str) -> list[str]:
        """What `line` names that the text never said, in order (none: it is grounded)."""
        self._dated = bool(_DATE_WORDS.re.search(line))  # "4 December": a date's numbers
        out: dict[str, None] = {}
        quoted = {m.start(): m.end() for m in _QUOTES.re.finditer(line)}
        for m in _TOKEN.re.finditer(line):
            token = m.group().strip(_EDGES)
            if token and not self._grounded(token, m.start(), quoted):
                out[token] = None
        for run in _CJK_RUN.re.findall(line):
            for missing in self._cjk_missing(run):
                out[missing] = None
        return list(out)

    def _grounded(self, token: str, at: int, quoted: dict[int, int]) -> bool:
        if _ISO_DATE.match(token):
            return token in self.dates or token in self.compact or self.has_name(token)
        parts = [p.strip(_EDGES) for p in _JOINED.split(token)]
        if len(parts) > 1 and all(parts):  # a range or a compound: each part as itself
            return all(self._grounded(p, at, quoted) for p in parts)
        if any(ch.isdigit() for ch in token):
            if _NUMBER.fullmatch(token):
                return self.has_number(token) or (self._dated and token in self.date_numbers)
            return self.has_name(token)
        body = token.removesuffix("'s").removesuffix("’s")
        if not _WORD.re.fullmatch(body):  # snake_case, a.b, a@b: an identifier
            return self.has_name(body)
        upper_inside = any(ch.isupper() for ch in body[1:])
        if upper_inside:  # camelCase, iPhone, AWS
            return self.has_name(body) or self.has_word(body)
        in_quotes = any(s < at < e for s, e in quoted.items())
        if not (body[0].isupper() or in_quotes):
            return True
        folded = _fold(body)
        if self.has_word(body) or folded in STOP:
            return True
        return folded in self.common and not in_quotes  # a quoted word must have been said

    def _cjk_missing(self, run: str) -> list[str]:
        out: list[str] = []
        for m in _ZH_NUMERAL.re.finditer(run):
            value = _zh_value(m.group())
            if value > 1 and str(value) not in self.numbers:
                out.append(m.group())
        new = ""
        for ch in run + "\0":
            if ch != "\0" and ch not in self.chars:
                new += ch
                continue
            if len(new) >= _CJK_CHECKED:
                out.append(new)
            new = ""
        return out
