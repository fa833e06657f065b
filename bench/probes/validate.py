#!/usr/bin/env python3
"""Check the held-out probes in this folder and print what they hold.

Checks `memory_heldout.json` and `sessions_heldout.json` (README.md has their schema): the JSON
shape; that every answer/stale string is exactly one memory line and every session id and evidence
turn exists; that dates parse and come before the question's date; and that the kind labels are
honest: a `paraphrase` question shares no content word with its evidence, a `lexical` one shares a
rare one, a `cross` one is written in the other script and shares none. Content words are
lower-cased, lightly stemmed Latin words minus STOP_EN, and Chinese character bigrams minus STOP_ZH.
Standard library only; prints the counts and exits 1 on any problem.

    python3 bench/probes/validate.py
"""

from __future__ import annotations

import datetime as dt
import json
import re
import sys
from collections import Counter
from collections.abc import Callable
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent
SOURCES = ("user", "auto-overflow", "auto-memory", "tool")
MEMORY_KINDS = ("lexical", "paraphrase", "cross", "update", "temporal", "assistant")
SEARCH_KINDS = ("lexical", "paraphrase", "cross")
QUESTION_TYPES = (
    "single-session-user",
    "single-session-assistant",
    "single-session-preference",
    "knowledge-update",
    "temporal-reasoning",
    "multi-session",
)
MEMORY_FIELDS = ("id", "kind", "lang", "question", "question_date", "answers", "match", "stale")
SESSION_FIELDS = (
    "question_id",
    "question_type",
    "kind",
    "lang",
    "question",
    "answer",
    "question_date",
    "answer_session_ids",
    "evidence_turns",
)
TURN_KEYS = frozenset(("role", "content", "has_answer"))
# Every memory line is dated before this day (the probe's eleven months end in November 2026).
MEMORY_BEFORE = dt.date(2026, 12, 1)
# A `lexical` question must share a word that at most this many memory lines (or sessions) hold:
# a name, an identifier or a product rather than a topic word.
RARE_DF = 8
TURNS_MIN, TURNS_MAX = 4, 16
DAY = "%Y-%m-%d"  # the memory probe's dates
LME_DATE = "%Y/%m/%d (%a) %H:%M"  # LongMemEval's haystack_dates / question_date format

_STOP_EN = """
a about after again all also am an and any are as at away back be because been before being but
by can could did do does doing done each even ever far for from get gets getting got had has have
having he her here hers him his how i i'd i'll i'm i've if in into is it it's its just last let
like long may me might more most much must my no not now of off on once one only or other our out
over own per please same she should since so some still such than that the their them then there
these they this those through to too under until up us very was way we were what what's when where
which while who whom whose why will with would yet you your user lan lan's new
"""
STOP_EN = frozenset(_STOP_EN.split())
# Bigrams that carry no topic: pronouns, question words, particles.
_STOP_ZH = """
用户 什么 我的 她的 你的 他的 我们 他们 她们 你们 一个 这个 那个 哪个 哪些 多少 怎么 怎样 为什 么样
的是 是什 么的 现在 以前 时候 的时 已经 可以 还是 没有 因为 所以 一下 自己 一次 了一 我在 她在 你在
是不 不是 有没 我是 她是 是我 是她 的事 事情 哪里 哪天 几个
"""
STOP_ZH = frozenset(_STOP_ZH.split())
_LATIN = re.compile(r"[0-9a-zà-öø-ÿ]+(?:'[a-z]+)?")
_CJK = re.compile(r"[\u4e00-\u9fff]")
_CJK_RUN = re.compile(r"[\u4e00-\u9fff]+")
_LINE = re.compile(r"^(\d{4}-\d{2}-\d{2})\|(" + "|".join(SOURCES) + r")\|(\S.*)$")


def script(text: str) -> str:
    """'zh' when Chinese characters carry the text, else 'en' (Latin names inside are fine)."""
    return "zh" if len(_CJK.findall(text)) * 3 > len(re.findall(r"[A-Za-z]", text)) else "en"


def _stem(w: str) -> str:
    if w.endswith("'s"):
        w = w[:-2]
    for suffix in ("ies", "ing", "ed", "es", "s", "ly"):
        if w.endswith(("ss", "eed", "us")) and suffix in ("s", "ed", "es"):
            continue  # boss, breed, bus: not a plural or a past
        if w.endswith(suffix) and len(w) - len(suffix) >= (4 if suffix == "ing" else 3):
            w = w[: -len(suffix)] + ("y" if suffix == "ies" else "")
            if len(w) > 3 and w[-1] == w[-2] and w[-1] not in "aeiouls":
                w = w[:-1]  # running -> run, stopped -> stop
            break
    return w


def content_words(text: str) -> set[str]:
    """Stemmed Latin words and Chinese bigrams that carry content."""
    low = text.lower().replace("’", "'")
    words = {_stem(w) for w in _LATIN.findall(low) if w not in STOP_EN and len(w) > 1}
    grams = {run[i : i + 2] for run in _CJK_RUN.findall(text) for i in range(len(run) - 1)}
    return (words - {""}) | (grams - STOP_ZH)


def _same(a: str, b: str) -> bool:
    """One word: equal stems, or a Latin word of five or more letters that starts the other
    (water / waterschap, physio / physiotherapy)."""
    if a == b:
        return True
    if a.isascii() and b.isascii() and min(len(a), len(b)) >= 5:
        return a.startswith(b) or b.startswith(a)
    return False


def shared(q: set[str], text: set[str]) -> set[str]:
    return {w for w in q if any(_same(w, x) for x in text)}


def _df_counter(texts: list[str]) -> Callable[[str], int]:
    """How many of `texts` hold a word (for the `lexical` rarity rule)."""
    vocab = [content_words(t) for t in texts]
    return lambda word: sum(1 for words in vocab if any(_same(word, w) for w in words))


class Report:
    def __init__(self) -> None:
        self.problems: list[str] = []

    def bad(self, where: str, msg: str) -> None:
        self.problems.append(f"{where}: {msg}")


def _date(text: object, fmt: str) -> dt.datetime | None:
    """The parsed date, or None; a wrong weekday in LME_DATE is an error too."""
    if not isinstance(text, str):
        return None
    try:
        parsed = dt.datetime.strptime(text, fmt)
    except ValueError:
        return None
    return parsed if parsed.strftime(fmt) == text else None


def _str_list(value: object) -> bool:
    return isinstance(value, list) and all(isinstance(x, str) and x for x in value)


def _label_checks(r: Report, where: str, q: dict, evidence: list[str], df) -> None:
    """The honesty of the kind label against the evidence texts (memory lines or turns)."""
    kind, question = q["kind"], q["question"]
    q_words = content_words(question)
    if kind == "lexical":
        common = set().union(*(shared(q_words, content_words(t)) for t in evidence))
        if not common:
            r.bad(where, "lexical shares no content word with its evidence")
        elif not any(df(w) <= RARE_DF for w in common):
            r.bad(where, f"lexical shares only common words {sorted(common)} (df > {RARE_DF})")
    if kind not in ("paraphrase", "cross"):
        return
    for text in evidence:
        common = shared(q_words, content_words(text))
        if common:
            r.bad(where, f"{kind} shares {sorted(common)} with its evidence")
        if kind == "cross" and script(text) == script(question):
            r.bad(where, f"cross question and evidence are both {script(question)}")


def _common_fields(r: Report, where: str, q: dict, kinds: tuple[str, ...], fmt: str):
    """Checks both probes' questions share; the question's date, or None to skip the rest."""
    if q["kind"] not in kinds:
        r.bad(where, f"unknown kind {q['kind']!r}")
    if not isinstance(q["question"], str) or not q["question"].strip():
        r.bad(where, "empty question")
        return None
    if q["lang"] != script(q["question"]):
        r.bad(where, f"lang {q['lang']!r} but the question reads {script(q['question'])!r}")
    asked = _date(q["question_date"], fmt)
    if asked is None:
        r.bad(where, f"question_date {q['question_date']!r} does not parse as {fmt}")
    return asked


def _questions(r: Report, name: str, data: dict, id_field: str, fields: tuple[str, ...]):
    """The question objects that have every field and a unique id, with where to report."""
    seen: set[str] = set()
    for n, q in enumerate(data["questions"]):
        where = f"{name} question {q.get(id_field, n) if isinstance(q, dict) else n}"
        if not isinstance(q, dict):
            r.bad(where, "is not an object")
            continue
        missing = [k for k in fields if k not in q]
        if missing:
            r.bad(where, f"misses {missing}")
            continue
        if q[id_field] in seen:
            r.bad(where, "duplicate id")
        seen.add(q[id_field])
        yield where, q


# ---- the memory probe


def _memory_lines(r: Report, name: str, raw_lines: list[str]) -> dict[str, tuple[dt.date, str]]:
    """content -> (date, source) for every line; comments skipped, bad lines reported."""
    lines: dict[str, tuple[dt.date, str]] = {}
    seen: Counter[str] = Counter()
    for i, raw in enumerate(raw_lines):
        if raw.startswith("#"):
            continue
        m = _LINE.match(raw)
        day = _date(m.group(1), DAY) if m else None
        if m is None or day is None or "\n" in raw:
            r.bad(name, f"memory[{i}] is not a date|source|content line: {raw[:60]!r}")
            continue
        if day.date() >= MEMORY_BEFORE:
            r.bad(name, f"memory[{i}] is dated {m.group(1)}, not before {MEMORY_BEFORE}")
        seen[m.group(3)] += 1
        lines[m.group(3)] = (day.date(), m.group(2))
    for content, n in seen.items():
        if n > 1:
            r.bad(name, f"{n} memory lines share the content {content[:60]!r}")
    return lines


def _memory_question(r: Report, where: str, q: dict, lines: dict, df) -> None:
    asked = _common_fields(r, where, q, MEMORY_KINDS, DAY)
    if q["match"] not in ("any", "all"):
        r.bad(where, f"match must be 'any' or 'all', not {q['match']!r}")
    if not isinstance(q.get("expected"), str) or not q["expected"].strip():
        r.bad(where, "needs a non-empty expected answer")
    if asked is None:
        return
    if not _str_list(q["answers"]) or not q["answers"] or not _str_list(q["stale"]):
        r.bad(where, "answers must be a non-empty list of strings, stale a list of strings")
        return
    for field in ("answers", "stale"):
        for text in q[field]:
            if text not in lines:
                r.bad(where, f"{field} string is no memory line: {text[:60]!r}")
            elif lines[text][0] >= asked.date():
                r.bad(where, f"{field} line of {lines[text][0]} is not before {asked.date()}")
    if set(q["answers"]) & set(q["stale"]):
        r.bad(where, "a line is both answer and stale")
    if not all(t in lines for t in q["answers"] + q["stale"]):
        return
    if q["kind"] == "update":
        if not q["stale"]:
            r.bad(where, "an update question needs the older line(s) in stale")
        elif min(lines[t][0] for t in q["answers"]) <= max(lines[t][0] for t in q["stale"]):
            r.bad(where, "an answer line is not newer than every stale line")
    if q["kind"] == "assistant" and not any(
        re.search(r"assistant|助手", t, re.IGNORECASE) for t in q["answers"]
    ):
        r.bad(where, "no answering line says what the assistant said")
    _label_checks(r, where, q, q["answers"], df)


def check_memory(path: Path, r: Report) -> None:
    name = path.name
    data = json.loads(path.read_text(encoding="utf-8"))
    if not isinstance(data, dict) or not _str_list(data.get("memory")):
        r.bad(name, "needs a 'memory' list of strings")
        return
    if not isinstance(data.get("questions"), list):
        r.bad(name, "needs a 'questions' list")
        return
    lines = _memory_lines(r, name, data["memory"])
    df = _df_counter(list(lines))
    qs = []
    for where, q in _questions(r, name, data, "id", MEMORY_FIELDS):
        qs.append(q)
        _memory_question(r, where, q, lines, df)

    langs = Counter(script(c) for c in lines)
    sources = Counter(v[1] for v in lines.values()).most_common()
    print(f"{name}: {len(lines)} memory lines, {len(qs)} questions")
    print("  lines by source: " + ", ".join(f"{s} {n}" for s, n in sources))
    share = langs["zh"] / max(1, len(lines))
    print(f"  lines by language: en {langs['en']}, zh {langs['zh']} ({share:.0%} Chinese)")
    dates = sorted(v[0] for v in lines.values())
    if dates:
        print(f"  dates: {dates[0]} .. {dates[-1]}")
    _print_kinds(qs, "kind")


def _print_kinds(qs: list[dict], field: str) -> None:
    by = Counter((q.get(field), q.get("lang")) for q in qs)
    for kind in sorted({k for k, _ in by}, key=str):
        en, zh = by[(kind, "en")], by[(kind, "zh")]
        print(f"  {field} {kind}: {en + zh} (en {en}, zh {zh})")


# ---- the sessions probe


def _haystack(r: Report, name: str, data: dict):
    """(when, turns_of) for the sessions that parse; shape problems reported."""
    ids, dates, sessions = (
        data["haystack_session_ids"],
        data["haystack_dates"],
        data["haystack_sessions"],
    )
    when: dict[str, dt.datetime] = {}
    turns_of: dict[str, list[dict]] = {}
    if not (len(ids) == len(dates) == len(sessions)):
        r.bad(name, "haystack_session_ids, haystack_dates and haystack_sessions differ in length")
        return when, turns_of
    if len(set(ids)) != len(ids) or not _str_list(ids):
        r.bad(name, "session ids must be unique non-empty strings")
    for sid, date, turns in zip(ids, dates, sessions, strict=True):
        where = f"{name} session {sid}"
        day = _date(date, LME_DATE)
        if day is None:
            r.bad(where, f"date {date!r} is not like '2026/03/04 (Wed) 19:20' (weekday included)")
            continue
        if not isinstance(turns, list) or not TURNS_MIN <= len(turns) <= TURNS_MAX:
            r.bad(where, f"needs {TURNS_MIN}-{TURNS_MAX} turns")
            continue
        for i, t in enumerate(turns):
            if not isinstance(t, dict) or not set(t) <= TURN_KEYS:
                r.bad(where, f"turn {i} must be an object with keys among {sorted(TURN_KEYS)}")
            elif not isinstance(t.get("content"), str) or not t["content"].strip():
                r.bad(where, f"turn {i} has no content")
            elif t.get("role") != ("user" if i % 2 == 0 else "assistant"):
                r.bad(where, f"turn {i} breaks the user/assistant alternation")
        when[sid], turns_of[sid] = day, turns
    if sorted(when.values()) != [when[s] for s in ids if s in when]:
        r.bad(name, "sessions are not in date order")
    return when, turns_of


def _turns(r: Report, where: str, value: object, turns_of: dict, field: str):
    """[[session_id, turn_index], ...] -> the pairs that point at a real turn."""
    if not isinstance(value, list) or not value:
        r.bad(where, f"{field} must be a non-empty list of [session_id, turn_index]")
        return []
    out = []
    for pair in value:
        ok = isinstance(pair, list) and len(pair) == 2 and isinstance(pair[1], int)
        if not ok or pair[0] not in turns_of or not 0 <= pair[1] < len(turns_of[pair[0]]):
            r.bad(where, f"{field} entry {pair!r} names no turn")
            continue
        out.append((pair[0], pair[1]))
    return out


def _answer_sessions(r: Report, where: str, q: dict, when: dict, asked: dt.datetime) -> bool:
    ids = q["answer_session_ids"]
    if not _str_list(ids) or not ids:
        r.bad(where, "answer_session_ids must be a non-empty list of ids")
        return False
    if len(ids) > 1 and q["question_type"].startswith("single-session"):
        r.bad(where, f"{q['question_type']} names {len(ids)} sessions")
    if q["question_type"] == "multi-session" and len(ids) < 2:
        r.bad(where, "multi-session names fewer than two sessions")
    for sid in ids:
        if sid not in when:
            r.bad(where, f"answer session {sid!r} is not in the haystack")
        elif when[sid] >= asked:
            r.bad(where, f"answer session {sid} is not before the question date")
    return True


def _stale_sessions(r: Report, where: str, q: dict, when: dict, turns_of: dict) -> None:
    stale_ids = q.get("stale_session_ids")
    if not _str_list(stale_ids) or not stale_ids:
        r.bad(where, "a knowledge-update question names its older sessions in stale_session_ids")
        return
    stale = _turns(r, where, q.get("stale_turns"), turns_of, "stale_turns")
    if {s for s, _ in stale} != set(stale_ids):
        r.bad(where, "stale_turns and stale_session_ids name different sessions")
    newest = max((when[s] for s in q["answer_session_ids"] if s in when), default=None)
    for sid in stale_ids:
        if sid in q["answer_session_ids"]:
            r.bad(where, f"session {sid} is both answer and stale")
        elif sid in when and newest is not None and when[sid] >= newest:
            r.bad(where, f"stale session {sid} is not older than the newest answer")


def _session_question(r: Report, where: str, q: dict, when: dict, turns_of: dict, cited, df):
    if q["question_type"] not in QUESTION_TYPES:
        r.bad(where, f"unknown question_type {q['question_type']!r}")
    if not isinstance(q["answer"], (str, int)) or str(q["answer"]).strip() == "":
        r.bad(where, "empty answer")
    asked = _common_fields(r, where, q, SEARCH_KINDS, LME_DATE)
    if asked is None or not _answer_sessions(r, where, q, when, asked):
        return
    evidence = _turns(r, where, q["evidence_turns"], turns_of, "evidence_turns")
    for sid, i in evidence:
        cited.add((sid, i))
        if sid not in q["answer_session_ids"]:
            r.bad(where, f"evidence turn {sid}:{i} is outside answer_session_ids")
        elif turns_of[sid][i].get("has_answer") is not True:
            r.bad(where, f"evidence turn {sid}:{i} is not marked has_answer")
    for sid in q["answer_session_ids"]:
        if sid in turns_of and all(s != sid for s, _ in evidence):
            r.bad(where, f"answer session {sid} has no evidence turn")
    if q["question_type"] == "knowledge-update" or "stale_session_ids" in q:
        _stale_sessions(r, where, q, when, turns_of)
    if evidence:
        _label_checks(r, where, q, [turns_of[s][i]["content"] for s, i in evidence], df)


def check_sessions(path: Path, r: Report) -> None:
    name = path.name
    data: Any = json.loads(path.read_text(encoding="utf-8"))
    keys = ("haystack_session_ids", "haystack_dates", "haystack_sessions", "questions")
    if not isinstance(data, dict) or any(not isinstance(data.get(k), list) for k in keys):
        r.bad(name, f"needs the lists {list(keys)}")
        return
    when, turns_of = _haystack(r, name, data)
    df = _df_counter([" ".join(t["content"] for t in turns) for turns in turns_of.values()])
    cited: set[tuple[str, int]] = set()
    qs = []
    for where, q in _questions(r, name, data, "question_id", SESSION_FIELDS):
        qs.append(q)
        _session_question(r, where, q, when, turns_of, cited, df)
    for sid, turns in turns_of.items():
        for i, t in enumerate(turns):
            if t.get("has_answer") is True and (sid, i) not in cited:
                r.bad(f"{name} session {sid}", f"turn {i} has has_answer but no question cites it")

    langs = Counter(
        "mixed" if len({script(t["content"]) for t in s}) > 1 else script(s[0]["content"])
        for s in turns_of.values()
    )
    n_turns = [len(s) for s in turns_of.values()]
    low, high = min(n_turns, default=0), max(n_turns, default=0)
    print(
        f"{name}: {len(turns_of)} sessions ({sum(n_turns)} turns, {low}-{high} a session), ", end=""
    )
    print(f"{len(qs)} questions")
    print(f"  sessions by language: en {langs['en']}, zh {langs['zh']}, mixed {langs['mixed']}")
    if when:
        print(f"  dates: {min(when.values()):%Y-%m-%d} .. {max(when.values()):%Y-%m-%d}")
    _print_kinds(qs, "question_type")
    _print_kinds(qs, "kind")
    named = {s for q in qs for s in q["answer_session_ids"] + q.get("stale_session_ids", [])}
    print(f"  sessions no question names (pure distractors): {len(set(turns_of) - named)}")


def main() -> int:
    r = Report()
    for fname, check in (
        ("memory_heldout.json", check_memory),
        ("sessions_heldout.json", check_sessions),
    ):
        try:
            check(HERE / fname, r)
        except (OSError, json.JSONDecodeError) as e:
            r.bad(fname, f"cannot be read: {e}")
    for p in r.problems:
        print("PROBLEM", p)
    print(f"{len(r.problems)} problem(s)")
    return 1 if r.problems else 0


if __name__ == "__main__":
    sys.exit(main())
