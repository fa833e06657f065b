"""Memory upkeep: overflow summaries, automatic memory, /compact, recall, the /tokens breakdown.

SPEC §5, seed `000_…`, with CountBot's bugs fixed (research/countbot_digest.md §2, §3, §9):

- **Overflow.** Messages older than the next request's history window (the newest
  `max_history_messages` sendable ones, starting on a user message) are *overflow*. They are
  summarised in batches: only when at least max(4, max_history / 2) of them have accumulated
  (hysteresis), so a full window costs one call every max_history / 4 turns, not one a turn.
  A batch is summarised oldest first within a character budget (longer batches become several
  calls), with CountBot's formatter rules minus its head bias and its prefix-based pleasantry
  filter. On success one MEMORY.md line (`auto-overflow`) is written — nothing when the reply is
  exactly the sentinel — and the batch moves from `messages` to `archived` (kept, no longer sent)
  inside one `store.update`. So a message leaves `messages` exactly once: it is never summarised
  twice. A failed, timed-out or empty call changes nothing and raises `SummaryError`; the batch
  is tried again after a later turn.
- **Automatic memory.** First when the session has `auto_messages` sendable messages or
  `auto_chars` characters, then every `auto_messages` new ones: the messages after its cursor,
  newest kept within 4,000 characters, with the conversation-to-memory prompt (`auto-memory`).
  The cursor (`cursors["auto_memory"]` = messages consumed, `cursors["auto_memory_id"]` = a key
  of the last one, so a deleted message does not shift it) moves only on success or sentinel.
"""

from __future__ import annotations

import hashlib
import re
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from datetime import date
from typing import TYPE_CHECKING, Any

from .context import history_window, sendable
from .errors import CountbotError, UsageError
from .models import ChatRequest, Message
from .prompts import (
    NO_MEMORY_SENTINEL,
    SESSION_CONTEXT_HEADER,
    conversation_memory_prompt,
    is_sentinel,
    overflow_summary_prompt,
    with_session_context,
)
from .tokens import REPLY_PRIMING, TokenCounter, context_window_for

if TYPE_CHECKING:
    from .config import Settings
    from .engine import Engine
    from .memory_store import MemoryStore
    from .provider import Provider
    from .session import Session
    from .store import SessionStore

SOURCE_OVERFLOW = "auto-overflow"
SOURCE_AUTO = "auto-memory"
CURSOR_OVERFLOW = "overflow"  # key of the last archived message (archiving is the real cursor)
CURSOR_AUTO = "auto_memory"  # how many messages (archived + live) automatic memory consumed
CURSOR_AUTO_ID = "auto_memory_id"  # key of the last of them
SUMMARY_TEMPERATURE = 0.3
MESSAGE_CHARS = 300  # CountBot: longer messages are cut to 300 characters + "..."
AUTO_CHARS = 4000  # automatic memory: newest content within this many characters
OVERFLOW_CHARS = 8000  # one overflow call; a longer batch is split into several calls
MIN_BATCH = 4
RECALL_ENTRIES = 5
RECALL_TOKENS = 300
EN_SENTINELS = ("nothing to record", "nothing worth recording")

# whole-message acknowledgements only: "好的，用Redis" or "no, use v2" are kept (CountBot
# dropped every short message *starting* with one of these, yes/no included)
_ACKS = (
    "ok okay k kk thanks thank thx ty cool nice great awesome 👍 👌 🙏 666 好 好的 好滴 嗯 嗯嗯 "
    "哦 噢 谢谢 多谢 谢了 感谢 收到 哈哈 哈哈哈 赞"
)
PLEASANTRIES = frozenset(_ACKS.split()) | frozenset(
    {"thank you", "thanks a lot", "got it", "ok thanks", "好的谢谢", "谢谢你"}
)
_EDGE = " \t\r\n.,!?~。，！？～…、"
_STOP_WORDS = (
    "a an the and or but if of to in on at for with by from as is are was were be been am do "
    "does did i you he she it we they me my your our their this that these those what which who "
    "how why when where can could would should will shall may might please not no yes so just "
    "about into than then there here have has had hi hello"
)
_STOP = frozenset(_STOP_WORDS.split())
_CJK_STOP = frozenset("的了是我你他她它们在有和就不也都这那吗呢吧啊么什怎个一")
_CJK_RUN = re.compile(r"[\u3040-\u30ff\u3400-\u4dbf\u4e00-\u9fff\uac00-\ud7af]+")


class SummaryError(CountbotError):
    """A memory summary call failed; its messages were not changed and are tried again later.
    `written` holds the lines earlier batches of the same run wrote before it."""

    written: list[str] = []  # replaced per instance, never mutated


def message_key(message_id: str) -> int:
    """A 48-bit integer naming a message id (session cursors hold integers)."""
    return int.from_bytes(hashlib.blake2b(message_id.encode(), digest_size=6).digest(), "big")


# ---- formatting (CountBot's format_messages_for_summary, fixed) ----


def is_pleasantry(text: str) -> bool:
    return text.strip().strip(_EDGE).casefold() in PLEASANTRIES


def summary_line(m: Message, limit: int = MESSAGE_CHARS) -> str | None:
    """`ROLE: content` on one line, content cut to `limit` + "..."; None when not worth sending."""
    text = " ".join(m.content.split())
    if not text or is_pleasantry(text):
        return None
    if len(text) > limit:
        text = text[:limit] + "..."
    return f"{m.role.upper()}: {text}"


def format_newest(messages: Sequence[Message], max_chars: int = AUTO_CHARS) -> str:
    """The newest messages' lines that fit in `max_chars` (lines + newlines), oldest first."""
    lines: list[str] = []
    used = 0
    for m in reversed(messages):
        line = summary_line(m)
        if line is None:
            continue
        if used + len(line) + 1 > max_chars:
            break
        lines.append(line)
        used += len(line) + 1
    return "\n".join(reversed(lines))


def overflow_batches(region: Sequence[Message], max_chars: int = OVERFLOW_CHARS) -> list[Batch]:
    """Split the overflow region, oldest first, into batches whose text fits `max_chars`.

    Every message of the region lands in exactly one batch (unsendable ones too: they are
    archived with their neighbours but not shown to the summariser).
    """
    batches: list[Batch] = [Batch([], [])]
    used = 0
    ok = {id(m) for m in sendable(region)}
    for m in region:
        line = summary_line(m) if id(m) in ok else None
        cur = batches[-1]
        if line is not None and cur.lines and used + len(line) + 1 > max_chars:
            cur = Batch([], [])
            batches.append(cur)
            used = 0
        cur.messages.append(m)
        if line is not None:
            cur.lines.append(line)
            used += len(line) + 1
    return [b for b in batches if b.messages]


@dataclass
class Batch:
    messages: list[Message]
    lines: list[str]


class _Stale(Exception):
    """The session changed under us (another process archived the batch first)."""


def batch_threshold(max_history: int) -> int:
    return max(MIN_BATCH, max_history // 2)


def is_no_memory(reply: str) -> bool:
    """Exactly the sentinel (or an English one), never a line that merely contains it."""
    return is_sentinel(reply) or reply.strip().strip(_EDGE).casefold() in EN_SENTINELS


class MemoryKeeper:
    def __init__(
        self,
        settings: Settings,
        provider: Provider,
        store: SessionStore | None,
        memory: MemoryStore,
        *,
        counter: TokenCounter | None = None,
        today: Callable[[], date] = date.today,
    ) -> None:
        self.settings = settings
        self.provider = provider
        self.store = store
        self.memory = memory
        self._counter = counter
        self.today = today
        self.calls = 0  # summary calls made (for benches and tests)
        self.chars_sent = 0  # prompt characters sent to the summariser

    @property
    def counter(self) -> TokenCounter:
        if self._counter is None:
            self._counter = TokenCounter(self.provider.model)
        return self._counter

    # ---- the summary call ----

    def _summarise(self, prompt: str, what: str) -> str:
        req = ChatRequest(
            model=self.provider.model,
            messages=[{"role": "user", "content": prompt}],
            tools=None,
            temperature=SUMMARY_TEMPERATURE,
            max_tokens=self.settings.max_tokens,
            stream=False,
        )
        self.calls += 1
        self.chars_sent += len(prompt)
        try:
            fin = self.provider.complete(req)
        except CountbotError as exc:
            raise SummaryError(f"{what} failed: {exc.user_message()}; {_LATER}") from exc
        text = " ".join((fin.content or "").split())
        if not text:
            raise SummaryError(f"{what} failed: the model returned nothing; {_LATER}")
        return text

    # ---- overflow ----

    def overflow(self, session_id: str) -> list[str]:
        """Summarise pending overflow once a batch has accumulated; returns the lines written."""
        return self._overflow(session_id, batch_threshold(self._max_history()))

    def compact(self, session_id: str) -> list[str]:
        """`/compact`: summarise everything outside the window now. Raises SummaryError."""
        if self.store is None:
            raise UsageError("this conversation is not saved: there is nothing to compact")
        if self._max_history() <= 0:
            raise UsageError(
                "max_history_messages is 0 (unlimited): no message is outside the window",
                hint="set persona.max_history_messages to use /compact",
            )
        return self._overflow(session_id, 1)

    def _max_history(self) -> int:
        return self.settings.persona.max_history_messages

    def pending_overflow(self, session: Session) -> list[Message]:
        """The messages of `session` outside the next request's window (oldest first)."""
        max_history = self._max_history()
        msgs = session.messages
        if max_history <= 0 or not msgs:
            return []
        window = history_window(msgs, max_history)
        if not window:
            return list(msgs)
        first = window[0]
        boundary = next(i for i in range(len(msgs) - 1, -1, -1) if msgs[i] is first)
        return msgs[:boundary]

    def _overflow(self, session_id: str, threshold: int) -> list[str]:
        if self.store is None:
            return []
        region = self.pending_overflow(self.store.load(session_id))
        if not region or len(region) < threshold:
            return []
        written: list[str] = []
        for batch in overflow_batches(region):
            reply = None
            if batch.lines:
                prompt = overflow_summary_prompt(
                    "\n".join(batch.lines), self.settings.persona.language
                )
                try:
                    reply = self._summarise(prompt, "overflow summary")
                except SummaryError as exc:
                    exc.written = written
                    raise
            try:
                line = self._commit_overflow(session_id, batch.messages, reply)
            except _Stale:
                break
            if line is not None:
                written.append(line)
        return written

    def _commit_overflow(
        self, session_id: str, batch: list[Message], reply: str | None
    ) -> str | None:
        assert self.store is not None
        ids = [m.id for m in batch]
        box: list[str] = []

        def apply(s: Session) -> None:
            if [m.id for m in s.messages[: len(ids)]] != ids:
                raise _Stale
            if reply is not None and not is_no_memory(reply):
                entry = self.memory.add(reply, SOURCE_OVERFLOW, date=self.today())
                if entry is not None:
                    box.append(entry.line)
            s.archived.extend(s.messages[: len(ids)])
            del s.messages[: len(ids)]
            s.cursors[CURSOR_OVERFLOW] = message_key(ids[-1])

        self.store.update(session_id, apply, touch=False)
        return box[0] if box else None

    # ---- automatic memory ----

    def auto_memory(self, session_id: str) -> list[str]:
        """Summarise the messages since the cursor when a threshold is reached."""
        if self.store is None:
            return []
        session = self.store.load(session_id)
        everything = session.all_messages()
        start = auto_cursor(session, everything)
        new = sendable(everything[start:])
        mem = self.settings.memory
        if CURSOR_AUTO in session.cursors:
            due = len(new) >= mem.auto_messages
        else:
            due = (
                len(new) >= mem.auto_messages or sum(len(m.content) for m in new) >= mem.auto_chars
            )
        if not due or not everything:
            return []
        text = format_newest(new)
        reply = None
        if text:
            prompt = conversation_memory_prompt(text, self.settings.persona.language)
            reply = self._summarise(prompt, "automatic memory")
        return self._commit_auto(session_id, everything[-1].id, reply)

    def _commit_auto(self, session_id: str, last_id: str, reply: str | None) -> list[str]:
        assert self.store is not None
        box: list[str] = []

        def apply(s: Session) -> None:
            everything = s.all_messages()
            pos = next(
                (i for i in range(len(everything) - 1, -1, -1) if everything[i].id == last_id), None
            )
            if pos is None or pos + 1 <= auto_cursor(s, everything):
                raise _Stale  # the message is gone, or another process got there first
            if reply is not None and not is_no_memory(reply):
                entry = self.memory.add(reply, SOURCE_AUTO, date=self.today())
                if entry is not None:
                    box.append(entry.line)
            s.cursors[CURSOR_AUTO] = pos + 1
            s.cursors[CURSOR_AUTO_ID] = message_key(last_id)

        try:
            self.store.update(session_id, apply, touch=False)
        except _Stale:
            return []
        return box

    # ---- hooks for the engine ----

    def upkeep_hooks(self) -> list[Callable[[str], None]]:
        hooks: list[Callable[[str], None]] = []
        if self.settings.memory.overflow_summary and self._max_history() > 0:
            hooks.append(self._overflow_hook)
        if self.settings.memory.auto_memory:
            hooks.append(self._auto_hook)
        return hooks

    def _overflow_hook(self, session_id: str) -> None:
        self.overflow(session_id)

    def _auto_hook(self, session_id: str) -> None:
        self.auto_memory(session_id)

    # ---- recall (memory.inject) ----

    def recall(self, user_text: str) -> list[str]:
        """MEMORY.md entries for the system prompt: `relevant`, `recent` or `off`."""
        mode = self.settings.memory.inject
        if mode == "recent":
            entries = list(reversed(self.memory.tail(RECALL_ENTRIES)))
        elif mode == "relevant":
            entries = self._relevant(user_text)
        else:
            return []
        out: list[str] = []
        used = 0
        for e in entries:
            text = f"{e.date}: {e.content}"
            cost = self.counter.count_text(text) + 2
            if used + cost > RECALL_TOKENS:
                break
            out.append(text)
            used += cost
        return out if mode != "recent" else list(reversed(out))

    def _relevant(self, user_text: str) -> list[Any]:
        words = query_words(user_text)
        if not words:
            return []
        found = self.memory.search(words, limit=RECALL_ENTRIES * 4)
        patterns = [_word_pattern(w) for w in words]
        scored = [(sum(bool(p.search(e.content.casefold())) for p in patterns), e) for e in found]
        scored = [se for se in scored if se[0] > 0]
        scored.sort(key=lambda se: -se[0])  # stable: the store's order (newer first) breaks ties
        return [e for _, e in scored[:RECALL_ENTRIES]]

    # ---- /tokens ----

    def token_breakdown(self, engine: Engine, session: Session) -> dict[str, Any]:
        """What the next request would cost: system, summary, memory, history, tools, total."""
        c = self.counter
        ctx = engine.context_for(session, Message(role="user", content=""))
        summary = with_session_context("", session.summary)
        summary_tokens = c.count_text(summary) if summary else 0
        memory = sum(c.count_text(f"- {e}") + 1 for e in ctx.memory_entries)
        system_all = c.count_messages([{"role": "system", "content": ctx.system}]) - REPLY_PRIMING
        history = sum(c.count_message(m) for m in ctx.window)
        tools = c.count_tools(engine.tool_schemas())
        total = system_all + history + tools + REPLY_PRIMING
        window = context_window_for(c.model, self.settings.provider.context_window)
        return {
            "system": max(0, system_all - summary_tokens - memory),
            "summary": summary_tokens,
            "memory": memory,
            "history": history,
            "messages": len(ctx.window),
            "omitted": ctx.omitted,
            "tools": tools,
            "total": total,
            "window": window,
            "percent": round(100.0 * total / window, 1) if window else 0.0,
        }


_LATER = "the messages stay and are tried again after a later turn"


def auto_cursor(session: Session, everything: Sequence[Message]) -> int:
    """How many of `everything` (archived + live) automatic memory has consumed."""
    pos = session.cursors.get(CURSOR_AUTO, 0)
    key = session.cursors.get(CURSOR_AUTO_ID)
    if key is None or pos <= 0:
        return 0
    if pos <= len(everything) and message_key(everything[pos - 1].id) == key:
        return pos
    for i in range(len(everything) - 1, -1, -1):  # a message before it was deleted
        if message_key(everything[i].id) == key:
            return i + 1
    return min(pos, len(everything))


def query_words(text: str, limit: int = 40) -> list[str]:
    """Search words for recall: no stop words, CJK runs cut into bigrams, at most `limit`."""
    out: dict[str, None] = {}
    for run in _CJK_RUN.findall(text):
        if len(run) <= 2:
            if not all(ch in _CJK_STOP for ch in run):
                out[run] = None
            continue
        for i in range(len(run) - 1):
            pair = run[i : i + 2]
            if not (pair[0] in _CJK_STOP or pair[1] in _CJK_STOP):
                out[pair] = None
    for word in _CJK_RUN.sub(" ", text).split():
        w = word.strip(_EDGE + "'\"()[]{}<>:;`*#").casefold()
        if len(w) >= 2 and w not in _STOP:
            out[w] = None
    return list(out)[:limit]


def _word_pattern(word: str) -> re.Pattern[str]:
    """CJK: a substring. Latin: from a word start; a word of 4 letters or less whole ("use" must
    not match "user"), a longer one also as a prefix ("deploy" matches "deployment")."""
    if not word.isascii():
        return re.compile(re.escape(word))
    tail = r"\b" if len(word) <= 4 else ""
    return re.compile(r"\b" + re.escape(word) + tail)


def keeper_of(engine: Engine) -> MemoryKeeper | None:
    """The MemoryKeeper `app.build_engine` attached to `engine` (None without one)."""
    keeper = getattr(engine, "memory_keeper", None)
    return keeper if isinstance(keeper, MemoryKeeper) else None


__all__ = [
    "NO_MEMORY_SENTINEL",
    "SESSION_CONTEXT_HEADER",
    "Batch",
    "MemoryKeeper",
    "SummaryError",
    "auto_cursor",
    "batch_threshold",
    "format_newest",
    "is_no_memory",
    "keeper_of",
    "message_key",
    "overflow_batches",
    "query_words",
    "summary_line",
]
