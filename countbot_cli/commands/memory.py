"""The bodies of `countbot memory show|search|add|delete|pin|unpin|mute|unmute` (also `/memory`).

Every function writes plain text to an injected stream, returns an exit code and raises errors
from errors.py for bad input. Rows (drawn by ui/memory_rows.py) carry the entry's number (1..N
in file order, `MemoryStore.numbered`: header comments and blank lines do not count), the number
`why`, `pin`, `mute`, `delete` and `edit` take, and mark pinned and muted entries.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import TextIO

from countbot_cli.errors import EXIT_OK, UsageError
from countbot_cli.memory import marks as memory_marks
from countbot_cli.memory.marks import set_mark
from countbot_cli.memory.store import Entry, MemoryStore, normalize_content
from countbot_cli.textsafe import sanitize_line
from countbot_cli.ui.memory_rows import memory_rows


def memory_show(store: MemoryStore, out: TextIO, tail: int | None = None) -> int:
    """Every entry (or the last `tail`) with its number, then a note on unparsed lines."""
    if tail is not None and tail < 1:
        raise UsageError("--tail must be at least 1")
    entries = store.entries()
    if not entries:
        out.write(f"No memories yet ({_where(store)}).\n")
        _note_unparsed(store, out)
        return EXIT_OK
    shown = entries[-tail:] if tail is not None else entries
    noun = "entry" if len(entries) == 1 else "entries"
    what = f"last {len(shown)} of {len(entries)}" if len(shown) < len(entries) else len(entries)
    out.write(f"{_where(store)}: {what} {noun}\n")
    out.write(format_rows(store, shown))
    _note_unparsed(store, out)
    return EXIT_OK


def memory_search(store: MemoryStore, words: Sequence[str], out: TextIO, limit: int = 10) -> int:
    """The best matches first; says how many matched when more than `limit` did."""
    if limit < 1:
        raise UsageError("-n must be at least 1")
    found, total = store.search_total(list(words), limit=limit)
    query = sanitize_line(" ".join(words))
    if not found:
        out.write(f"No memory entry matches: {query}\n")
        return EXIT_OK
    out.write(format_rows(store, found))
    if total > len(found):
        out.write(f"({len(found)} of {total} matches shown; -n {total} shows them all)\n")
    return EXIT_OK


def memory_add(store: MemoryStore, text: str, out: TextIO) -> int:
    """Add a `user` entry; a duplicate is reported, not added, and is not an error."""
    entry = store.add(text, source="user")
    if entry is not None:
        out.write(f"Added to {_where(store)} as entry {store.number_of(entry)}:\n")
        out.write(format_rows(store, [entry]))
        return EXIT_OK
    wanted = normalize_content(text)
    same = [n for n, e in store.numbered() if normalize_content(e.content) == wanted]
    where = f" (entry {same[0]})" if same else ""
    out.write(f"Already stored{where}: {sanitize_line(wanted)}\n")
    return EXIT_OK


MARK_VERBS = {
    "pin": ("pinned", True, "Pinned (sent with every request)"),
    "unpin": ("pinned", False, "Unpinned"),
    "mute": ("muted", True, "Muted (never recalled)"),
    "unmute": ("muted", False, "Unmuted"),
}


def memory_mark(store: MemoryStore, verb: str, number: int, out: TextIO) -> int:
    """`memory pin|unpin|mute|unmute N` (memory/marks.py): echo the entry it applies to."""
    kind, on, done = MARK_VERBS[verb]
    entry = set_mark(store, number, "pinned" if kind == "pinned" else "muted", on)
    out.write(f"{done}: entry {number}\n")
    out.write(format_rows(store, [entry]))
    return EXIT_OK


def memory_delete(store: MemoryStore, numbers: Sequence[int], out: TextIO) -> int:
    """Delete entries by the numbers `memory show` prints; echo what was removed."""
    if not numbers:
        raise UsageError("give the numbers of the entries to delete (see `countbot memory show`)")
    wanted = sorted(set(numbers))
    removed = store.delete_entries(wanted)
    for n, entry in zip(wanted, removed, strict=True):
        out.write(f"Deleted entry {n}: {sanitize_line(entry.line)}\n")
    if wanted[0] <= len(store.entries()):
        out.write("The entries after it are renumbered: see `countbot memory show`.\n")
    return EXIT_OK


def format_rows(store: MemoryStore, entries: Sequence[Entry]) -> str:
    """The rows of `entries`, numbered as `memory show` numbers them, marks read from disk."""
    numbered = [(store.number_of(e) or 0, e) for e in entries]
    return memory_rows(numbered, memory_marks.load(store.path)) if numbered else ""


def _where(store: MemoryStore) -> str:
    return sanitize_line(str(store.path))


def _note_unparsed(store: MemoryStore, out: TextIO) -> None:
    bad = store.stats().unparsed_lines
    if not bad:
        return
    listed = ", ".join(str(n) for n in bad[:20]) + (", …" if len(bad) > 20 else "")
    out.write(
        f"Note: {len(bad)} line(s) could not be read as `YYYY-MM-DD|source|content` and are "
        f"not numbered (kept in the file; `memory edit` fixes or removes them); file lines: "
        f"{listed}\n"
    )
