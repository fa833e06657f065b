"""MEMORY.md store: format, duplicates, search ranking (CJK too), ranges, delete, locking, crashes."""

from __future__ import annotations

import random
import stat
from pathlib import Path

import pytest

from countbot_cli.errors import UsageError
from countbot_cli.memory import search as memory_index
from countbot_cli.memory.store import DEFAULT_HEADER, Entry, MemoryStore

HEADER_LINES = DEFAULT_HEADER.count("\n")  # entries of a fresh file start on the next line


@pytest.fixture
def path(tmp_path: Path) -> Path:
    return tmp_path / "MEMORY.md"


def contents(store: MemoryStore) -> list[str]:
    return [e.content for e in store.entries()]


# ---- format ----


def test_missing_file_reads_as_empty_and_is_not_created(path: Path) -> None:
    store = MemoryStore(path)
    assert store.entries() == []
    assert store.search("x") == []
    assert store.read() == [] and store.read(3) == []
    assert store.tail(5) == [] and store.recent(5) == []
    assert store.stats().total == 0
    assert not path.exists()


def test_first_add_writes_header_mode_0600_and_line_numbers(path: Path) -> None:
    store = MemoryStore(path)
    entry = store.add("likes tea", date="2024-01-15")
    assert entry == Entry(HEADER_LINES + 1, "2024-01-15", "user", "likes tea")
    assert path.read_text(encoding="utf-8") == DEFAULT_HEADER + "2024-01-15|user|likes tea\n"
    assert stat.S_IMODE(path.stat().st_mode) == 0o600
    assert all(line.startswith("#") or not line for line in DEFAULT_HEADER.splitlines())


def test_parses_header_blank_comment_pipe_crlf_bom_and_skips_bad_lines(path: Path) -> None:
    raw = (
        "\ufeff# my memory\n"  # 1 header with a BOM
        "\n"  # 2 blank
        "2024-01-01|user|uses a|b pipe | in content\n"  # 3 entry, split on the first two |
        "   # indented comment|x|y\n"  # 4 comment
        "no pipes here garbage\n"  # 5 bad
        "2024-13-01|user|bad month garbage\n"  # 6 bad date
        "2024-01-02||empty source garbage\n"  # 7 bad
        "2024-01-03|tool|   \n"  # 8 empty content: bad
        "2024-01-04|tool|windows line\r\n"  # 9 entry (CR stripped)
        " 2024-01-05 | auto-memory |  spaced fields \n"  # 10 entry, fields stripped
        "24-01-06|user|short year garbage\n"  # 11 bad
    )
    path.write_text(raw, encoding="utf-8", newline="")
    store = MemoryStore(path)
    assert store.entries() == [
        Entry(3, "2024-01-01", "user", "uses a|b pipe | in content"),
        Entry(9, "2024-01-04", "tool", "windows line"),
        Entry(10, "2024-01-05", "auto-memory", "spaced fields"),
    ]
    assert store.stats().unparsed_lines == (5, 6, 7, 8, 11)
    assert store.search("garbage") == []
    assert store.search("a|b")[0].line_no == 3


def test_entry_starting_file_with_bom_parses(path: Path) -> None:
    path.write_bytes("\ufeff2024-01-01|user|first\n".encode())
    assert contents(MemoryStore(path)) == ["first"]


def test_add_normalises_whitespace_and_drops_escape_sequences(path: Path) -> None:
    store = MemoryStore(path)
    entry = store.add("  line one\n\tline  two\r\n\x1b[31mred\x1b[0m\u3000end  ")
    assert entry is not None
    assert entry.content == "line one line two red end"
    assert path.read_text(encoding="utf-8").endswith(f"|user|{entry.content}\n")
    assert len(path.read_text(encoding="utf-8").splitlines()) == HEADER_LINES + 1


def test_add_to_file_without_trailing_newline_starts_a_new_line(path: Path) -> None:
    path.write_text("2024-01-01|user|old", encoding="utf-8")
    MemoryStore(path).add("new", date="2024-01-02")
    assert path.read_text(encoding="utf-8") == "2024-01-01|user|old\n2024-01-02|user|new\n"


def test_add_to_empty_file_writes_header(path: Path) -> None:
    path.write_bytes(b"")
    MemoryStore(path).add("x", date="2024-01-02")
    assert path.read_text(encoding="utf-8") == DEFAULT_HEADER + "2024-01-02|user|x\n"


def test_invalid_utf8_line_is_kept_verbatim_and_skipped(path: Path) -> None:
    path.write_bytes(b"2024-01-01|user|caf\xe9 latin1\n2024-01-02|user|ok\n")
    store = MemoryStore(path)
    assert contents(store) == ["ok"]
    assert store.stats().unparsed_lines == (1,)
    store.add("more", date="2024-01-03")
    store.delete([2])
    assert path.read_bytes() == b"2024-01-01|user|caf\xe9 latin1\n2024-01-03|user|more\n"


# ---- add ----


def test_duplicates_are_refused_whatever_whitespace_source_or_date(path: Path) -> None:
    store = MemoryStore(path)
    assert store.add("prefers  dark\nmode", date="2024-01-01") is not None
    assert store.add("prefers dark mode") is None
    assert store.add(" prefers dark mode ", source="tool", date="2025-01-01") is None
    assert store.add("Prefers dark mode") is not None  # case-sensitive
    assert contents(store) == ["prefers dark mode", "Prefers dark mode"]


def test_hand_edited_whitespace_still_counts_as_duplicate(path: Path) -> None:
    path.write_text("2024-01-01|user|two  spaces\tand tab\n", encoding="utf-8")
    assert MemoryStore(path).add("two spaces and tab") is None


def test_empty_content_is_refused_and_nothing_written(path: Path) -> None:
    store = MemoryStore(path)
    with pytest.raises(UsageError):
        store.add(" \n\t ")
    with pytest.raises(UsageError):
        store.add_many(["fine", "\x1b\x07"], source="auto-overflow")
    assert not path.exists()


def test_bad_source_or_date_is_a_value_error(path: Path) -> None:
    store = MemoryStore(path)
    for kwargs in ({"source": "two words"}, {"source": "a|b"}, {"date": "2024-02-30"}):
        with pytest.raises(ValueError):
            store.add("x", **kwargs)


def test_add_many_is_one_write_and_skips_duplicates(
    path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    store = MemoryStore(path)
    store.add("a", date="2024-01-01")
    writes: list[bytes] = []
    real_write = store._write

    def counting_write(data: bytes) -> None:
        writes.append(data)
        real_write(data)

    monkeypatch.setattr(store, "_write", counting_write)
    added = store.add_many(["b", "a", "c", "b ", "d"], source="auto-overflow", date="2024-01-02")
    assert [e.content for e in added] == ["b", "c", "d"]
    assert [e.line_no for e in added] == [HEADER_LINES + 2, HEADER_LINES + 3, HEADER_LINES + 4]
    assert len(writes) == 1
    assert store.add_many(["a", "c"], source="auto-overflow") == []
    assert len(writes) == 1  # nothing new: no write at all
    assert store.entries()[1:] == added


# ---- search ----


def make(path: Path, rows: list[tuple[str, str]]) -> MemoryStore:
    lines = [f"{day}|user|{text}\n" for day, text in rows]
    path.write_text("# header\n" + "".join(lines), encoding="utf-8")
    return MemoryStore(path)


def test_search_ranks_all_words_then_more_words_then_newer(path: Path) -> None:
    store = make(
        path,
        [
            ("2024-01-01", "redis cache for sessions"),  # line 2: 1 of 2
            ("2024-01-02", "postgres and Redis in docker"),  # line 3: 2 of 2
            ("2024-01-03", "REDIS only"),  # line 4: 1 of 2, newer
            ("2023-06-01", "redis added late but dated old"),  # line 5: 1 of 2, oldest date
            ("2024-01-03", "another redis, same day later line"),  # line 6
            ("2024-01-03", "nothing relevant"),  # line 7
        ],
    )
    assert [e.line_no for e in store.search("redis postgres")] == [3, 6, 4, 2, 5]
    assert [e.line_no for e in store.search(["Postgres", "docker", "redis"])] == [3, 6, 4, 2, 5]
    assert [e.line_no for e in store.search("redis", limit=2)] == [6, 4]
    found, total = store.search_total("redis", limit=2)
    assert total == 5 and len(found) == 2
    assert store.search("absent") == []


def test_search_more_matched_words_beat_newer_entries(path: Path) -> None:
    store = make(
        path,
        [
            ("2024-01-01", "alpha beta"),  # 2 of 3, oldest
            ("2024-05-01", "alpha"),  # 1 of 3, newest
            ("2024-03-01", "alpha beta gamma"),  # all 3
        ],
    )
    assert [e.content for e in store.search("gamma alpha beta")] == [
        "alpha beta gamma",
        "alpha beta",
        "alpha",
    ]


def test_search_cjk_substrings_bigrams_and_mixed_words(path: Path) -> None:
    store = make(
        path,
        [
            ("2024-01-01", "用户喜欢喝咖啡；住在上海"),
            ("2024-01-02", "使用 Redis 做缓存配置"),
            ("2024-01-03", "住在北京的朋友"),
            ("2023-01-01", "用户喜欢咖啡豆"),
        ],
    )
    coffee = "用户喜欢喝咖啡；住在上海"
    assert [e.content for e in store.search("咖啡")] == [coffee, "用户喜欢咖啡豆"]  # newer first
    assert [e.content for e in store.search("上海 咖啡")] == [coffee, "用户喜欢咖啡豆"]
    assert store.search("上海咖啡")[0].content == coffee  # no such substring: bigrams 上海, 咖啡
    # "喜欢咖啡" is a whole substring of the older entry: it ranks above the bigram match
    assert [e.content for e in store.search("喜欢咖啡")] == ["用户喜欢咖啡豆", coffee]
    assert [e.content for e in store.search("redis配置")] == ["使用 Redis 做缓存配置"]
    assert [e.content for e in store.search("上海，")] == [coffee]  # punctuation dropped
    # a sentence as the query: sampled bigrams (用户, 欢喝, 咖啡 of six) find the entry
    assert store.search("我想知道用户喜欢喝什么咖啡")[0].content == coffee
    assert store.search("深圳") == []
    assert [e.content for e in store.search("北京")] == ["住在北京的朋友"]


def test_search_matches_latin_words_whole_not_inside_other_words(path: Path) -> None:
    store = make(
        path,
        [
            ("2024-01-01", "visits the parents in Leiden every month"),
            ("2024-01-02", "pays the rent on the 3rd"),
            ("2024-01-03", "this week: deployment of the new API"),
            ("2024-01-04", "two cats at home"),
        ],
    )
    assert [e.content for e in store.search("rent")] == ["pays the rent on the 3rd"]
    assert store.search("is") == []  # not inside "visits" nor "this"
    assert [e.line_no for e in store.search("cat")] == [5]  # a plural still matches
    assert [e.line_no for e in store.search("deploy")] == [4]  # a long word as a prefix
    assert [e.line_no for e in store.search("parents")] == [2]


def reference_order(store: MemoryStore, query: str) -> list[int]:
    """Brute-force ranking with plain `in` checks, to compare the indexed search with."""
    terms = memory_index.query_terms([query])
    entries = store.entries()
    order = sorted(range(len(entries)), key=lambda i: (entries[i].date, i))
    rank = {i: r for r, i in enumerate(order)}
    keys = []
    for i, e in enumerate(entries):
        text = e.content.casefold()
        m = whole = 0
        partial = 0.0
        for t in terms:
            if memory_index.word_pattern(t.text).search(text):
                m, whole = m + 1, whole + 1
            elif t.bigrams:
                share = sum(b in text for b in t.bigrams) / len(t.bigrams)
                if share >= memory_index.BIGRAM_MIN_SHARE:
                    m, partial = m + 1, partial + share
        if m:
            keys.append(((m, whole, partial, rank[i]), e.line_no))
    return [line for _, line in sorted(keys, reverse=True)]


def test_indexed_search_agrees_with_brute_force(path: Path) -> None:
    rng = random.Random(7)
    words = ["ab", "abc", "Bc", "x", "上海", "咖啡", "喜欢", "住在", "北京", "q"]
    rows = []
    for i in range(3000):
        day = f"2024-0{rng.randint(1, 9)}-{rng.randint(10, 28)}"
        rows.append((day, " ".join(rng.sample(words, rng.randint(1, 4))) + f" n{i}"))
    store = make(path, rows)
    for query in [
        "ab",
        "x",
        "q",
        "abc bc",
        "上海咖啡",
        "喜欢上海北京",
        "x 上海 bc",
        "n29",
        "zzz ab",
    ]:
        expected = reference_order(store, query)
        assert [e.line_no for e in store.search(query, limit=None)] == expected, query
        found, total = store.search_total(query, limit=7)
        assert [e.line_no for e in found] == expected[:7] and total == len(expected)


def test_search_rejects_empty_queries_and_bad_limits(path: Path) -> None:
    store = make(path, [("2024-01-01", "x")])
    queries: list[str | list[str]] = ["", "   ", "，。", []]
    for query in queries:
        with pytest.raises(UsageError):
            store.search(query)
    with pytest.raises(ValueError):
        store.search("x", limit=0)
    assert len(store.search("x", limit=None)) == 1


def test_search_does_not_reparse_an_unchanged_file_but_sees_changes(
    path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    store = make(path, [("2024-01-01", "first fact")])
    parses = []
    real = memory_index.Snapshot.parse.__func__  # type: ignore[attr-defined]

    def counting(cls: type, data: bytes, *, key: tuple[int, ...] | None) -> memory_index.Snapshot:
        parses.append(1)
        return real(cls, data, key=key)

    monkeypatch.setattr(memory_index.Snapshot, "parse", classmethod(counting))
    for _ in range(5):
        assert len(store.search("fact")) == 1
    assert len(parses) == 1
    MemoryStore(path).add("second fact")  # another writer (it parses the file itself)
    before = len(parses)
    assert len(store.search("fact")) == 2
    assert len(parses) == before + 1
    store.search("fact")
    assert len(parses) == before + 1


# ---- read / tail / recent ----


def test_read_ranges_follow_countbot_semantics(path: Path) -> None:
    store = make(path, [(f"2024-01-0{i}", f"e{i}") for i in range(1, 6)])  # lines 2..6

    def lines(*args: int | None) -> list[int]:
        return [e.line_no for e in store.read(*args)]

    assert lines() == [2, 3, 4, 5, 6]
    assert lines(3) == [3]  # no end: one line
    assert lines(3, 5) == [3, 4, 5]
    assert lines(1) == [2]  # clamped to the first entry line
    assert lines(1, 3) == [2, 3]
    assert lines(100) == [6]  # clamped to the last
    assert lines(5, 2) == [5]  # end below start: start
    assert lines(4, 100) == [4, 5, 6]
    assert lines(None, 3) == [2, 3]


def test_tail_is_file_order_recent_is_newest_first(path: Path) -> None:
    store = make(
        path,
        [("2024-01-01", "a"), ("2024-03-01", "b"), ("2024-02-01", "c"), ("2024-03-01", "d")],
    )
    assert [e.content for e in store.tail(2)] == ["c", "d"]
    assert [e.content for e in store.recent(3)] == ["d", "b", "c"]
    assert store.tail(0) == [] and store.recent(0) == []


# ---- delete ----


def test_delete_removes_only_those_lines_byte_for_byte(path: Path) -> None:
    raw = [
        b"# custom header\n",
        b"\n",
        b"2024-01-01|user|keep one\n",
        b"2024-01-02|user|drop one\n",
        b"not parsable\n",
        b"2024-01-03|tool|keep  two\r\n",
        b"2024-01-04|user|drop two\n",
        b"2024-01-05|user|keep three",
    ]
    path.write_bytes(b"".join(raw))
    store = MemoryStore(path)
    assert store.pop_lines([7, 4, 4]) == ["2024-01-02|user|drop one", "2024-01-04|user|drop two"]
    expected = [r for i, r in enumerate(raw, 1) if i not in (4, 7)]
    assert path.read_bytes() == b"".join(expected)
    assert store.delete([4]) == 1  # the unparsable line, now line 4
    assert path.read_bytes() == b"".join(expected[:3] + expected[4:])
    assert contents(store) == ["keep one", "keep  two", "keep three"]


def test_delete_refuses_header_blank_and_missing_lines(path: Path) -> None:
    path.write_text("# header\n\n2024-01-01|user|x\n", encoding="utf-8")
    store = MemoryStore(path)
    before = path.read_bytes()
    for lines, word in (
        ([1], "header"),
        ([2], "blank"),
        ([3, 9], "no such line"),
        ([0], "no such"),
    ):
        with pytest.raises(UsageError, match=word):
            store.delete(lines)
    with pytest.raises(UsageError):
        store.delete([])
    assert path.read_bytes() == before


def test_one_vocabulary_for_search_the_tool_and_recall() -> None:
    """memory/search.py makes the words of a query and matches entries, for all three users."""
    terms = memory_index.query_terms(["Redis 端口配置"])
    assert [t.text for t in terms] == ["redis", "端口配置"]
    assert memory_index.has_every_term(terms, "The REDIS 端口配置 is 6380")
    assert not memory_index.has_every_term(terms, "redis only")
    # recall: stop words dropped, CJK cut into bigrams, a short Latin word matched whole
    words = memory_index.query_words("what is the redis 端口?")
    assert words == ["端口", "redis"]
    patterns = [memory_index.word_pattern(w) for w in [*words, "use"]]
    assert memory_index.words_matched(patterns, "Redis 端口 6380, the user's choice") == 2
    # both read CJK alike: a compatibility ideograph is CJK for the search and for recall
    assert memory_index.query_terms(["豈樂諾"])[0].bigrams == ("豈樂", "樂諾")
    assert memory_index.query_words("豈樂諾") == ["豈樂", "樂諾"]
