"""Which messages MEMORY.md already holds: the one cursor automatic memory and window steps share.

Before, automatic memory (every `auto_messages` messages) and the overflow step (the block
leaving the window) both distilled the same messages in a long session: two calls where one
would do, and the same fact written twice for `memory tidy` to clean. Now each message is
distilled once, by whichever call comes to it first:

- **The cursor.** `cursors["auto_memory"]` (how many messages, archived + live, are distilled),
  `["auto_memory_id"]` (a key of the last of them) and `["auto_memory_at"]` (its time,
  YYYYMMDDhhmmss: when /undo or /retry removed it, the messages newer than that are the new
  ones). The names predate the window step's use of it; the file format only gained uses.
- **A step** (keeper.py's overflow, `memory.overflow_summary` on) asks for a memory line only of
  the block's messages after the cursor (`Share.fresh`; the ones before it, `Share.known`, go to
  the rolling summary only) and, with automatic memory on, of the newer messages still in the
  window after the block (`Share.newer`, oldest first within `NEWER_CHARS`), then moves the
  cursor to the last of them (to the block's end only, when the reply had no memory part:
  the newer messages wait for the next step or automatic memory). Automatic memory then counts its `auto_messages` from there, so in
  a session whose window steps (every `window_step` messages, fewer than `auto_messages`) the
  step makes its calls and automatic memory none.
- **Automatic memory** starts at the cursor, and with overflow summaries on never before the
  archived messages (`start`): a step distilled those (countbot before this change distilled every
  archived block).
- Nothing is distilled twice and nothing that was distilled before is skipped: a message is
  either before the cursor (distilled once) or after it (the next step or automatic memory takes
  it), and the cursor never moves back (`mark`).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from countbot_cli.conversation.context import sendable
from countbot_cli.memory.digest import AUTO_CHARS, TextCost, message_key, summary_line
from countbot_cli.messages import Message

if TYPE_CHECKING:
    from countbot_cli.conversation.sessions.session import Session

CURSOR_AUTO = "auto_memory"  # how many messages (archived + live) are distilled into MEMORY.md
CURSOR_AUTO_ID = "auto_memory_id"  # key of the last of them
CURSOR_AUTO_AT = "auto_memory_at"  # its created_at as YYYYMMDDhhmmss
NEWER_CHARS = AUTO_CHARS  # a step's newer messages (for its memory line only)


def time_stamp(created_at: str) -> int | None:
    """`2026-11-29T19:30:00Z` as 20261129193000 (cursors hold integers); None if malformed."""
    digits = "".join(ch for ch in created_at if ch.isdigit())
    return int(digits[:14]) if len(digits) >= 14 else None


def auto_cursor(session: Session, everything: Sequence[Message]) -> int:
    """How many of `everything` (archived + live) are distilled, by the cursor alone."""
    pos = session.cursors.get(CURSOR_AUTO, 0)
    key = session.cursors.get(CURSOR_AUTO_ID)
    if key is None or pos <= 0:
        return 0
    if pos <= len(everything) and message_key(everything[pos - 1].id) == key:
        return pos
    for i in range(len(everything) - 1, -1, -1):  # a message before it was deleted
        if message_key(everything[i].id) == key:
            return i + 1
    at = session.cursors.get(CURSOR_AUTO_AT)  # the message itself was removed (/undo, /retry)
    if at is not None:
        for i, m in enumerate(everything):
            stamp = time_stamp(m.created_at)
            if stamp is not None and stamp > at:
                return min(i, pos)
    return min(pos, len(everything))


def start(session: Session, everything: Sequence[Message], *, steps_distil: bool) -> int:
    """Where the messages not yet in MEMORY.md begin; with `steps_distil`
    (`memory.overflow_summary`) never before the live ones: a step distilled the archived."""
    pos = auto_cursor(session, everything)
    return max(pos, len(session.archived)) if steps_distil else pos


def mark(s: Session, last: Message) -> bool:
    """Move the cursor past `last` (inside a session update); never back. False when `last` is
    gone or the cursor is past it already (another process got there first)."""
    everything = s.all_messages()
    pos = next((i for i in range(len(everything) - 1, -1, -1) if everything[i].id == last.id), None)
    if pos is None or pos + 1 <= auto_cursor(s, everything):
        return False
    s.cursors[CURSOR_AUTO] = pos + 1
    s.cursors[CURSOR_AUTO_ID] = message_key(last.id)
    stamp = time_stamp(last.created_at)
    if stamp is not None:
        s.cursors[CURSOR_AUTO_AT] = stamp
    else:
        s.cursors.pop(CURSOR_AUTO_AT, None)
    return True


def lines_of(messages: Sequence[Message]) -> list[str]:
    """The summariser's lines of `messages` (digest.summary_line of the sendable ones)."""
    return [line for m in sendable(messages) if (line := summary_line(m)) is not None]


@dataclass
class Share:
    """What one step's call is shown, split by what MEMORY.md already holds."""

    known: list[str] = field(default_factory=list)  # block lines already distilled
    fresh: list[str] = field(default_factory=list)  # block lines not yet distilled
    newer: list[str] = field(default_factory=list)  # after the block, not yet distilled
    distilled: list[Message] = field(default_factory=list)  # what its memory line stands for
    upto: int = 0  # the cursor after it (a position in archived + live)


def share(
    batch: Sequence[Message],
    at: int,
    cursor: int,
    after: Sequence[Message],
    chars: int,
    *,
    cost: TextCost | None = None,
    max_tokens: int | None = None,
) -> Share:
    """Split `batch` (at position `at` of archived + live) by `cursor` (distilled before it) and
    add the messages of `after` (those following the batch) that fit in `chars` and, with
    `cost`, in what `max_tokens` leaves beside the batch, oldest first: what one step distils,
    contiguous from the cursor."""
    cut = min(max(cursor - at, 0), len(batch))
    out = Share(known=lines_of(batch[:cut]), fresh=lines_of(batch[cut:]))
    out.distilled = list(batch[cut:])
    out.upto = max(cursor, at + len(batch))
    skip = max(cursor - at - len(batch), 0)
    used = tokens = 0
    if cost is not None and max_tokens is not None:
        tokens = sum(cost(line) + 1 for line in [*out.known, *out.fresh])
    for m in after[skip:]:
        line = next(iter(lines_of([m])), None)
        if line is not None:
            n = cost(line) + 1 if cost is not None and max_tokens is not None else 0
            if used + len(line) + 1 > chars or (max_tokens is not None and tokens + n > max_tokens):
                break
            out.newer.append(line)
            used += len(line) + 1
            tokens += n
        out.distilled.append(m)
        out.upto += 1
    return out
