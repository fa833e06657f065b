"""`countbot memory tidy`: merges, supersessions and drops of MEMORY.md lines, proposed and
applied only on a yes. The questions are the UI's (commands/memory_tidy.py).

`find` proposes what the rules settle cheaply (an inverted index of words: same words, one
line's words inside another's, the same words with another value or a newer line that says it
changed: memory/versions.py's rule, which recall reads too); `ask_model` sends the related
groups left in at most MAX_CALLS bounded calls and ignores any malformed answer. `apply` makes one proposal real under MEMORY.md's lock against
the file as it is then; the lines taken out go to the archive with their sources. Pinned lines
are never removed. docs/design/tidy.md says more.
"""

from __future__ import annotations

import math
import os
import re
from collections import defaultdict
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from datetime import date
from pathlib import Path
from typing import TYPE_CHECKING, Any

from countbot_cli.jsonsafe import loads_bounded
from countbot_cli.memory import archive, sources, versions
from countbot_cli.memory import marks as memory_marks
from countbot_cli.memory.search import Entry
from countbot_cli.memory.store import MemoryStore
from countbot_cli.memory.summariser import Postponed, Summariser
from countbot_cli.prompts import tidy_prompt

if TYPE_CHECKING:
    from countbot_cli.config.settings import Settings
    from countbot_cli.provider import Provider

KINDS = ("drop", "merge", "supersede")
MODEL_SHARE = 0.15  # related enough to ask the model about (two rare words shared, at least)
HINT_ENTRIES = 200  # the toolbar suggests /memory tidy from this many entries ...
HINT_GROWTH = 100  # ... once the file grew by this many since the last tidy
RARE_DF = 3  # a pair shares at least one word this rare (a name, a number, a host)
MAX_CALLS = 2
GROUP_CHARS = 6000  # entries shown in one call
MAX_GROUP = 5
_OBJECT = re.compile(r"\{[^{}]*\}")


@dataclass
class Proposal:
    kind: str  # drop | merge | supersede
    keep: Entry  # the line that stays
    remove: list[Entry]  # the lines that leave MEMORY.md (archived)
    text: str  # the kept line's content after it (its own unless merged or edited)
    why: str


def classify(a: Entry, b: Entry, wa: set[str], wb: set[str]) -> Proposal | None:
    """The rule-based proposal for two entries, if any (memory/versions.py's rule)."""
    r = versions.relation(a, b, wa, wb)
    return None if r is None else Proposal(r.kind, r.keep, [r.other], r.keep.content, r.why)


def _pairs(entries: Sequence[Entry], bags: list[set[str]]) -> dict[tuple[int, int], float]:
    """Entry pairs (indices) sharing two words or more that are not everywhere, with how
    related they are: the rarity-weighted share of their words (a shared name weighs more than
    a shared "deploys", so related lines pair before lines that are merely phrased alike)."""
    index: defaultdict[str, list[int]] = defaultdict(list)
    for i, bag in enumerate(bags):
        for w in bag:
            index[w].append(i)
    cap = versions.related_words(len(entries))
    common: defaultdict[tuple[int, int], int] = defaultdict(int)
    for hits in index.values():
        if 1 < len(hits) <= cap:
            for x in range(len(hits)):
                for y in range(x + 1, len(hits)):
                    common[(hits[x], hits[y])] += 1
    n = len(entries) + 1
    weight = {w: math.log(n / len(hits)) for w, hits in index.items()}

    def related(a: set[str], b: set[str]) -> float:
        shared = a & b
        if not any(len(index[w]) <= RARE_DF for w in shared):
            return 0.0  # only phrased alike: nothing names the same thing
        union = sum(weight[w] for w in a | b)
        return sum(weight[w] for w in shared) / union if union else 0.0

    return {p: related(bags[p[0]], bags[p[1]]) for p, k in common.items() if k >= 2}


def find(store: MemoryStore) -> tuple[list[Proposal], list[list[Entry]]]:
    """The rule-based proposals (best first), and the groups of related entries they left
    for the model."""
    entries = store.entries()
    marks = memory_marks.load(store.path)
    bags = [versions.words(e.content) for e in entries]
    pairs = sorted(_pairs(entries, bags).items(), key=lambda kv: -kv[1])
    used: set[int] = set()
    found: list[Proposal] = []
    left: list[tuple[int, int]] = []
    for (i, j), share in pairs:
        if i in used or j in used:
            continue
        p = classify(entries[i], entries[j], bags[i], bags[j])
        if p is not None and p.kind == "drop" and marks.is_pinned(p.remove[0]):
            p = Proposal("drop", p.remove[0], [p.keep], p.remove[0].content, p.why)  # the pin
        if p is not None and not any(marks.is_pinned(e) for e in p.remove):
            found.append(p)
            used.update((i, j))
        elif share >= MODEL_SHARE:
            left.append((i, j))
    return found, _groups(entries, [(i, j) for i, j in left if not {i, j} & used])


def _groups(entries: Sequence[Entry], pairs: list[tuple[int, int]]) -> list[list[Entry]]:
    """Groups of related entries from the pairs, strongest pair first: a pair starts a group,
    or joins the group one of its entries is in while that has room (MAX_GROUP)."""
    groups: list[list[int]] = []
    member: dict[int, int] = {}
    for i, j in pairs:
        gi, gj = member.get(i), member.get(j)
        if gi is None and gj is None:
            member[i] = member[j] = len(groups)
            groups.append([i, j])
        elif (gi is None) != (gj is None):
            g = gi if gi is not None else gj
            assert g is not None
            if len(groups[g]) < MAX_GROUP:
                new = j if gi is not None else i
                member[new] = g
                groups[g].append(new)
    return [[entries[i] for i in sorted(g)] for g in groups]


def ask_model(
    store: MemoryStore,
    groups: list[list[Entry]],
    summarise: Callable[[str, str], str],
    language: str,
) -> list[Proposal]:
    """The model's proposals for `groups`, in at most MAX_CALLS calls (SummaryError and
    Postponed propagate to the caller, which keeps the rule-based ones)."""
    number = {e.line_no: n for n, e in store.numbered()}
    marks = memory_marks.load(store.path)
    out: list[Proposal] = []
    batches: list[list[list[Entry]]] = [[]]
    size = 0
    for group in groups:
        cost = sum(len(e.content) + 16 for e in group)
        if batches[-1] and size + cost > GROUP_CHARS:
            if len(batches) == MAX_CALLS:
                break
            batches.append([])
            size = 0
        batches[-1].append(group)
        size += cost
    for batch in batches:
        if batch:
            try:
                reply = summarise(tidy_prompt(_show(batch, number), language), "memory tidy")
            except Postponed:  # out of time, or an earlier call failed: keep what came
                break
            out += _read(reply, batch, number)
    return [p for p in out if not any(marks.is_pinned(e) for e in p.remove)]  # never a pin


class TidyModel:
    """The model's proposals for groups (`ask_model`) through one bounded summariser run per
    call (a call that fails or runs out of time ends it: what came before is kept)."""

    def __init__(self, store: MemoryStore, settings: Settings, provider: Provider) -> None:
        self.store = store
        self.language = settings.persona.language
        self.summariser = Summariser(settings, provider)  # its calls and characters sent

    def __call__(self, groups: list[list[Entry]]) -> list[Proposal]:
        with self.summariser.run():
            return ask_model(self.store, groups, self.summariser.summarise, self.language)


def _show(batch: list[list[Entry]], number: dict[int, int]) -> str:
    blocks = []
    for k, group in enumerate(batch, 1):
        rows = [f"[{number[e.line_no]}] {e.date} {e.content}" for e in group]
        blocks.append(f"Group {k}:\n" + "\n".join(rows))
    return "\n\n".join(blocks)


def _read(reply: str, batch: list[list[Entry]], number: dict[int, int]) -> list[Proposal]:
    """The proposals of a reply: JSON objects whose entries are all in one group."""
    out: list[Proposal] = []
    for raw in _OBJECT.findall(reply):
        try:
            obj = loads_bounded(raw.encode())
        except ValueError:
            continue
        p = _proposal(obj, batch, number) if isinstance(obj, dict) else None
        if p is not None:
            out.append(p)
    return out


def _proposal(
    obj: dict[str, Any], batch: list[list[Entry]], number: dict[int, int]
) -> Proposal | None:
    kind, keep, remove = obj.get("kind"), obj.get("keep"), obj.get("remove")
    if kind not in KINDS or not isinstance(keep, int) or not isinstance(remove, list):
        return None
    for group in batch:
        by_n = {number[e.line_no]: e for e in group}
        if keep in by_n and remove and all(isinstance(r, int) and r in by_n for r in remove):
            if keep in remove:
                return None
            text = obj.get("text") if kind == "merge" else None
            kept = by_n[keep]
            content = text.strip() if isinstance(text, str) and text.strip() else kept.content
            why = str(obj.get("why") or "the model says so")[:200]
            return Proposal(kind, kept, [by_n[r] for r in dict.fromkeys(remove)], content, why)
    return None


def apply(store: MemoryStore, p: Proposal, *, today: date | None = None) -> bool:
    """Make `p` real (see the module); False when its lines changed meanwhile."""
    links = sources.load(store.path)
    keep_key = sources.line_key(p.keep.line)
    change = {keep_key: p.text} if p.text != p.keep.content else {}
    day = (today or date.today()).isoformat()

    def first(removed: list[Entry], changed: dict[str, Entry]) -> None:
        stands = changed.get(keep_key, p.keep)
        after = len(store.entries()) - len(removed)
        records: list[dict[str, Any]] = [
            {
                "line": e.line,
                "key": sources.line_key(e.line),
                "reason": p.kind,
                "by": stands.line,
                "at": day,
                "sources": links.get(sources.line_key(e.line)),
                "entries_after": after,
            }
            for e in removed
        ]
        archive.append(store.path, records)
        if keep_key in changed:  # the merged line stands for all of them, marks included
            memory_marks.carry(store.path, keep_key, changed[keep_key].line)
            origin = _merged_origin([links.get(keep_key)] + [links.get(r["key"]) for r in records])
            if origin is not None:
                line = changed[keep_key].line
                sources.append(store.path, [{"key": sources.line_key(line), **origin}])

    drop = [sources.line_key(e.line) for e in p.remove]
    return store.rewrite(drop, change, first) is not None


def _merged_origin(records: list[dict[str, Any] | None]) -> dict[str, Any] | None:
    """The sources of a merged line: the first session's messages, all of them."""
    found = [r for r in records if r]
    if not found:
        return None
    session = found[0]["session"]
    messages = [m for r in found if r["session"] == session for m in r.get("messages", [])]
    return {"session": session, "messages": list(dict.fromkeys(messages)), "source": "tidy"}


_hints: dict[Path, tuple[tuple[tuple[float, ...], ...], bool]] = {}


def worth_tidying(memory_file: Path) -> bool:
    """Whether MEMORY.md has grown enough to be worth tidying (the toolbar's hint): at least
    HINT_ENTRIES entries and HINT_GROWTH more than after the last tidy. Cached by the files'
    sizes and times, so a redraw costs two stats."""
    stamp = tuple(_stamp(p) for p in (memory_file, archive.archive_path(memory_file)))
    hit = _hints.get(memory_file)
    if hit is not None and hit[0] == stamp:
        return hit[1]
    n = len(MemoryStore(memory_file).entries()) if stamp[0] else 0
    last = archive.entries_after_last_tidy(memory_file) or 0
    worth = n >= HINT_ENTRIES and n - last >= HINT_GROWTH
    _hints[memory_file] = (stamp, worth)
    return worth


def _stamp(path: Path) -> tuple[float, ...]:
    try:
        st = os.stat(path)
    except OSError:
        return ()
    return (st.st_size, st.st_mtime_ns)
