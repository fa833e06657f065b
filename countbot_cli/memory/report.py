"""Memory in scripts: what `ask --json` and `--jsonl`'s end event say about memory, and
`--no-memory` and `--remember`.

`memory_used` lists every MEMORY.md entry the request carried, with `why` (`pinned`,
`recalled`, `tool`) and its number as `memory show` numbers it; `memory_written` the entries new
after the call, with their sources. `--no-memory` sends nothing from MEMORY.md and writes
nothing (no upkeep, no rolling summary); `--remember` distils this exchange now, through the
same prompt and quality screen as automatic memory. docs/memory.md shows the fields.
"""

from __future__ import annotations

from dataclasses import dataclass, field, replace
from typing import TYPE_CHECKING, Any, Protocol

from countbot_cli.errors import CountbotError, UsageError
from countbot_cli.memory import sources
from countbot_cli.memory.keeper import MemoryKeeper
from countbot_cli.memory.store import MemoryStore
from countbot_cli.messages import Message


class Shown(Protocol):
    """The view of `ask`: where notices go, and the lines the memory tool showed the model."""

    memory_shown: list[str]

    def notice(self, text: str) -> None: ...


if TYPE_CHECKING:
    from collections.abc import Sequence

    from countbot_cli.config.settings import Settings
    from countbot_cli.conversation.chat import Conversation
    from countbot_cli.conversation.turn_record import TurnResult
    from countbot_cli.memory.search import Entry


def without_memory(settings: Settings) -> Settings:
    """`--no-memory`: nothing sent from MEMORY.md, nothing written, for this call."""
    off = settings.memory._replace(
        inject="off",
        overflow_summary=False,
        session_summary=False,
        auto_memory=False,
        off=True,
    )
    return replace(settings, memory=off)


def entry_for(text: str, numbered: Sequence[tuple[int, Entry]]) -> tuple[int, Entry] | None:
    """The numbered entry a memory line as a request carries it stands for (`DATE: CONTENT`,
    or any wording that holds the content and its date; a line recall cut, `DATE: START…`, by
    its start): the longest such content wins."""
    hits = [(n, e) for n, e in numbered if e.content and e.content in text and e.date in text]
    start = text.split(": ", 1)[-1].removesuffix("…") if text.endswith("…") else ""
    if not hits and start:
        hits = [(n, e) for n, e in numbered if e.content.startswith(start) and e.date in text]
    return max(hits, key=lambda hit: len(hit[1].content), default=None)


def _row(number: int | None, e: Entry, **extra: Any) -> dict[str, Any]:
    return {"number": number, "date": e.date, "source": e.source, "content": e.content, **extra}


@dataclass
class Probe:
    """The MEMORY.md of one `ask`, before and after the call."""

    store: MemoryStore
    remember: bool = False
    before: set[str] = field(default_factory=set)

    @classmethod
    def start(
        cls, settings: Settings, *, no_memory: bool, remember: bool
    ) -> tuple[Settings, Probe]:
        """The settings of the call (`--no-memory`: `without_memory`) and its probe."""
        if no_memory and remember:
            raise UsageError("--remember writes memory and --no-memory forbids it: use one")
        if no_memory:
            settings = without_memory(settings)
        probe = cls(MemoryStore(settings.memory.file), remember=remember)
        try:
            probe.before = {sources.line_key(e.line) for e in probe.store.entries()}
        except CountbotError:  # an unreadable MEMORY.md is said by the turn, not here
            pass
        return settings, probe

    def after(self, conversation: Conversation, result: TurnResult, view: Shown) -> None:
        """After the turn and its upkeep: `--remember` distils the exchange (a failure is a
        notice; the answer stands), then `result.memory` gets the fields."""
        keeper = conversation.pair.keeper
        if self.remember and result.status == "ok" and isinstance(keeper, MemoryKeeper):
            saved = conversation.session.messages[-2:] if result.session_id else []
            user = result.context.user.content if result.context is not None else ""
            exchange = saved or [
                Message(role="user", content=user if isinstance(user, str) else ""),
                Message(role="assistant", content=result.answer),
            ]
            try:
                note = remember(keeper, result.session_id, exchange)
            except CountbotError as exc:
                note = f"--remember: {exc.user_message()}"
            if note:
                view.notice(note)
        result.memory = self.fields(result, view.memory_shown)

    def fields(self, result: TurnResult, tool_lines: Sequence[str] = ()) -> dict[str, Any]:
        """`memory_used` and `memory_written` of the call."""
        try:
            numbered = self.store.numbered()
        except CountbotError:
            return {"memory_used": [], "memory_written": []}
        ctx = result.context
        sent = [("pinned", t) for t in (ctx.pinned if ctx else [])]
        sent += [("recalled", t) for t in (ctx.memory_entries if ctx else [])]
        by_line = {e.line: (n, e) for n, e in numbered}
        used = [_row(*hit, why=why) for why, t in sent if (hit := entry_for(t, numbered))]
        used += [_row(*by_line[x], why="tool") for x in dict.fromkeys(tool_lines) if x in by_line]
        links = sources.load(self.store.path)
        written = []
        for n, e in numbered:
            key = sources.line_key(e.line)
            if key not in self.before:
                rec = links.get(key)
                origin = [{"session": rec["session"], "messages": rec["messages"]}] if rec else []
                written.append(_row(n, e, sources=origin))
        return {"memory_used": used, "memory_written": written}


def remember(keeper: MemoryKeeper, session_id: str | None, exchange: Sequence[Message]) -> str:
    """Distil `exchange` into MEMORY.md now (source auto-memory); the note to show."""
    return "\n".join(keeper.remember(session_id, list(exchange)))
