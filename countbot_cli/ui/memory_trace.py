"""`countbot memory show --json`, `memory why N` and `memory edit`: memory lines and where
they came from (memory/sources.py links each line countbot wrote to its session and messages).

`why` looks the messages up in the session file, live or archived (an overflow summary's
messages are archived by the write that made the line). Everything printed from a session or
MEMORY.md goes through textsafe.
"""

from __future__ import annotations

import os
import shlex
import subprocess
from typing import Any, TextIO

from countbot_cli.conversation.store import SessionStore
from countbot_cli.errors import EXIT_OK, CountbotError, UsageError
from countbot_cli.memory import sources
from countbot_cli.memory.store import DEFAULT_HEADER, Entry, MemoryStore
from countbot_cli.textsafe import json_text, sanitize, sanitize_line


def memory_show_json(store: MemoryStore, out: TextIO, tail: int | None = None) -> int:
    """Every entry (or the last `tail`) as JSON: line, date, source, content, sources."""
    if tail is not None and tail < 1:
        raise UsageError("--tail must be at least 1")
    entries = store.entries()
    shown = entries[-tail:] if tail is not None else entries
    links = sources.load(store.path)
    out.write(json_text([_entry_json(e, links) for e in shown]) + "\n")
    return EXIT_OK


def _entry_json(e: Entry, links: dict[str, dict[str, Any]]) -> dict[str, Any]:
    rec = links.get(sources.line_key(e.line))
    found = [{"session": rec["session"], "messages": rec.get("messages", [])}] if rec else []
    return {
        "line": e.line_no,
        "date": e.date,
        "source": e.source,
        "content": e.content,
        "sources": found,
    }


def memory_why(memory: MemoryStore, sessions: SessionStore, line_no: int, out: TextIO) -> int:
    """The messages behind line `line_no` of MEMORY.md."""
    entry = next((e for e in memory.entries() if e.line_no == line_no), None)
    if entry is None:
        raise UsageError(f"line {line_no} of {memory.path} is not a memory entry")
    out.write(f"{line_no}: {sanitize_line(entry.line)}\n")
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


def memory_edit(memory: MemoryStore, out: TextIO, env: dict[str, str] | None = None) -> int:
    """Open MEMORY.md in $VISUAL/$EDITOR while holding its lock (writers wait meanwhile)."""
    env = dict(os.environ if env is None else env)
    editor = env.get("VISUAL") or env.get("EDITOR")
    if not editor:
        raise UsageError("set $EDITOR (or $VISUAL) to the editor to open MEMORY.md with")
    with memory.hold_lock():
        if not memory.path.exists():
            memory.path.parent.mkdir(parents=True, exist_ok=True)
            memory.path.write_text(DEFAULT_HEADER, encoding="utf-8")
        code = subprocess.call([*shlex.split(editor), str(memory.path)])
    if code != 0:
        raise UsageError(f"the editor exited with status {code}")
    out.write(f"Edited {sanitize_line(str(memory.path))}.\n")
    return EXIT_OK
