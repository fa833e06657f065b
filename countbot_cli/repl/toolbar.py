"""How full the context window is: one count of the next request, for the toolbar and /tokens.

`ContextMeter.breakdown` counts the parts of the next request (system prompt, summary, memory,
history window, tools) with the model's tokenizer, calibrated against the provider's last
reported prompt size; the toolbar shows its total and `/tokens` its rows, so both give the same
figure. Until the tokenizer is needed (`EXACT_FROM` of the window, `/tokens`, `/context`) the
figures are estimates marked `~`. The count never starts MCP servers. `toolbar_text` draws the
toolbar. docs/design/chat.md says more.
"""

from __future__ import annotations

import math
import threading
from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from countbot_cli.config.prices import day_cost, day_saved
from countbot_cli.conversation.sessions.session import plural
from countbot_cli.conversation.tokens import (
    REPLY_PRIMING,
    SOURCE_ESTIMATE,
    TokenCounter,
    context_window_for,
)
from countbot_cli.memory.tidy import worth_tidying
from countbot_cli.messages import Message
from countbot_cli.prompts import system_prompt, with_session_context
from countbot_cli.textsafe import sanitize_line
from countbot_cli.ui.transcript import cached_note, cost_text

if TYPE_CHECKING:
    from countbot_cli.config.settings import Settings
    from countbot_cli.conversation.chat import Conversation
    from countbot_cli.conversation.engine import Engine
    from countbot_cli.conversation.turn_record import TurnResult

ESTIMATE_ENCODING = "estimate"  # not an encoding: TokenCounter then counts ~4 characters a token
EXACT_FROM = 0.5  # the toolbar loads the tokenizer once its estimate is this share of the limit


@dataclass(frozen=True)
class Breakdown:
    model: str
    how: str  # how the tokens were counted, for /tokens
    estimated: bool  # not the model's own tokenizer (shown with "~")
    system: int
    summary: int
    memory: int
    history: int
    tools: int
    tools_sent: bool  # False: the definitions are not counted (the provider drops them)
    messages: int  # in the history window
    omitted: int  # sendable messages outside the window
    memory_entries: int
    tool_defs: int
    context_window: int

    @property
    def total(self) -> int:
        tools = self.tools if self.tools_sent else 0
        return self.system + self.summary + self.memory + self.history + tools + REPLY_PRIMING


class ContextMeter:
    def __init__(self, settings: Settings) -> None:
        self.settings = settings
        self.last: TurnResult | None = None  # the last turn of the current session and model
        self.autoload = False  # the toolbar may load the tokenizer in the background
        self.on_ready: Callable[[], None] | None = None  # called when a tokenizer has loaded
        self._counter: TokenCounter | None = None
        self._estimator: TokenCounter | None = None
        self._calibrated: dict[int, TurnResult] = {}  # id of a counter -> result it learnt from
        self._tools_sent: bool | None = None  # learnt from the last reported prompt size
        self._cache: tuple[tuple[Any, ...], Breakdown] | None = None
        self._loading: set[str] = set()
        self._lock = threading.Lock()

    # ---- what changes the next request ----

    def note(self, result: TurnResult) -> None:
        """After a turn of the current session."""
        self.last = result
        self._cache = None

    def reset(self) -> None:
        """Another session (or model): nothing known about it."""
        self.last = None
        self._tools_sent = None
        self._cache = None

    def invalidate(self) -> None:
        """The next request changed in a way the meter cannot see (memory, system text)."""
        self._cache = None

    # ---- counting ----

    def counter(self, model: str) -> TokenCounter:
        """The model's tokenizer (loads it if needed), calibrated on the last reported usage."""
        with self._lock:
            if self._counter is None or self._counter.model != model:
                self._counter = TokenCounter(model)
            return self._counter

    def ready(self, model: str) -> bool:
        return TokenCounter(model).ready

    def load(self, model: str) -> None:
        """Load the model's tokenizer now (in the calling thread), then call `on_ready`."""
        self.counter(model).preload(background=False)
        self._cache = None
        if self.on_ready is not None:
            self.on_ready()

    def load_in_background(self, model: str) -> None:
        with self._lock:
            if model in self._loading:
                return
            self._loading.add(model)
        threading.Thread(
            target=self.load, args=(model,), name="countbot-tokenizer", daemon=True
        ).start()

    def _estimator_for(self, model: str) -> TokenCounter:
        if self._estimator is None or self._estimator.model != model:
            self._estimator = TokenCounter(model, encoding_name=ESTIMATE_ENCODING)
        return self._estimator

    def breakdown(self, conversation: Conversation, *, wait: bool = True) -> Breakdown:
        """The next request, counted. wait=False never blocks on loading the tokenizer: it
        counts with the estimate meanwhile (and starts the load when `autoload` is set and the
        estimate is EXACT_FROM of the context window or more)."""
        engine = answering(conversation)  # once: a redraw counts for one engine throughout
        model = engine.provider.model
        exact = wait or self.ready(model)
        counter = self.counter(model) if exact else self._estimator_for(model)
        key = _fingerprint(conversation, engine, counter)
        cached = self._cache
        if cached is not None and cached[0] == key:
            result = cached[1]
        else:
            self._calibrate(counter, engine)
            result = _count(counter, conversation, engine, self._tools_sent)
            self._cache = (_fingerprint(conversation, engine, counter), result)
        if not exact and self.autoload and result.total >= EXACT_FROM * result.context_window:
            self.load_in_background(model)  # near the limit: the exact count matters now
        return result

    def _calibrate(self, counter: TokenCounter, engine: Engine) -> None:
        """Learn from the last single-request turn: the counted/reported ratio, and whether the
        tool definitions were part of the prompt the provider counted."""
        last, reported = self.last, self.last_prompt_tokens()
        if last is None or last.context is None or not reported:
            return
        if self._calibrated.get(id(counter)) is last:
            return
        self._calibrated[id(counter)] = last
        messages = counter.count_messages(last.context.api_messages())
        tools = counter.count_tools(engine.tool_schemas())
        sent = not tools or abs(math.log(reported / (messages + tools))) <= abs(
            math.log(reported / max(1, messages))
        )
        self._tools_sent = sent
        counter.calibrate(messages + tools if sent else messages, reported)

    def last_prompt_tokens(self) -> int:
        last = self.last
        return last.usage.prompt_tokens if last is not None and not last.tool_calls else 0

    def summary(self, conversation: Conversation) -> str:
        """`~1.2k/128k (1%)` for the toolbar: the total `/tokens` shows."""
        b = self.breakdown(conversation, wait=False)
        pct = f" ({100 * b.total / b.context_window:.0f}%)" if b.context_window else ""
        used = f"{'~' if b.estimated else ''}{short_count(b.total)}"
        return f"{used}/{short_count(b.context_window)}{pct}"


def answering(conversation: Conversation) -> Engine:
    """The engine the next turn goes to: the chosen provider's, or the fallback link that
    answers while that provider is passed over (conversation/fallback.py)."""
    c = conversation
    return c.fallback.standing_in(c.settings.provider.name) or c.engine


def _context_window(engine: Engine) -> int:
    """The context window `engine` budgets against: the settings of the model in use (after
    /model, with --context-window and COUNTBOT_CONTEXT_WINDOW still applied)."""
    budget = engine.budget
    if budget is not None:  # with what the server reported since the budget was made
        return budget.context_window
    model = engine.provider.model
    cfg = engine.settings.provider
    return context_window_for(model, cfg.context_window if model == cfg.model else None)


def _fingerprint(
    conversation: Conversation, engine: Engine, counter: TokenCounter
) -> tuple[Any, ...]:
    session = conversation.session
    msgs = session.messages
    last = msgs[-1] if msgs else None
    return (
        id(engine),
        engine.provider.model,
        conversation.system,
        len(engine.tool_schemas()),  # MCP servers that started add theirs
        session.id,
        session.context_summary(),
        len(msgs),
        len(session.archived),
        None if last is None else (last.id, len(last.content or ""), last.status),
        id(counter),
        counter.ready,
        counter.ratio,
    )


def _count(
    counter: TokenCounter,
    conversation: Conversation,
    engine: Engine,
    tools_sent: bool | None,
) -> Breakdown:
    context_window = _context_window(engine)
    session, system = (
        conversation.session,
        conversation.tuning.system(conversation.system_override),  # with the role's text
    )
    empty = Message(role="user", content="")  # MCP servers are not started for a count
    ctx = engine.context_for(session, empty, system=system)
    base = system_prompt(engine.prompt_facts(session, system=system))
    base_n = counter.count_text(base)
    with_summary = counter.count_text(with_session_context(base, session.context_summary()))
    summary = max(0, with_summary - base_n)
    memory = max(0, counter.count_text(ctx.system) - with_summary)
    system_msg = counter.count_message({"role": "system", "content": ctx.system})
    schemas = engine.tool_schemas()
    if counter.encoding_name == ESTIMATE_ENCODING:
        how = "estimate: about 4 characters a token (the tokenizer is loading)"
    elif counter.exact:
        how = f"exact ({counter.encoding_name})"
    elif counter.source == SOURCE_ESTIMATE:
        how = "estimate: about 4 characters a token (no tokenizer data found)"
    else:
        how = f"approximate ({counter.encoding_name}; this model's own tokenizer differs)"
    return Breakdown(
        model=engine.provider.model,
        how=how,
        estimated=not counter.exact,
        system=max(0, system_msg - summary - memory),
        summary=summary,
        memory=memory,
        history=sum(counter.count_message(m) for m in ctx.window),
        tools=counter.count_tools(schemas),
        tools_sent=tools_sent is not False,
        messages=len(ctx.window),
        omitted=ctx.omitted,
        memory_entries=len(ctx.memory_entries),
        tool_defs=len(schemas),
        context_window=context_window,
    )


def token_report(meter: ContextMeter, conversation: Conversation) -> str:
    """System prompt, summary, memory, history and tools of the next request, and the total."""
    b = meter.breakdown(conversation)
    tools_note = f"   {plural(b.tool_defs, 'definition')}" if b.tools else ""
    if b.tools and not b.tools_sent:
        tools_note += ", not counted: not sent (judging by the reported prompt size)"
    rows = [
        ("system prompt", b.system, ""),
        ("summary", b.summary, ""),
        (
            "memory entries",
            b.memory,
            f"   {plural(b.memory_entries, 'entry', 'entries')}" if b.memory else "",
        ),
        (
            f"history ({plural(b.messages, 'message')})",
            b.history,
            f"   {b.omitted} older outside the window" if b.omitted else "",
        ),
        ("tools", b.tools, tools_note),
    ]
    width = max(len(r[0]) for r in rows)
    lines = [f"Next request to {sanitize_line(b.model)} · {b.how}"]
    lines += [f"  {name.ljust(width)}  {n:>9,}{extra}" for name, n, extra in rows]
    pct = (
        f"{100 * b.total / b.context_window:.1f}% of {b.context_window:,}"
        if b.context_window
        else ""
    )
    lines.append(f"  {'total'.ljust(width)}  {b.total:>9,}   {pct}")
    reported = meter.last_prompt_tokens()
    if reported:
        assert meter.last is not None
        cached = cached_note(meter.last.usage.cached_tokens)
        lines.append(
            f"  the provider reported {reported:,} prompt tokens{cached} for the last request"
        )
    lines += _spent(conversation)
    return "\n".join(lines) + "\n"


def _spent(conversation: Conversation) -> list[str]:
    """The session's usage so far and, with prices set, its cost and today's."""
    u = conversation.session.usage
    if not u.total_tokens:
        return []
    line = (
        f"  this session so far: {u.prompt_tokens:,} in{cached_note(u.cached_tokens)}"
        f" · {u.completion_tokens:,} out"
    )
    if u.cost is not None:
        line += f" · cost {cost_text(u.cost)}"
    if u.saved is not None:
        line += f" · cache saved {cost_text(u.saved)}"
    lines = [line]
    engine = conversation.engine
    today = day_cost(engine.settings.data_dir, engine.today())
    saved = day_saved(engine.settings.data_dir, engine.today())
    if today is not None:
        cache = f" · cache saved {cost_text(saved)}" if saved is not None else ""
        lines.append(f"  today, all sessions: cost {cost_text(today)}{cache}")
    return lines


def short_count(n: int) -> str:
    """950, 8.2k, 128k."""
    if n < 1000:
        return str(n)
    if n < 100_000:
        return f"{n / 1000:.1f}k".replace(".0k", "k")
    return f"{n // 1000}k"


def toolbar_text(
    conversation: Conversation, meter: ContextMeter, width: int = 200, *, upkeep: bool = False
) -> str:
    """The REPL's bottom toolbar: provider/model (who answers now: a fallback link while the
    chosen provider is passed over, with its window and tools) · title · context used/window
    (percent) · the tool mode, `--yes` and the tools allowed for the session (`tools ask --yes
    +write_file`) · the memory upkeep, or a hint to tidy a grown MEMORY.md. At most `width`
    columns: the title goes first, then the upkeep mark, then the tools; the model and the
    context stay longest (the model is cut last of all)."""
    c = conversation
    engine = answering(c)  # who answers now: a fallback link while the provider is passed over
    p = engine.provider
    title = sanitize_line(c.session.title) or ("new conversation" if c.is_new else "(untitled)")
    if len(title) > 40:
        title = title[:39] + "…"
    tools = "no tools"
    if engine.tool_schemas():  # drawn at the prompt: no MCP server started
        granted = sorted(c.policy.session_allowed)
        yes = " --yes" if c.policy.yes_writes else ""
        tools = f"tools {c.policy.mode}{yes}" + (f" +{','.join(granted)}" if granted else "")
    # (drop order: higher goes first; 0 and 1 are never dropped, text) in display order
    parts = [
        (0, f"{sanitize_line(p.name)}/{sanitize_line(p.model)}"),
        (4, title),
        (1, meter.summary(c)),
        (2, tools),
        *([(3, "⟳ memory")] if upkeep else []),
        *([(3, "memory: /memory tidy")] if worth_tidying(c.settings.memory.file) else []),
    ]
    return fit_parts(parts, max(width, 1))


def fit_parts(parts: list[tuple[int, str]], width: int) -> str:
    """` a · b · c ` within `width` columns: parts dropped by rank (the highest first, never 0
    or 1), then the rank-0 part cut with an ellipsis, then the whole line."""

    def line(items: list[tuple[int, str]]) -> str:
        return " " + " · ".join(text for _, text in items) + " "

    items = list(parts)
    while len(line(items)) > width and any(rank > 1 for rank, _ in items):
        worst = max(rank for rank, _ in items)
        items = [item for item in items if item[0] != worst]
    over = len(line(items)) - width
    if over > 0:
        items = [
            (rank, text[: max(len(text) - over - 1, 1)] + "…" if rank == 0 else text)
            for rank, text in items
        ]
    text = line(items)
    return text if len(text) <= width else text[: width - 1] + "…"
