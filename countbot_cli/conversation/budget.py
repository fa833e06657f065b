"""The token budget of one request (SPEC §5): what plugs into `context.build_context(budget=…)`.

System prompt, tools, history, the current message and the reply reserve must fit the model's
context window with a 10 % margin. The history window is trimmed in its own blocks (the oldest
block start whose remainder fits), so between two steps a request keeps its prefix; only when
the newest block does not fit is it trimmed with `trim.trim_messages`. `TokenBudget.observe`
learns each model's ratio of reported to counted tokens (`.countbot_tokens.json`, in the cache
folder: config/derived.py). A cheap upper bound proves most turns fit without counting.
docs/design/window.md says more.
"""

from __future__ import annotations

import contextlib
import json
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

from countbot_cli import fileio
from countbot_cli.config.derived import derived_file
from countbot_cli.config.own_files import RATIOS_FILE
from countbot_cli.conversation.context import block_start, window_step
from countbot_cli.conversation.input.images import TOKENS_PER_IMAGE_MAX
from countbot_cli.conversation.server_window import (
    Late,
    context_window_of,
    late_context_window,
    over_context_window_text,
    user_set,
)
from countbot_cli.conversation.tokens import REPLY_PRIMING, TOKENS_PER_MESSAGE
from countbot_cli.conversation.trim import trim_messages
from countbot_cli.errors import ContextLengthError
from countbot_cli.messages import Message

if TYPE_CHECKING:
    from countbot_cli.config.settings import Settings
    from countbot_cli.conversation.tokens import TokenCounter

RATIO_SAVE_CHANGE = 0.02  # rewrite the file only when the ratio moved more than this
MARGIN = 0.10
DEFAULT_REPLY_RESERVE = 4096  # without max_tokens: at most this, at most 1/8 of the context window
_MEMO_MAX = 100_000


def reply_reserve(max_tokens: int | None, context_window: int) -> int:
    """Tokens kept free for the answer: `max_tokens` when set, else min(4096, context window
    / 8)."""
    if max_tokens is not None and max_tokens > 0:
        return max_tokens
    return min(DEFAULT_REPLY_RESERVE, context_window // 8)


def _bytes_bound(text: Any) -> int:
    """An upper bound of the tokens of `text`: a token is at least one byte of UTF-8; an
    image part costs at most TOKENS_PER_IMAGE_MAX."""
    if isinstance(text, list):
        return sum(_part_bound(part) for part in text)
    if not isinstance(text, str):
        return len(json.dumps(text, ensure_ascii=False)) * 4 if text else 0
    return len(text) if text.isascii() else len(text) * 4


def _part_bound(part: Any) -> int:
    if isinstance(part, dict) and part.get("type") == "image_url":
        return TOKENS_PER_IMAGE_MAX
    if isinstance(part, dict) and isinstance(part.get("text"), str):
        return _bytes_bound(part["text"]) + 4
    return _bytes_bound(json.dumps(part, ensure_ascii=False))


def _message_bound(m: Message) -> int:
    n = TOKENS_PER_MESSAGE + 1 + _bytes_bound(m.content) + _bytes_bound(m.name or "")
    for call in m.tool_calls or ():
        n += 3 + _bytes_bound(call.name) + _bytes_bound(call.arguments)
    return n + (1 if m.name else 0)


def _fixed_bound(d: dict[str, Any]) -> int:
    """An upper bound of one fixed part: a message as sent (its `tool_calls` with their
    arguments: a tool loop's calls are fixed too), or a tool definition."""
    if "role" not in d:
        return 32 + _bytes_bound(json.dumps(d, ensure_ascii=False))
    n = TOKENS_PER_MESSAGE + 2 + _bytes_bound(d.get("content") or "")
    n += sum(_bytes_bound(d.get(key) or "") + 1 for key in ("name", "tool_call_id") if d.get(key))
    for call in d.get("tool_calls") or ():  # as `ToolCall.to_api` makes them
        fn = call["function"]
        n += 3 + _bytes_bound(fn["name"]) + _bytes_bound(fn["arguments"])
    return n


class RatioFile:
    """Learned count ratios by model, kept between runs. Best effort: a missing, unreadable or
    malformed file reads as empty, and a failed write is ignored (it is only a cache)."""

    def __init__(self, path: Path) -> None:
        self.path = path

    def _read(self) -> dict[str, float]:
        data = fileio.read_json_cache(self.path, fileio.SMALL_CACHE)
        return {k: float(v) for k, v in data.items() if isinstance(v, (int, float)) and v > 0}

    def load(self, model: str) -> float | None:
        return self._read().get(model)

    def save(self, model: str, ratio: float) -> None:
        data = self._read()
        data[model] = round(ratio, 4)
        with contextlib.suppress(OSError):
            self.path.parent.mkdir(parents=True, exist_ok=True)
            blob = json.dumps(data, sort_keys=True, indent=1) + "\n"
            fileio.atomic_write(self.path, blob.encode("utf-8"), durable=False)


CALIBRATE_FROM = 0.4  # learn the token ratio from requests that used at least this share


class TokenBudget:
    """A `context.Budget`: trims a history window so the whole request fits (see the module)."""

    def __init__(
        self,
        counter: TokenCounter,
        *,
        context_window: int,
        reserve: int,
        margin: float = MARGIN,
        ratios: RatioFile | None = None,
        step: int = 1,
        late: Late | None = None,
        max_tokens: int | None = None,
        source: str = "",
        refuse: Callable[[int, int], tuple[str, str]] | None = None,
    ) -> None:
        """`late`: the window the server reports after this budget was made (None until then),
        taken at the start of a turn, with the reply reserve for it from `max_tokens`.
        `source`: where the window's figure comes from. `refuse(tokens, window)`: for a server
        that cuts a prompt over its window silently, the error (message, hint) for a turn whose
        own message (with the system prompt and tools) is over it: the turn fails instead."""
        self.counter = counter
        self.step = step  # the window's start moves by this many messages (context.window_step)
        self.context_window = context_window
        self.source = source
        self.reserve = reserve
        self.margin = margin
        self.ratios = ratios
        self._saved_ratio: float | None = None
        self._seeded = ratios is None
        self._memo: dict[int, tuple[Message, str, int]] = {}
        self._memo_ratio = counter.ratio
        self._late = late
        self._max_tokens = max_tokens
        self._refuse = refuse
        self.reported = False  # the window is the one the server reported late

    def _take_late_context_window(self) -> None:
        w = self._late.value() if self._late is not None else None
        if w is not None and w.n != self.context_window:
            self.context_window = w.n
            self.reserve = reply_reserve(self._max_tokens, w.n)
            self.reported = True
        if w is not None:
            self.source = w.source
            self._late = None

    def after_request(self) -> None:
        """A request was sent: a server that loads models has loaded this one by now."""
        if self._late is not None:
            self._late.after_request()

    def check_fits(self, fixed: Sequence[dict[str, Any]]) -> None:
        """For a server that cuts an over-long prompt silently: ContextLengthError when the
        fixed part alone (no history) is over the window, rather than a request it would cut."""
        if self._refuse is None or self._fits_without_counting((), fixed):
            return
        n = self.fixed_tokens(fixed)
        if n > self.context_window * (1.0 - self.margin):
            message, hint = self._refuse(n, self.context_window)
            raise ContextLengthError(message, hint=hint)

    @property
    def limit(self) -> int:
        """Tokens the request (without the reply reserve) may use: window - margin - reserve."""
        return int(self.context_window * (1.0 - self.margin)) - self.reserve

    # ---- counting ----

    def cost(self, m: Message) -> int:
        """Tokens of one history message (with its overhead, without the reply priming)."""
        if self._memo_ratio != self.counter.ratio:  # calibration changed every count
            self._memo.clear()
            self._memo_ratio = self.counter.ratio
        hit = self._memo.get(id(m))
        if hit is not None and hit[0] is m and hit[1] is m.content:
            return hit[2]
        n = self.counter.count_message(m)
        if len(self._memo) >= _MEMO_MAX:
            self._memo.clear()
        self._memo[id(m)] = (m, m.content, n)
        return n

    def costs(self, messages: list[Message]) -> int:
        return sum(self.cost(m) for m in messages)

    def fixed_tokens(self, fixed: Sequence[dict[str, Any]]) -> int:
        """System prompt + current message (+ reply priming) + tool definitions; in a tool
        loop also this turn's calls and their results (conversation/round_fit.py)."""
        msgs = [d for d in fixed if "role" in d]
        tools = [d for d in fixed if "role" not in d]
        return self.counter.count_messages(msgs) + self.counter.count_tools(tools)

    def history_budget(self, fixed: Sequence[dict[str, Any]]) -> int:
        return max(0, self.limit - self.fixed_tokens(fixed))

    def _fits_without_counting(
        self, window: Sequence[Message], fixed: Sequence[dict[str, Any]]
    ) -> bool:
        scale = max(1.0, self.counter.ratio)
        bound = REPLY_PRIMING + sum(_message_bound(m) for m in window)
        bound += sum(_fixed_bound(d) for d in fixed)
        return bound * scale <= self.limit

    def overflow(self, fixed: Sequence[dict[str, Any]]) -> int:
        """Tokens by which the fixed part alone (no history) is over the limit; 0 when it fits,
        proved without counting when the cheap bound can."""
        if self._fits_without_counting((), fixed):
            return 0
        return max(0, self.fixed_tokens(fixed) - self.limit)

    # ---- calibration ----

    def _seed(self) -> None:
        """Start from the ratio an earlier run learned for this model (once, lazily)."""
        if self._seeded:
            return
        self._seeded = True
        if self.ratios is not None:
            self._saved_ratio = self.ratios.load(self.counter.model)
            if self._saved_ratio is not None:
                self.counter.seed(self._saved_ratio)

    def observe(
        self,
        messages: Sequence[dict[str, Any]],
        tools: Sequence[dict[str, Any]] | None,
        prompt_tokens: int,
    ) -> None:
        """Learn from one request: `messages` and `tools` exactly as sent, `prompt_tokens` as
        the provider reported them (0 or less: nothing reported, nothing learned)."""
        if prompt_tokens <= 0 or not messages:
            return
        if prompt_tokens < CALIBRATE_FROM * self.limit:
            # far from full: trimming does not depend on the ratio yet, and counting would load
            # the tokenizer (100-300 ms) after every short answer
            return
        self._seed()
        c = self.counter
        estimated = c.count_messages(list(messages)) + c.count_tools(list(tools or []))
        c.calibrate(estimated, prompt_tokens)
        if self.ratios is None or c.exact:
            return
        saved = self._saved_ratio
        if saved is None or abs(c.ratio - saved) > RATIO_SAVE_CHANGE * saved:
            self.ratios.save(c.model, c.ratio)
            self._saved_ratio = c.ratio

    # ---- the Budget ----

    def __call__(self, window: list[Message], fixed: list[dict[str, Any]]) -> list[Message]:
        self._seed()
        self._take_late_context_window()
        if not window or self._fits_without_counting(window, fixed):
            return window
        budget = self.history_budget(fixed)
        if budget <= 0:
            return []
        spent = 0
        start = len(window)
        while start > 0:
            spent += self.cost(window[start - 1])
            if spent > budget:
                break
            start -= 1
        if start == 0:
            return window
        block = block_start(window, start, self.step)  # the oldest block start that fits
        if block < len(window):
            return window[block:]
        return trim_messages(
            window[start:],
            max_tokens=budget,
            token_counter=self.costs,
            strategy="last",
            start_on="user",
        )


def ratio_path(data_dir: Path) -> Path:
    """Where the token ratios learned for `data_dir` are kept (the cache folder)."""
    return derived_file(data_dir, RATIOS_FILE)


def make_budget(settings: Settings, counter: TokenCounter) -> TokenBudget:
    """The budget for `settings`' provider and model (`context_window` in the config wins); it
    keeps learned ratios for `settings.data_dir` (`ratio_path`)."""
    p = settings.provider
    cw = context_window_of(p, counter.model)
    late = None if user_set(p) else late_context_window(p)
    return TokenBudget(
        counter,
        context_window=cw.n,
        reserve=reply_reserve(settings.max_tokens, cw.n),
        ratios=RatioFile(ratio_path(settings.data_dir)),
        step=window_step(settings.persona.max_history_messages),
        late=late,
        max_tokens=settings.max_tokens,
        source=cw.source,
        refuse=over_context_window_text(settings),
    )
