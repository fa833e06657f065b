"""The text side of session search: what is indexed, the FTS5 query, which messages match.

CJK text is indexed as overlapping character bigrams plus the run's last character (unicode61
would make a sentence one token, trigram misses two-character words); a CJK query word is its
bigrams, or a prefix for one character, and found chunks are checked for the word itself.
Latin words stay words, case- and diacritic-folded; four letters or more also match as a
prefix, shorter ones whole or with an `s`. `Terms.matches` applies the same rules in Python to
say which messages matched. docs/design/storage.md says more.
"""

from __future__ import annotations

import functools
import operator
import re
import unicodedata
from collections.abc import Iterable, Sequence
from dataclasses import dataclass

from countbot_cli.errors import UsageError
from countbot_cli.textsafe import CJK_CHARS, LazyPattern, sanitize_line
from countbot_cli.words import CJK_STOP, STOP, cjk_bigrams

_CJK_RUN = LazyPattern(f"[{CJK_CHARS}]+")
_WORD = re.compile(r"[^\W_]+")  # what unicode61 keeps as a token (letters and digits)
_NOT_WORD_BEFORE = r"(?<![^\W_])"
PREFIX_MIN = 4
SNIPPET_CHARS = 160
SNIPPET_LEAD = 50


def index_text(text: str) -> str:
    """`text` as it is indexed: CJK runs replaced by their bigrams and last character."""
    if text.isascii():
        return text
    return _CJK_RUN.re.sub(lambda m: " " + " ".join(_grams(m.group())) + " ", text)


def _grams(run: str) -> list[str]:
    return [*map(operator.add, run, run[1:]), run[-1]]


def fold(text: str) -> str:
    """Case and, outside CJK runs, diacritics folded (as unicode61 with remove_diacritics
    does; kana keep their voicing marks: バ is not ハ). For matching, not for display."""
    lowered = text.lower()
    if lowered.isascii():
        return lowered
    parts = _CJK_RUN.re.split(lowered)
    runs = _CJK_RUN.re.findall(lowered)
    out = [_strip_marks(parts[0])]
    for run, part in zip(runs, parts[1:], strict=True):
        out += [run, _strip_marks(part)]
    return "".join(out)


def _strip_marks(text: str) -> str:
    decomposed = unicodedata.normalize("NFKD", text)
    return "".join(ch for ch in decomposed if not unicodedata.combining(ch))


@dataclass(frozen=True)
class Terms:
    """The words of a query: each is CJK (matched as a substring) or a Latin word."""

    words: tuple[str, ...]

    def patterns(self) -> list[re.Pattern[str]]:
        return [_pattern(w) for w in self.words]

    def matches(self, text: str) -> int:
        """How many of the words `text` holds."""
        folded = fold(text)
        return sum(1 for p in self.patterns() if p.search(folded))


def parse_query(words: str | Sequence[str]) -> Terms:
    """The terms of a query; UsageError when it holds nothing searchable. A question typed as
    a sentence is searched by its content words (`question_terms`) when it has any."""
    text = fold(words if isinstance(words, str) else " ".join(words))
    latin = [w for piece in _CJK_RUN.re.split(text) for w in _WORD.findall(piece)]
    runs = _CJK_RUN.re.findall(text)
    terms = question_terms(latin, runs) or dict.fromkeys([*latin, *runs])
    if not terms:
        raise UsageError("nothing to search for: give at least one word")
    return Terms(tuple(terms))


def question_terms(latin: list[str], runs: list[str]) -> dict[str, None]:
    """The content words of a query: Latin words but stop words and single letters, CJK runs
    of three characters or more as the bigrams of their content characters (`words.cjk_bigrams`:
    我上次说的火锅店 -> 上次 次说 火锅 锅店), shorter ones unless all function characters."""
    out: dict[str, None] = {}
    for w in latin:
        if len(w) >= 2 and w not in STOP:
            out[w] = None
    for run in runs:
        if len(run) > 2:
            out.update(dict.fromkeys(cjk_bigrams(run)))
        elif not all(ch in CJK_STOP for ch in run):
            out[run] = None
    return out


def _is_cjk(word: str) -> bool:
    return bool(_CJK_RUN.re.fullmatch(word))


def _quote(token: str) -> str:
    return '"' + token.replace('"', '""') + '"'


def is_phrase(word: str) -> bool:
    """A CJK word of three characters or more: found by its bigrams, then checked."""
    return len(word) > 2 and _is_cjk(word)


def fts_term(word: str) -> str:
    """The FTS5 MATCH expression of one query word."""
    if _is_cjk(word):
        if len(word) == 1:
            return _quote(word) + "*"
        grams = dict.fromkeys(word[i : i + 2] for i in range(len(word) - 1))
        return "(" + " AND ".join(_quote(g) for g in grams) + ")"
    if len(word) >= PREFIX_MIN:
        return _quote(word) + "*"
    return f"({_quote(word)} OR {_quote(word + 's')})"


@functools.lru_cache(maxsize=256)
def _pattern(word: str) -> re.Pattern[str]:
    if _is_cjk(word):
        return re.compile(re.escape(word))
    tail = "" if len(word) >= PREFIX_MIN else r"s?(?![^\W_])"
    return re.compile(_NOT_WORD_BEFORE + re.escape(word) + tail)


def snippet(text: str, terms: Terms, width: int = SNIPPET_CHARS) -> str:
    """One sanitised line of `text` around its first match (the start when none), with `…`
    where it was cut."""
    line = sanitize_line(text)
    folded = fold(line)
    starts = [m.start() for p in terms.patterns() if (m := p.search(folded))]
    at = min(starts) if starts and len(folded) == len(line) else 0
    start = max(0, at - SNIPPET_LEAD)
    if len(line) - start < width:
        start = max(0, len(line) - width)
    piece = line[start : start + width]
    return ("…" if start > 0 else "") + piece + ("…" if start + width < len(line) else "")


def best_matches(texts: Iterable[str], terms: Terms, limit: int) -> list[int]:
    """Positions of the `limit` texts holding the most words (earlier first among equals),
    returned in their original order. Reading stops once `limit` texts hold every word: no
    later one could come before them (so a long session is read only as far as needed)."""
    scored: list[tuple[int, int]] = []
    full = 0
    for i, t in enumerate(texts):
        n = terms.matches(t)
        if n:
            scored.append((n, i))
            full += n == len(terms.words)
            if full >= limit:
                break
    scored.sort(key=lambda ni: (-ni[0], ni[1]))
    return sorted(i for _, i in scored[:limit])
