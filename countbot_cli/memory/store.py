"""The long-term memory store: MEMORY.md, one entry a line.

Format (SPEC §5; CountBot's `{date}|{source}|{content}`)::

    YYYY-MM-DD|source|content

- The date is the day the content was said: a line distilled from messages carries the local
  date of those messages (the newest of them), not the day it was written, so a session resumed
  days later or `/compact` of old messages dates its facts right; `add`, `memory add` and the
  tool date a line today (`date=None`).
- `source` is `auto-overflow`, `auto-memory`, `tool` or `user` (CountBot channel names such as
  `web-chat` are read too). `content` is one line: on `add` escape sequences and control characters
  are dropped and every run of whitespace, newlines included, becomes one space. `|` inside content is fine:
  a line is split on its first two `|` only.
- Blank lines and lines starting with `#` are ignored, so the file carries a header.
- A line that does not parse (fewer than two `|`, a bad date, an empty source or content, bytes
  that are not UTF-8) is skipped by search but kept byte for byte when the file is rewritten.
- Entries are numbered 1..N in file order (`numbered`, `entry`): the numbers `countbot memory
  show` prints and `why`, `pin`, `mute`, `delete`, `edit` and `/context` take. Header comments,
  blank lines and lines that do not parse do not count, so a header never shifts them.
  `Entry.line_no` stays the 1-based line of the file (for rewriting it).

Improvements on CountBot (digest §4, §9.4): an identical entry is not added twice; every write
holds an exclusive lock (`MEMORY.md.lock` in the cache folder, `fcntl.flock`), re-reads the file under it and replaces
the file atomically (temp file in the same folder, fsync, `os.replace`, fsync of the folder), so
concurrent writers lose nothing and a crash leaves the old or the new file, never half of one;
search ranks its results and understands Chinese and Japanese text without spaces.

Reads take no lock (the file is only ever replaced whole). Parsed contents are cached per store,
keyed by the file's identity, size and mtime, so repeated searches do not parse again. Before a
read, conflict copies a file-sync tool made of the file are merged into it (memory/merge.py),
looked for when its folder changed, with one line through `on_notice` for each.
"""

from __future__ import annotations

import contextlib
import os
import sys
from bisect import bisect_left
from collections.abc import Callable, Collection, Iterable, Iterator, Mapping
from contextlib import contextmanager
from datetime import date as Date
from pathlib import Path
from typing import Any, NamedTuple

from countbot_cli import fileio
from countbot_cli.config.derived import lock_file
from countbot_cli.errors import StorageError, UsageError
from countbot_cli.memory import merge
from countbot_cli.memory import search as _mi
from countbot_cli.memory.search import Entry
from countbot_cli.memory.sources import append as _append_sources
from countbot_cli.memory.sources import line_key
from countbot_cli.textsafe import sanitize, sanitize_line

__all__ = [
    "DEFAULT_HEADER",
    "SOURCES",
    "Entry",
    "MemoryStats",
    "MemoryStore",
    "NewLine",
    "normalize_content",
]

SOURCES = ("auto-overflow", "auto-memory", "tool", "user")

DEFAULT_HEADER = (
    "# countbot long-term memory\n"
    "#\n"
    "# One entry a line: YYYY-MM-DD|source|content\n"
    "# source is auto-overflow, auto-memory, tool or user; content is a single line and may\n"
    "# contain '|'. Blank lines and lines starting with '#' are ignored. Edit by hand if you\n"
    "# like, or use `countbot memory show|search|add|delete`.\n"
    "\n"
)


class NewLine(NamedTuple):
    """A line to add: its content, the day it was said (None: today) and the link to where it
    came from (`session`, `messages`, kept in the sources sidecar; None: nothing recorded)."""

    content: str
    date: Date | str | None = None
    link: dict[str, Any] | None = None


class MemoryStats(NamedTuple):
    total: int
    sources: dict[str, int]
    first_date: str | None
    last_date: str | None
    unparsed_lines: tuple[int, ...]


def normalize_content(text: str) -> str:
    """One line: escape sequences and control characters dropped (textsafe), every run of
    whitespace, newlines included, one space, lone surrogates U+FFFD."""
    return _mi.replace_surrogates(sanitize_line(text))


def _check_source(source: str) -> str:
    if not _mi.valid_source(source):
        raise ValueError(f"invalid memory source {source!r}")
    return source


def _date_text(when: Date | str | None) -> str:
    if when is None:
        return Date.today().isoformat()
    if isinstance(when, Date):
        return when.isoformat()
    if not _mi.valid_date(when):
        raise ValueError(f"invalid memory date {when!r} (want YYYY-MM-DD)")
    return when


class MemoryStore:
    """MEMORY.md at `path`. Safe to use from several processes and threads at once."""

    def __init__(
        self,
        path: Path,
        *,
        lock_timeout: float = 10.0,
        on_notice: Callable[[str], None] | None = None,
    ) -> None:
        self.path = Path(path)
        self.lock_timeout = lock_timeout
        self.on_notice = on_notice or _say  # what a merge of conflict copies says
        self._snap: _mi.Snapshot | None = None
        self._watch = merge.Watch()
        # told of each write's new lines, one listener a name: the Recall that `/model` (or a
        # fallback link) builds on this store replaces the one before instead of adding to it
        self.on_added: dict[str, Callable[[list[Entry]], None]] = {}

    # ------------------------------------------------------------------ reading

    def entries(self) -> list[Entry]:
        return list(self._load().entries())

    def snapshot(self) -> _mi.Snapshot:
        """The file as it is now, parsed (never mutated: a write makes a new one)."""
        return self._load()

    def tail(self, n: int) -> list[Entry]:
        """The last `n` entries in file order (oldest of them first)."""
        if n <= 0:
            return []
        return list(self._load().entries()[-n:])

    def recent(self, n: int = 10) -> list[Entry]:
        """The `n` newest entries by date, then by position in the file; newest first."""
        snap = self._load()
        if n <= 0:
            return []
        order = snap.index().by_age
        return [snap.entry(i) for i in reversed(order[-n:])]

    def read(self, start_line: int | None = None, end_line: int | None = None) -> list[Entry]:
        """Entries on lines `start_line..end_line` (inclusive), CountBot's `read` semantics.

        `start_line` is clamped into the span of entry lines and `end_line` into
        [start_line, last entry line]; `end_line=None` with a start means that one line; no
        start means from the first entry; neither means every entry. The memory tool should call
        `recent()` when the model gives no start line, as CountBot does.
        """
        snap = self._load()
        if not snap.contents:
            return []
        first, last = snap.line_nos[0], snap.line_nos[-1]
        if start_line is None:
            start = first
            end = last if end_line is None else end_line
        else:
            start = start_line
            end = start_line if end_line is None else end_line
        start = min(max(start, first), last)
        end = min(max(end, start), last)
        return [e for e in snap.entries() if start <= e.line_no <= end]

    def search(self, words: str | Iterable[str], *, limit: int | None = 10) -> list[Entry]:
        """Best matches first: all words matched, then more words, then newer. See `search_total`."""
        return self.search_total(words, limit=limit)[0]

    def search_total(
        self, words: str | Iterable[str], *, limit: int | None = 10
    ) -> tuple[list[Entry], int]:
        """The best `limit` matches (None: all) and how many entries matched at all.

        `words` (a string is split on whitespace) are matched case-insensitively as substrings of
        the content. A word mixing scripts is split into runs (`Redis配置` is `redis` and `配置`);
        a CJK run of three or more characters that is not found whole also matches an entry
        holding at least half of its character bigrams, ranked below whole matches.
        """
        if limit is not None and limit < 1:
            raise ValueError("limit must be at least 1")
        terms = _mi.query_terms([words] if isinstance(words, str) else list(words))
        if not terms:
            raise UsageError("nothing to search for: give at least one word")
        snap = self._load()
        ranked, total = snap.index().search(terms, limit)
        return [snap.entry(i) for i in ranked], total

    def numbered(self) -> list[tuple[int, Entry]]:
        """(number, entry) for every entry, numbered 1..N in file order."""
        return list(enumerate(self._load().entries(), 1))

    def entry(self, number: int) -> Entry:
        """Entry `number` (1..N, as `memory show` numbers them); UsageError when there is none."""
        entries = self._load().entries()
        if not 1 <= number <= len(entries):
            have = f"entries 1-{len(entries)}" if entries else "no entries"
            raise UsageError(
                f"there is no memory entry {number} ({self.path} has {have})",
                hint="`countbot memory show` lists the entries with their numbers",
            )
        return entries[number - 1]

    def number_of(self, entry: Entry) -> int | None:
        """The number `memory show` gives `entry` (found by its file line), None if gone."""
        snap = self._load()
        i = bisect_left(snap.line_nos, entry.line_no)
        if i < len(snap.line_nos) and snap.line_nos[i] == entry.line_no:
            return i + 1
        return None

    def stats(self) -> MemoryStats:
        snap = self._load()
        sources: dict[str, int] = {}
        for s in snap.sources:
            sources[s] = sources.get(s, 0) + 1
        dates = snap.dates
        return MemoryStats(
            total=len(snap.contents),
            sources=sources,
            first_date=min(dates) if dates else None,
            last_date=max(dates) if dates else None,
            unparsed_lines=tuple(snap.bad_lines),
        )

    # ------------------------------------------------------------------ writing

    def add(
        self,
        content: str,
        source: str = "user",
        date: Date | str | None = None,
        *,
        origin: dict[str, Any] | None = None,
    ) -> Entry | None:
        """Append one entry; None when an identical entry is already stored. `origin`
        (`session`, `messages`): where it came from, kept in the sidecar (memory/sources.py)."""
        added = self.add_many([content], source, date=date, origin=origin)
        return added[0] if added else None

    def add_many(
        self,
        contents: Iterable[str],
        source: str,
        *,
        date: Date | str | None = None,
        origin: dict[str, Any] | None = None,
    ) -> list[Entry]:
        """Append several entries in one locked write; duplicates (stored or repeated) are skipped.

        An empty item raises UsageError before anything is written.
        """
        return self.add_lines([NewLine(c, date, origin) for c in contents], source)

    def add_lines(self, items: Iterable[NewLine], source: str) -> list[Entry]:
        """`add_many` with a date (when it was said) and a link to its messages for each line."""
        rows = [NewLine(normalize_content(c), _date_text(d), o) for c, d, o in items]
        if any(not r.content for r in rows):
            raise UsageError("a memory entry cannot be empty")
        src = _check_source(source)
        with self._locked():
            snap = self._load()
            seen = snap.normalized()
            fresh: list[NewLine] = []
            for r in rows:
                if r.content not in seen:
                    seen.add(r.content)
                    fresh.append(r)
            if not fresh:
                return []
            new = snap.appended(
                [(str(r.date), src, r.content) for r in fresh], header=DEFAULT_HEADER
            )
            self._write(new.render())
            self._snap = new.with_key(self._stat_key())
            total = len(new.contents)
            added = [new.entry(i) for i in range(total - len(fresh), total)]
            records = [
                {"key": line_key(e.line), "source": src, **r.link}
                for e, r in zip(added, fresh, strict=True)
                if r.link is not None
            ]
            _append_sources(self._target(), records)  # under the lock of the lines they describe
        for listener in list(self.on_added.values()):  # after the lock: recall embeds them
            listener(added)
        return added

    def delete(self, line_numbers: Iterable[int]) -> int:
        """Delete the entries on these lines; returns how many. See `pop_lines`."""
        return len(self.pop_lines(line_numbers))

    def pop_lines(self, line_numbers: Iterable[int]) -> list[str]:
        """Delete these lines (entries, or lines that did not parse) in one locked atomic write.

        Line numbers refer to the file as it is now. Header, comment and blank lines, and
        numbers past the end, are refused with UsageError and nothing is deleted. Returns the
        removed lines as they were in the file; every other line is kept byte for byte.
        """
        wanted = sorted(set(line_numbers))
        if not wanted:
            raise UsageError("give at least one line number to delete")
        with self._locked():
            snap = self._load()
            for n in wanted:
                problem = snap.undeletable(n)
                if problem:
                    raise UsageError(f"line {n} of {self.path}: {problem}; nothing deleted")
            new, removed = snap.without(wanted)
            self._write(new.render())
            self._snap = new.with_key(self._stat_key())
        return removed

    def delete_entries(self, numbers: Iterable[int]) -> list[Entry]:
        """Delete entries by number (1..N, as `memory show` numbers them) in one locked atomic
        write; an unknown number raises UsageError and nothing is deleted. Returns the entries
        removed, in file order."""
        wanted = sorted(set(numbers))
        if not wanted:
            raise UsageError("give the numbers of the entries to delete (see `memory show`)")
        with self._locked():
            gone = [self.entry(n) for n in wanted]
            new, _removed = self._load().without([e.line_no for e in gone])
            self._write(new.render())
            self._snap = new.with_key(self._stat_key())
        return gone

    def rewrite(
        self,
        drop: Collection[str],
        change: Mapping[str, str],
        before: Callable[[list[Entry], dict[str, Entry]], None] | None = None,
    ) -> list[Entry] | None:
        """One locked atomic rewrite against the file as it is now (`memory tidy`): the entries
        whose `sources.line_key` is in `drop` are removed, those in `change` get that content
        (date and source kept). None, and nothing written, when one of them is gone (changed
        by someone else since). `before(removed, changed)` runs under the lock just before the
        write (changed: old key -> the new entry), so an archive is written first. Every other
        line, a concurrent writer's included, is kept byte for byte."""
        with self._locked():
            snap = self._load()
            keys = {line_key(e.line): e for e in snap.entries()}
            if any(k not in keys for k in (*drop, *change)):
                return None
            by_line = {keys[k].line_no: k for k in (*drop, *change)}
            lines: list[str] = []
            moved: dict[str, int] = {}  # changed key -> its line in the new file
            for n, raw in enumerate(snap.lines, 1):
                key = by_line.get(n)
                if key is None:
                    lines.append(raw)
                elif key in change:
                    e = keys[key]
                    lines.append(f"{e.date}|{e.source}|{normalize_content(change[key])}")
                    moved[key] = len(lines)
            text = "\n".join(lines) + ("\n" if snap.ends_nl and lines else "")
            new = _mi.Snapshot.parse(text.encode("utf-8", "surrogateescape"), key=None)
            at = {e.line_no: e for e in new.entries()}
            changed = {k: at[n] for k, n in moved.items()}
            if before is not None:
                before([keys[k] for k in drop], changed)
            self._write(new.render())
            self._snap = new.with_key(self._stat_key())
        return [keys[k] for k in drop]

    def hold_lock(self) -> contextlib.AbstractContextManager[None]:
        """Hold the MEMORY.md lock (e.g. while the user edits the file); writers wait."""
        return self._locked()

    # ------------------------------------------------------------------ file handling

    def _target(self) -> Path:
        return Path(os.path.realpath(self.path))

    def _stat_key(self) -> tuple[int, ...] | None:
        try:
            st = os.stat(self._target())
        except FileNotFoundError:
            return None
        except OSError as exc:
            raise fileio.read_error(self.path, exc, "the memory file") from exc
        return (st.st_dev, st.st_ino, st.st_size, st.st_mtime_ns)

    def _load(self) -> _mi.Snapshot:
        target = self._target()
        if self._watch.due(target.parent):
            try:
                merge.reconcile(target, self._locked, self.on_notice)
            except (StorageError, OSError) as exc:
                self._watch.again()
                self.on_notice(f"could not merge the conflict copies of {self.path}: {exc}")
        key = self._stat_key()
        snap = self._snap
        if snap is not None and snap.key == key:
            return snap
        if key is None:
            snap = _mi.Snapshot.parse(b"", key=None)
        else:
            try:
                data = self._target().read_bytes()
            except FileNotFoundError:
                return _mi.Snapshot.parse(b"", key=None)
            except OSError as exc:
                raise fileio.read_error(self.path, exc, "the memory file") from exc
            # stat again: if the file changed while being read, do not cache under the old key
            snap = _mi.Snapshot.parse(data, key=key if key == self._stat_key() else ())
        self._snap = snap
        return snap

    @contextmanager
    def _locked(self) -> Iterator[None]:
        target = self._target()
        try:
            target.parent.mkdir(parents=True, exist_ok=True)
        except OSError as exc:
            raise fileio.folder_error(target.parent, exc, "folder of the memory file") from exc
        lock = lock_file(target)
        with self._watch.holding(), fileio.locked(lock, self.lock_timeout, str(self.path)):
            _remove_stale_temps(target)
            yield

    def _write(self, data: bytes) -> None:
        try:
            fileio.atomic_write(self._target(), data)
            self._watch.wrote(self._target().parent)
        except OSError as exc:
            raise StorageError(f"cannot write {self.path}: {exc.strerror or exc}") from exc


def _say(text: str) -> None:
    """The notice of a store made without `on_notice`: one line on stderr."""
    sys.stderr.write(f"countbot: {sanitize(text)}\n")
    sys.stderr.flush()


def _remove_stale_temps(target: Path) -> None:
    """Temp files left by a writer that was killed. Only called while holding the lock."""
    for stale in target.parent.glob(f".{target.name}.*{fileio.TEMP_SUFFIX}"):
        with contextlib.suppress(OSError):
            stale.unlink()
