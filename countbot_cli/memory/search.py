"""Parsing and searching MEMORY.md in memory; the file handling is in `store.py`.

This module is the one search vocabulary of memory: how a query becomes terms (`query_terms`:
words and CJK runs, a long run also tried by its bigrams) for `memory search` and the memory
tool, which entries hold them (`Index`, `has_every_term`: a Latin word as a word, so "rent" is
not found in "parents"), and how recall picks the words of a user message (`query_words`: no
stop words, CJK bigrams; see words.py) and matches them (`word_pattern`, `Index.word_hits`).

A `Snapshot` is one version of the file: its raw lines (kept verbatim so a rewrite changes only
what it means to) plus parallel lists for the entries. Its `Index` (built on first search) holds
the casefolded contents joined into one string, so a rare word is found with `str.find` in C
instead of a Python loop over every entry.
"""

from __future__ import annotations

import re
from bisect import bisect_right
from collections import Counter, defaultdict
from collections.abc import Iterable
from datetime import date as Date
from itertools import accumulate, compress, islice, repeat
from operator import contains
from typing import NamedTuple

from countbot_cli.textsafe import LazyPattern
from countbot_cli.words import CJK_RUN, content_words

_DATE_RE = re.compile(r"[0-9]{4}-[0-9]{2}-[0-9]{2}")
_SOURCE_RE = re.compile(r"[A-Za-z0-9][A-Za-z0-9_.-]*")
_SURROGATE_RE = LazyPattern("[\ud800-\udfff]")
# "  " plus every character str.split() treats as whitespace except " " and "\n"
_ODD_SPACES = (
    "  ",
    *"\t\x0b\x0c\r\x1c\x1d\x1e\x1f\x85\xa0\u1680\u2028\u2029\u202f\u205f\u3000",
    *(chr(c) for c in range(0x2000, 0x200B)),
)
_PUNCT = "\"'`,.;:!?()[]{}<>，。；：！？、（）【】《》「」『』“”‘’…·"
BIGRAM_MIN_RUN = 3  # a CJK run this long also matches by its character bigrams
BIGRAM_MIN_SHARE = 0.5  # ... when at least this share of them is present
MAX_BIGRAMS = 6  # bigrams tried per run: a sentence-long run is sampled, keeping search fast


def replace_surrogates(text: str) -> str:
    """Lone surrogates (undecodable bytes in argv or a file) become U+FFFD."""
    return _SURROGATE_RE.re.sub("\ufffd", text)


def valid_source(source: str) -> bool:
    return _SOURCE_RE.fullmatch(source) is not None


def valid_date(text: str) -> bool:
    if _DATE_RE.fullmatch(text) is None:
        return False
    try:
        Date.fromisoformat(text)
    except ValueError:
        return False
    return True


class Entry(NamedTuple):
    """One memory entry. `line_no` is its 1-based line in the file."""

    line_no: int
    date: str
    source: str
    content: str

    @property
    def line(self) -> str:
        return f"{self.date}|{self.source}|{self.content}"


class Term(NamedTuple):
    text: str  # casefolded
    bigrams: tuple[str, ...]  # distinct bigrams of a long CJK run, else ()


def query_terms(words: Iterable[str]) -> list[Term]:
    """Whitespace-split words, each cut into CJK and other runs, casefolded, deduplicated."""
    terms: list[Term] = []
    seen: set[str] = set()
    for word in (w for text in words for w in text.split()):
        for i, run in enumerate(CJK_RUN.re.split(word.casefold())):
            is_cjk = i % 2 == 1
            text = run if is_cjk else run.strip(_PUNCT)
            if not text or text in seen:
                continue
            seen.add(text)
            bigrams: tuple[str, ...] = ()
            if is_cjk and len(text) >= BIGRAM_MIN_RUN:
                bigrams = _spread(
                    tuple(dict.fromkeys(text[j : j + 2] for j in range(len(text) - 1)))
                )
            terms.append(Term(text, bigrams))
    return terms


def _spread(items: tuple[str, ...]) -> tuple[str, ...]:
    """At most MAX_BIGRAMS items, evenly spread, first and last kept (bounds search time)."""
    n = len(items)
    if n <= MAX_BIGRAMS:
        return items
    picks = dict.fromkeys(round(k * (n - 1) / (MAX_BIGRAMS - 1)) for k in range(MAX_BIGRAMS))
    return tuple(items[i] for i in picks)


# ---- recall: the words of a user message worth searching MEMORY.md for ----


def query_words(text: str, limit: int = 40) -> list[str]:
    """Search words for recall (`words.content_words`): no stop words, contractions and
    possessives cut, CJK runs cut into content bigrams, at most `limit`."""
    return content_words(text, limit)


def word_pattern(word: str) -> re.Pattern[str]:
    """How a search word matches: CJK (and a word starting or ending with a symbol: "c++")
    as a substring; any other word from a word start, a word of 4 letters or less whole or with
    a plural ending ("rent" must not match "parents" nor "use" "user"; "cat" matches "cats",
    "fly" "flies"), a longer one also as a prefix ("deploy" matches "deployment")."""
    return latin_word_pattern(word) or re.compile(re.escape(word))


def latin_word_pattern(word: str) -> re.Pattern[str] | None:
    """`word_pattern` of a word matched at word boundaries; None when it is a substring."""
    if not word or not (word[0].isalnum() and word[-1].isalnum()) or CJK_RUN.re.search(word):
        return None
    tail = r"(?:s|es)?\b" if len(word) <= 4 else ""
    if len(word) > 2 and word.endswith("y"):  # fly -> flies, study -> studies, key -> keys
        ends = r"(?:ys?|ies)\b" if len(word) <= 4 else r"(?:y|ies)"
        return re.compile(r"\b" + re.escape(word[:-1]) + ends)
    return re.compile(r"\b" + re.escape(word) + tail)


def words_matched(patterns: Iterable[re.Pattern[str]], content: str) -> int:
    """How many of the recall words' patterns (`word_pattern`) an entry's content matches."""
    folded = content.casefold()
    return sum(bool(p.search(folded)) for p in patterns)


def has_every_term(terms: Iterable[Term], content: str) -> bool:
    """Whether an entry's content holds every search term (the memory tool's "and" mode)."""
    folded = content.casefold()
    return all(word_pattern(t.text).search(folded) for t in terms)


class Index:
    """Search structures over one snapshot's contents."""

    def __init__(self, contents: list[str], dates: list[str]) -> None:
        self.lowered = [c.casefold() for c in contents]
        self.blob = "\n".join(self.lowered)
        # starts[k]: offset of entry k in blob; starts[n] is past the end
        self.starts = list(accumulate(map((1).__add__, map(len, self.lowered)), initial=0))
        # entry indices oldest first: by date, then file order (the sort is stable)
        if dates == sorted(dates):
            self.by_age = list(range(len(dates)))
            self.rank = self.by_age
        else:
            self.by_age = sorted(range(len(dates)), key=dates.__getitem__)
            self.rank = [0] * len(dates)
            for pos, i in enumerate(self.by_age):
                self.rank[i] = pos

    def hits(self, term: str, most: int | None = None) -> list[int]:
        """Indices of entries containing `term`, ascending; with `most`, the first `most + 1`
        of them only (enough to tell that more than `most` entries hold it).

        Rare terms are found with `str.find` over the joined contents (cost per hit); once the
        hits so far project to more than 1 entry in 20, testing each remaining entry is cheaper.
        """
        lowered, blob, starts = self.lowered, self.blob, self.starts
        n, size = len(lowered), len(blob)
        cap = n if most is None else most + 1
        out: list[int] = []
        pos = blob.find(term)
        while pos != -1 and len(out) < cap:
            k = bisect_right(starts, pos) - 1
            out.append(k)
            if len(out) >= 32 and len(out) * size * 20 > pos * n:
                tested = map(contains, islice(lowered, k + 1, None), repeat(term))
                out.extend(islice(compress(range(k + 1, n), tested), cap - len(out)))
                return out
            pos = blob.find(term, starts[k + 1])
        return out

    def word_hits(self, term: str) -> list[int]:
        """`hits` of a term as a word: a Latin word only at word starts, whole or as
        `word_pattern` allows ("rent" is not in "parents", "is" not in "this"); CJK anywhere."""
        found = self.hits(term)
        pattern = latin_word_pattern(term)
        if pattern is None or not found:
            return found
        search, lowered = pattern.search, self.lowered
        return [i for i in found if search(lowered[i])]

    def search(self, terms: list[Term], limit: int | None) -> tuple[list[int], int]:
        matched: Counter[int] = Counter()
        whole: Counter[int] = Counter()
        partial: defaultdict[int, float] = defaultdict(float)
        ranked_by_whole = len(terms) > 1 or terms[0].bigrams
        for term in terms:
            found = self.word_hits(term.text)
            matched.update(found)
            if ranked_by_whole:
                whole.update(found)
            if term.bigrams:
                for i, share in self._bigram_hits(term, found).items():
                    partial[i] += share
                    matched[i] += 1
        groups: defaultdict[tuple[float, ...], list[int]] = defaultdict(list)
        if len(terms) == 1 and not partial:
            groups[(1,)] = list(matched)
        else:
            for i, m in matched.items():
                groups[(m, whole[i], partial.get(i, 0.0))].append(i)
        return self._top(groups, limit), len(matched)

    def _bigram_hits(self, term: Term, whole: list[int]) -> dict[int, float]:
        counts: Counter[int] = Counter()
        for bigram in term.bigrams:
            counts.update(self.hits(bigram))
        need = len(term.bigrams) * BIGRAM_MIN_SHARE
        skip = set(whole)
        n = len(term.bigrams)
        return {i: c / n for i, c in counts.items() if c >= need and i not in skip}

    def _top(self, groups: dict[tuple[float, ...], list[int]], limit: int | None) -> list[int]:
        """Groups best first; inside a group newest first (C-level sorts, no per-item Python)."""
        out: list[int] = []
        for key in sorted(groups, reverse=True):
            if self.rank is self.by_age:  # dates in file order: the rank is the index
                group = sorted(groups[key], reverse=True)
            else:
                group = sorted(groups[key], key=self.rank.__getitem__, reverse=True)
            out.extend(group if limit is None else group[: limit - len(out)])
            if limit is not None and len(out) >= limit:
                break
        return out


def _clean_date(field: str, line_no: int) -> str:
    day = field.strip()
    if line_no == 1:
        day = day.lstrip("\ufeff")
    return day if valid_date(day) else ""


class Snapshot:
    """One parsed version of MEMORY.md. Never mutated once built; writes make a new one."""

    def __init__(self, lines: list[str], ends_nl: bool, key: tuple[int, ...] | None) -> None:
        self.lines = lines
        self.ends_nl = ends_nl
        self.key = key
        self.line_nos: list[int] = []
        self.dates: list[str] = []
        self.sources: list[str] = []
        self.contents: list[str] = []
        self.bad_lines: list[int] = []
        self._entries: list[Entry] | None = None
        self._index: Index | None = None
        self._normalized: set[str] | None = None

    @classmethod
    def parse(cls, data: bytes, *, key: tuple[int, ...] | None) -> Snapshot:
        try:
            text, odd_bytes = data.decode("utf-8"), False
        except UnicodeDecodeError:
            text, odd_bytes = data.decode("utf-8", "surrogateescape"), True
        lines = text.split("\n")
        ends_nl = lines[-1] == ""
        if ends_nl:
            lines.pop()
        snap = cls(lines, ends_nl, key)
        snap._parse_from(0, odd_bytes)
        return snap

    def _parse_from(self, first: int, odd_bytes: bool) -> None:
        """Parse lines[first:] into the entry lists (the hot loop of a cold search)."""
        days: dict[str, str] = {}  # raw date field -> stripped date, or "" when invalid
        add_no, add_date = self.line_nos.append, self.dates.append
        add_source, add_content = self.sources.append, self.contents.append
        for n, line in enumerate(islice(self.lines, first, None), first + 1):
            parts = line.split("|", 2)
            if len(parts) == 3:
                day = days.get(parts[0])
                if day is None:
                    day = days[parts[0]] = _clean_date(parts[0], n)
                source, content = parts[1].strip(), parts[2].strip()
                if day and source and content and not (odd_bytes and _SURROGATE_RE.re.search(line)):
                    add_no(n)
                    add_date(day)
                    add_source(source)
                    add_content(content)
                    continue
            s = line.strip().lstrip("\ufeff")
            if s and s[0] != "#":
                self.bad_lines.append(n)

    # ------------------------------------------------------------------ views

    def entries(self) -> list[Entry]:
        if self._entries is None:
            self._entries = list(map(Entry, self.line_nos, self.dates, self.sources, self.contents))
        return self._entries

    def entry(self, i: int) -> Entry:
        if self._entries is not None:
            return self._entries[i]
        return Entry(self.line_nos[i], self.dates[i], self.sources[i], self.contents[i])

    def index(self) -> Index:
        if self._index is None:
            self._index = Index(self.contents, self.dates)
        return self._index

    def normalized(self) -> set[str]:
        """A fresh set of the stored contents with whitespace normalised (for duplicate checks)."""
        if self._normalized is None:
            joined = "\n".join(self.contents)
            odd = [ch for ch in _ODD_SPACES if ch in joined]
            if odd:  # rare (hand edits): normalise only the contents that need it
                self._normalized = {
                    " ".join(c.split()) if any(ch in c for ch in odd) else c for c in self.contents
                }
            else:
                self._normalized = set(self.contents)
        return set(self._normalized)

    def render(self) -> bytes:
        text = "\n".join(self.lines) + ("\n" if self.ends_nl and self.lines else "")
        return text.encode("utf-8", "surrogateescape")

    def undeletable(self, line_no: int) -> str | None:
        """Why this line may not be deleted, or None when it may."""
        if not 1 <= line_no <= len(self.lines):
            return f"no such line (the file has {len(self.lines)} lines)"
        s = self.lines[line_no - 1].strip().lstrip("\ufeff")
        if not s:
            return "it is a blank line, not an entry"
        if s.startswith("#"):
            return "it is a header/comment line, not an entry"
        return None

    # ------------------------------------------------------------------ new versions

    def with_key(self, key: tuple[int, ...] | None) -> Snapshot:
        self.key = key
        return self

    def appended(self, rows: list[tuple[str, str, str]], *, header: str) -> Snapshot:
        lines = list(self.lines) if self.lines else header.split("\n")[:-1]
        first = len(lines)
        lines.extend(f"{d}|{s}|{c}" for d, s, c in rows)
        new = Snapshot(lines, True, None)
        if self.lines:
            new.line_nos = [*self.line_nos]
            new.dates = [*self.dates]
            new.sources = [*self.sources]
            new.contents = [*self.contents]
            new.bad_lines = [*self.bad_lines]
            if self._normalized is not None:
                new._normalized = self._normalized | {c for _, _, c in rows}
            new._parse_from(first, False)
        else:
            new._parse_from(0, False)
        return new

    def without(self, line_nos: list[int]) -> tuple[Snapshot, list[str]]:
        drop = set(line_nos)
        kept = [line for n, line in enumerate(self.lines, 1) if n not in drop]
        removed = [self.lines[n - 1] for n in sorted(drop)]
        odd = any(_SURROGATE_RE.re.search(line) for line in kept)
        new = Snapshot(kept, self.ends_nl, None)
        new._parse_from(0, odd)
        return new, removed
