"""The text side of memory upkeep: what the summariser is shown, and the sentinel.

The newest content is kept when a batch must be cut (automatic memory is about what was just
said); a message is dropped as an acknowledgement only when it is one whole (`好的`, `ok`,
`yes`: a message that merely starts with one is kept); the "nothing to keep" sentinel counts
only as the whole reply, never as a substring of one.
"""

from __future__ import annotations

import hashlib
from collections.abc import Callable, Sequence
from dataclasses import dataclass

from countbot_cli.conversation.context import sendable
from countbot_cli.memory.dates import annotate, said_on
from countbot_cli.messages import Message
from countbot_cli.prompts import is_sentinel
from countbot_cli.textsafe import CJK_CHARS, LazyPattern
from countbot_cli.words import WORD_EDGE

MESSAGE_CHARS = 300  # CountBot: longer messages are cut to 300 characters + "..."
AUTO_CHARS = 4000  # automatic memory: newest content within this many characters
OVERFLOW_CHARS = 8000  # one overflow call; a longer batch is split into several calls
EN_SENTINELS = ("nothing to record", "nothing worth recording")

# whole-message acknowledgements only: "好的，用Redis" or "no, use v2" are kept
_ACKS = (
    "ok okay k kk thanks thank thx ty cool nice great awesome 👍 👌 🙏 666 好 好的 好滴 嗯 嗯嗯 "
    "哦 噢 谢谢 多谢 谢了 感谢 收到 哈哈 哈哈哈 赞"
)
PLEASANTRIES = frozenset(_ACKS.split()) | frozenset(
    {"thank you", "thanks a lot", "got it", "ok thanks", "好的谢谢", "谢谢你"}
)

_CJK = LazyPattern(f"[{CJK_CHARS}]")

TextCost = Callable[[str], int]  # tokens of a text (a TokenCounter's count_text)


def message_key(message_id: str) -> int:
    """A 48-bit integer naming a message id (session cursors hold integers)."""
    return int.from_bytes(hashlib.blake2b(message_id.encode(), digest_size=6).digest(), "big")


def is_pleasantry(text: str) -> bool:
    return text.strip().strip(WORD_EDGE).casefold() in PLEASANTRIES


def summary_line(m: Message, limit: int = MESSAGE_CHARS) -> str | None:
    """`ROLE: content` on one line, content cut to `limit` + "...", its relative dates resolved
    against the day it was said (memory/dates.py); None when not worth sending."""
    text = " ".join(m.content.split())
    if not text or is_pleasantry(text):
        return None
    if len(text) > limit:
        text = text[:limit] + "..."
    day = said_on(m.created_at)
    return f"{m.role.upper()}: {annotate(text, day) if day is not None else text}"


def separators(line: str) -> str:
    """The full-width "；" only between Chinese items (items holding CJK text); "; " wherever
    one side is not."""
    items = [item.strip() for item in line.split("；") if item.strip()]
    if len(items) <= 1:
        return items[0] if items else line
    out = items[0]
    for before, item in zip(items, items[1:], strict=False):
        chinese = _CJK.re.search(before) and _CJK.re.search(item)
        out += ("；" if chinese else "; ") + item
    return out


def format_newest(
    messages: Sequence[Message],
    max_chars: int = AUTO_CHARS,
    *,
    cost: TextCost | None = None,
    max_tokens: int | None = None,
) -> str:
    """The newest messages' lines that fit in `max_chars` (lines + newlines) and, with `cost`,
    in `max_tokens`; oldest first."""
    lines: list[str] = []
    used = tokens = 0
    for m in reversed(messages):
        line = summary_line(m)
        if line is None:
            continue
        if used + len(line) + 1 > max_chars:
            break
        if cost is not None and max_tokens is not None:
            n = cost(line) + 1
            if tokens + n > max_tokens:
                break
            tokens += n
        lines.append(line)
        used += len(line) + 1
    return "\n".join(reversed(lines))


@dataclass
class Batch:
    messages: list[Message]
    lines: list[str]


def overflow_batches(
    region: Sequence[Message],
    max_chars: int = OVERFLOW_CHARS,
    *,
    cost: TextCost | None = None,
    max_tokens: int | None = None,
) -> list[Batch]:
    """Split the overflow region, oldest first, into batches whose text fits `max_chars` (and,
    with `cost`, `max_tokens`: a small context window takes smaller batches).

    Every message of the region lands in exactly one batch (unsendable ones too: they are
    archived with their neighbours but not shown to the summariser).
    """
    batches: list[Batch] = [Batch([], [])]
    used = tokens = 0
    ok = {id(m) for m in sendable(region)}
    for m in region:
        line = summary_line(m) if id(m) in ok else None
        cur = batches[-1]
        if line is not None:
            n = cost(line) + 1 if cost is not None and max_tokens is not None else 0
            full = used + len(line) + 1 > max_chars or (
                max_tokens is not None and tokens + n > max_tokens
            )
            if cur.lines and full:
                cur = Batch([], [])
                batches.append(cur)
                used = tokens = 0
            cur.lines.append(line)
            used += len(line) + 1
            tokens += n
        cur.messages.append(m)
    return [b for b in batches if b.messages]


def is_no_memory(reply: str) -> bool:
    """Exactly the sentinel (or an English one), never a line that merely contains it."""
    return is_sentinel(reply) or reply.strip().strip(WORD_EDGE).casefold() in EN_SENTINELS
