"""`countbot memory show --json`, `memory why N` and `memory edit [N]`: memory entries (numbered
as `memory show` numbers them) and where they came from (memory/sources.py links each line
countbot wrote to its session and messages).

`why` looks the messages up in the session file, live or archived (an overflow summary's
messages are archived by the write that made the line). Everything printed from a session or
MEMORY.md goes through textsafe.
"""

from __future__ import annotations

import os
import shlex
import subprocess
from typing import Any, TextIO

from countbot_cli.conversation.sessions.store import SessionStore
from countbot_cli.errors import EXIT_OK, CountbotError, UsageError
from countbot_cli.memory import marks as memory_marks
from countbot_cli.memory import sources
from countbot_cli.memory.distilled import KEPT_BACK
from countbot_cli.memory.store import DEFAULT_HEADER, Entry, MemoryStore
from countbot_cli.textsafe import json_text, sanitize, sanitize_line


def memory_show_json(store: MemoryStore, out: TextIO, tail: int | None = None) -> int:
    """Every entry (or the last `tail`) as JSON: number, line (of the file), date, source,
    content, pinned, muted, sources."""
    if tail is not None and tail < 1:
        raise UsageError("--tail must be at least 1")
    numbered = store.numbered()
    shown = numbered[-tail:] if tail is not None else numbered
    links = sources.load(store.path)
    marks = memory_marks.load(store.path)
    out.write(json_text([_entry_json(n, e, links, marks) for n, e in shown]) + "\n")
    return EXIT_OK


def _entry_json(
    number: int, e: Entry, links: dict[str, dict[str, Any]], marks: memory_marks.Marks
) -> dict[str, Any]:
    rec = links.get(sources.line_key(e.line))
    found = [{"session": rec["session"], "messages": rec.get("messages", [])}] if rec else []
    return {
        "number": number,
        "line": e.line_no,
        "date": e.date,
        "source": e.source,
        "content": e.content,
        "pinned": marks.is_pinned(e),
        "muted": marks.is_muted(e),
        "sources": found,
    }


def memory_why(memory: MemoryStore, sessions: SessionStore, number: int, out: TextIO) -> int:
    """The messages behind memory entry `number` (as `memory show` numbers them)."""
    entry = memory.entry(number)
    out.write(f"{number}: {sanitize_line(entry.line)}\n")
    rec = sources.load(memory.path).get(sources.line_key(entry.line))
    if rec is None:
        out.write("No source recorded (added by hand, by the memory tool, or edited since).\n")
        return EXIT_OK
    sid, wanted = rec["session"], list(rec.get("messages", []))
    try:
        session = sessions.load(sid)
    except CountbotError as e:
        out.write(f"From session {sanitize_line(sid)}, which cannot be read: {e.user_message()}\n")
        return EXIT_OK
    title = sanitize_line(session.title) or "(untitled)"
    kept_back = rec.get(KEPT_BACK)
    if isinstance(kept_back, str):  # written from what was said: why not the model's line
        out.write(f"Kept as said: the model's summary was not used ({sanitize_line(kept_back)}).\n")
    out.write(f"From session {sid} · {title} · {len(wanted)} message(s):\n")
    archived = {m.id for m in session.archived}
    by_id = {m.id: m for m in session.all_messages()}
    for mid in wanted:
        m = by_id.get(mid)
        if m is None:
            out.write(f"\n[{sanitize_line(mid)}] no longer in the session (undone or retried)\n")
            continue
        where = ", archived" if mid in archived else ""
        out.write(f"\n[{m.role} · {sanitize_line(m.created_at)}{where}]\n{sanitize(m.content)}\n")
    return EXIT_OK


def memory_edit(
    memory: MemoryStore,
    out: TextIO,
    env: dict[str, str] | None = None,
    number: int | None = None,
) -> int:
    """Open MEMORY.md in $VISUAL/$EDITOR while holding its lock (writers wait meanwhile);
    with `number`, at that entry's line (`+LINE`, which vi, nano, emacs and most others take)."""
    env = dict(os.environ if env is None else env)
    editor = env.get("VISUAL") or env.get("EDITOR")
    if not editor:
        raise UsageError("set $EDITOR (or $VISUAL) to the editor to open MEMORY.md with")
    with memory.hold_lock():
        at = [f"+{memory.entry(number).line_no}"] if number is not None else []
        if not memory.path.exists():
            memory.path.parent.mkdir(parents=True, exist_ok=True)
            memory.path.write_text(DEFAULT_HEADER, encoding="utf-8")
        code = subprocess.call([*shlex.split(editor), *at, str(memory.path)])
    if code != 0:
        raise UsageError(f"the editor exited with status {code}")
    out.write(f"Edited {sanitize_line(str(memory.path))}.\n")
    return EXIT_OK
