"""How full the context window is: a cheap figure for the toolbar, a counted one for /tokens.

The toolbar uses the provider's own numbers when the last request reported usage (its prompt
tokens plus the answer's, which the next request carries), and otherwise an estimate of about
four characters a token over the system prompt, the history window and the tool definitions
(shown with a `~`). `/tokens` counts with the model's tokenizer (`tokens.TokenCounter`, loaded
on first use), calibrated against the provider's last reported figure.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from .textsafe import sanitize_line

if TYPE_CHECKING:
    from .config import Settings
    from .engine import Engine, TurnResult
    from .session import Session
    from .tokens import TokenCounter


class ContextMeter:
    def __init__(self, settings: Settings) -> None:
        self.settings = settings
        self.last: TurnResult | None = None  # the last turn of the current session
        self._counter: TokenCounter | None = None
        self._used: tuple[int, bool] | None = None  # (tokens, estimated)

    def note(self, result: TurnResult) -> None:
        """After a turn: reported usage of a single-request turn is exact enough."""
        self.last = result
        u = result.usage
        single = not result.tool_calls
        self._used = (
            (u.prompt_tokens + u.completion_tokens, False) if u.prompt_tokens and single else None
        )

    def reset(self) -> None:
        """Another session: nothing known about it."""
        self.last = None
        self._used = None

    def invalidate(self) -> None:
        """The next request changed (system text, summary, model, history): estimate again."""
        self._used = None

    def window(self, model: str) -> int:
        from .tokens import context_window_for

        cfg = self.settings.provider
        return context_window_for(model, cfg.context_window if model == cfg.model else None)

    def used(self, engine: Engine, session: Session) -> tuple[int, bool]:
        """(tokens, estimated) of the next request without its new message."""
        if self._used is None:
            from .models import Message
            from .tokens import estimate_tokens

            ctx = engine.context_for(session, Message(role="user", content=""))
            n = estimate_tokens(ctx.system)
            n += sum(estimate_tokens(m.content) + 4 for m in ctx.window)
            n += sum(len(repr(t)) for t in engine.tool_schemas()) // 4
            self._used = (n, True)
        return self._used

    def summary(self, engine: Engine, session: Session) -> str:
        """`~1.2k/128k (1%)` for the toolbar."""
        used, estimated = self.used(engine, session)
        window = self.window(engine.provider.model)
        pct = f" ({100 * used / window:.0f}%)" if window else ""
        return f"{'~' if estimated else ''}{short_count(used)}/{short_count(window)}{pct}"

    def counter(self, model: str) -> TokenCounter:
        from .tokens import TokenCounter

        if self._counter is None or self._counter.model != model:
            self._counter = TokenCounter(model)
        last = self.last
        if last is not None and last.context is not None and self.last_prompt_tokens():
            estimated = self._counter.count_messages(last.context.api_messages())
            self._counter.calibrate(estimated, last.usage.prompt_tokens)
        return self._counter

    def last_prompt_tokens(self) -> int:
        last = self.last
        return last.usage.prompt_tokens if last is not None and not last.tool_calls else 0


def token_report(meter: ContextMeter, engine: Engine, session: Session) -> str:
    """System prompt, summary, memory, history and tools of the next request, and the total."""
    from .models import Message
    from .prompts import system_prompt, with_session_context
    from .tokens import REPLY_PRIMING, SOURCE_ESTIMATE

    model = engine.provider.model
    counter = meter.counter(model)
    ctx = engine.context_for(session, Message(role="user", content=""))
    base = system_prompt(engine.prompt_facts())
    base_n = counter.count_text(base)
    with_summary = counter.count_text(with_session_context(base, session.summary))
    summary = max(0, with_summary - base_n)
    memory = max(0, counter.count_text(ctx.system) - with_summary)
    system_msg = counter.count_message({"role": "system", "content": ctx.system})
    system = max(0, system_msg - summary - memory)
    history = sum(counter.count_message(m) for m in ctx.window)
    schemas = engine.tool_schemas()
    tools = counter.count_tools(schemas)
    total = system + summary + memory + history + tools + REPLY_PRIMING
    window = meter.window(model)
    if counter.exact:
        how = f"exact ({counter.encoding_name})"
    elif counter.source == SOURCE_ESTIMATE:
        how = "estimate: about 4 characters a token (no tokenizer data found)"
    else:
        how = f"approximate ({counter.encoding_name}; this model's own tokenizer differs)"
    rows = [
        ("system prompt", system, ""),
        ("summary", summary, ""),
        ("memory entries", memory, f"   {len(ctx.memory_entries)} entries" if memory else ""),
        (
            f"history ({len(ctx.window)} messages)",
            history,
            f"   {ctx.omitted} older outside the window" if ctx.omitted else "",
        ),
        ("tools", tools, f"   {len(schemas)} definitions" if tools else ""),
    ]
    width = max(len(r[0]) for r in rows)
    lines = [f"Next request to {sanitize_line(model)} · {how}"]
    lines += [f"  {name.ljust(width)}  {n:>9,}{extra}" for name, n, extra in rows]
    pct = f"{100 * total / window:.1f}% of {window:,}" if window else ""
    lines.append(f"  {'total'.ljust(width)}  {total:>9,}   {pct}")
    reported = meter.last_prompt_tokens()
    if reported:
        lines.append(f"  the provider reported {reported:,} prompt tokens for the last request")
    return "\n".join(lines) + "\n"


def short_count(n: int) -> str:
    """950, 8.2k, 128k."""
    if n < 1000:
        return str(n)
    if n < 100_000:
        return f"{n / 1000:.1f}k".replace(".0k", "k")
    return f"{n // 1000}k"
