"""Token counting: how many tokens OpenAI bills for a chat request, for one model.

Counts are tiktoken's (`encodings.py` builds the encoding offline, on the first count that
needs it) plus OpenAI's per-message overhead, for OpenAI's model families; other families get
the same counts (or, without an encoding, `estimate_tokens`) scaled by a ratio learned from
the provider's reported usage. The budget proves most requests fit by a byte bound alone, and
the REPL's meter shows an estimate until an exact count matters, so most runs load nothing.
Each message is counted once per process (token_cache.py); a text over EXACT_MAX_CHARS is
counted from 8 slices of it rather than whole (BPE on one long run of letters costs seconds).
"""

from __future__ import annotations

import json
import threading
from typing import TYPE_CHECKING, Any

from countbot_cli.conversation.encodings import (
    DATA_ENV,
    DEFAULT_LOADER,
    SOURCE_CACHE,
    SOURCE_ESTIMATE,
    SOURCE_PACKAGE,
    SUPPORTED_ENCODINGS,
    EncodingLoader,
    cache_file_for,
    tiktoken_cache_dir,
)
from countbot_cli.conversation.input.images import data_url_tokens
from countbot_cli.conversation.token_estimate import estimate_tokens
from countbot_cli.provider.model_limits import (
    CL100K,
    CONTEXT_WINDOWS,
    DEFAULT_CONTEXT_WINDOW,
    O200K,
    context_window_for,
    encoding_for_model,
    is_openai_model,
    normalize_model,
)

if TYPE_CHECKING:
    from tiktoken import Encoding


# ---- counting ----

TOKENS_PER_MESSAGE = 3  # <|start|>{role}<|message|>...<|end|> (cookbook, gpt-3.5-0125/4/4o)
TOKENS_PER_NAME = 1
REPLY_PRIMING = 3  # every reply is primed with <|start|>assistant<|message|>: once per request
TOKENS_PER_TOOL_CALL = 3  # approximation: a tool call's name and arguments are counted as text
TOKENS_PER_NON_TEXT_PART = 85  # an image part: OpenAI's low-detail cost, a floor
RATIO_MIN, RATIO_MAX = 0.5, 2.0
CALIBRATION_MIN_TOKENS = 64  # smaller prompts are mostly chat-template noise: ignored
EXACT_MAX_CHARS = 256 * 1024  # a longer text is estimated from samples, not tokenized whole
SAMPLES, SAMPLE_CHARS = 8, 4096  # 32 Ki characters tokenized for a text of any length

MessageLike = Any  # countbot_cli.messages.Message or an API dict


class TokenCounter:
    """Counts tokens the way OpenAI bills a chat request, for one model.

    Counts are exact for OpenAI models with a loaded encoding. For other families (and for the
    estimate) they are approximations multiplied by ``ratio``, learned through ``calibrate``
    from the provider's reported ``prompt_tokens``. Counting blocks until the encoding is
    loaded; ``ready`` tells whether it would, ``preload`` loads it in a background thread.
    """

    def __init__(
        self, model: str, *, encoding_name: str | None = None, loader: EncodingLoader | None = None
    ) -> None:
        self.model = model
        self.encoding_name = encoding_name or encoding_for_model(model)
        self._native = is_openai_model(model) and self.encoding_name == encoding_for_model(model)
        self._loader = loader or DEFAULT_LOADER
        self._ratio = 1.0
        self._calibrated = False
        self._lock = threading.Lock()
        self.hits = 0
        self.misses = 0

    # -- encoding --

    def _encoding(self) -> Encoding | None:
        return self._loader.load(self.encoding_name)

    @property
    def ready(self) -> bool:
        return self._loader.is_loaded(self.encoding_name)

    @property
    def source(self) -> str:
        """SOURCE_PACKAGE / SOURCE_CACHE / SOURCE_ESTIMATE (loads the encoding if needed)."""
        self._encoding()
        return self._loader.source(self.encoding_name) or SOURCE_ESTIMATE

    @property
    def exact(self) -> bool:
        """True when counts come from the model's own tokenizer: the ratio is not applied."""
        return self._native and self._encoding() is not None

    def preload(self, *, background: bool = True) -> threading.Thread | None:
        """Load the encoding now, or in a daemon thread (returned) when ``background``."""
        if not background:
            self._encoding()
            return None
        thread = threading.Thread(target=self._encoding, name="countbot-tokens", daemon=True)
        thread.start()
        return thread

    # -- raw counts (before the ratio) --

    def _text(self, text: str) -> int:
        if not text:
            return 0
        counts = self._loader.counts
        known = counts.text(self.encoding_name, text)
        if known is not None:
            return known
        enc = self._encoding()
        if enc is None:
            n = estimate_tokens(text)
        elif len(text) > EXACT_MAX_CHARS:  # BPE on one long line takes seconds a megabyte
            with counts.long_text_lock:  # a second thread waits for this count, not redoes it
                known = counts.text(self.encoding_name, text)
                n = known if known is not None else _sampled(enc, text)
                counts.put_text(self.encoding_name, text, n)  # before the waiter looks again
            return n
        else:
            n = len(enc.encode_ordinary(text))
        counts.put_text(self.encoding_name, text, n)
        return n

    def _content(self, content: Any) -> int:
        if isinstance(content, str):
            return self._text(content)
        total = 0
        for part in content if isinstance(content, list) else []:
            text = part.get("text") if isinstance(part, dict) else None
            total += self._text(text) if isinstance(text, str) else _part_tokens(part)
        return total

    def _raw_message(self, msg: MessageLike) -> int:
        key, role, content, name, calls = _fields(msg)
        cached = self._loader.counts.message(self.encoding_name, key)
        if cached is not None:
            self.hits += 1
            return cached
        self.misses += 1
        n = TOKENS_PER_MESSAGE + self._text(role) + self._content(content)
        if name:
            n += self._text(str(name)) + TOKENS_PER_NAME
        for call_name, args in calls:
            n += TOKENS_PER_TOOL_CALL + self._text(call_name) + self._text(args)
        self._loader.counts.put_message(self.encoding_name, key, n)
        return n

    def _scale(self, raw: int) -> int:
        if self._ratio == 1.0 or self.exact:
            return raw
        return int(raw * self._ratio + 0.999)

    # -- public counts --

    def count_text(self, text: str) -> int:
        return self._scale(self._text(text))

    def count_message(self, msg: MessageLike) -> int:
        """One message with its overhead (3, +1 with a name), without the reply priming."""
        return self._scale(self._raw_message(msg))

    def count_messages(self, messages: list[MessageLike]) -> int:
        """A whole request's messages: per-message counts plus the reply priming (3) once."""
        return self._scale(sum(self._raw_message(m) for m in messages) + REPLY_PRIMING)

    def count_tools(self, tool_specs: list[dict[str, Any]]) -> int:
        """Tool definitions, by the cookbook's ``num_tokens_for_tools`` (exact for flat string/enum
        parameters on gpt-4o/3.5/4); nested schemas add their JSON's tokens (an approximation)."""
        if not tool_specs:
            return 0
        func_init = 7 if self.encoding_name == O200K else 10
        total = 12  # func_end
        for spec in tool_specs:
            fn = spec.get("function", spec) if isinstance(spec, dict) else {}
            total += func_init + self._text(
                f"{fn.get('name', '')}:{_strip_dot(fn.get('description'))}"
            )
            props = (fn.get("parameters") or {}).get("properties") or {}
            if props:
                total += 3  # prop_init
            for pname, prop in props.items():
                total += 3 + self._property(str(pname), prop if isinstance(prop, dict) else {})
        return self._scale(total)

    def _property(self, pname: str, prop: dict[str, Any]) -> int:
        ptype = prop.get("type", "")
        ptype = "|".join(map(str, ptype)) if isinstance(ptype, list) else str(ptype)
        n = self._text(f"{pname}:{ptype}:{_strip_dot(prop.get('description'))}")
        enum = prop.get("enum")
        if isinstance(enum, list):
            n += -3 + sum(3 + self._text(str(item)) for item in enum)
        extra = {k: v for k, v in prop.items() if k not in ("type", "description", "enum")}
        if extra:
            n += self._text(json.dumps(extra, ensure_ascii=False, separators=(",", ":")))
        return n

    # -- calibration --

    @property
    def ratio(self) -> float:
        """Learned reported/estimated ratio; applied to every count unless ``exact``."""
        return self._ratio

    def calibrate(self, estimated: int, reported_prompt_tokens: int) -> float:
        """Learn from one response: ``estimated`` is what count_* returned for the request,
        ``reported_prompt_tokens`` the provider's usage. The observed ratio is clamped to
        [0.5, 2.0]; the first sample is taken as is, later ones are averaged in (weight 0.5).
        Requests under 64 estimated tokens are ignored. Returns the new ratio."""
        with self._lock:
            if estimated < CALIBRATION_MIN_TOKENS or reported_prompt_tokens <= 0:
                return self._ratio
            applied = 1.0 if self.exact else self._ratio
            observed = reported_prompt_tokens * applied / estimated
            observed = min(RATIO_MAX, max(RATIO_MIN, observed))
            self._ratio = observed if not self._calibrated else (self._ratio + observed) / 2
            self._calibrated = True
            return self._ratio

    def seed(self, ratio: float) -> None:
        """Start from a ratio learned earlier (another process); later samples average in."""
        with self._lock:
            if not self._calibrated and ratio > 0:
                self._ratio = min(RATIO_MAX, max(RATIO_MIN, ratio))
                self._calibrated = True


def _fields(msg: MessageLike) -> tuple[tuple[Any, int], str, Any, Any, list[tuple[str, str]]]:
    """(cache key, role, content, name, [(tool name, arguments)]) of a Message or an API dict."""
    if not isinstance(msg, dict):
        calls = [(c.name, c.arguments) for c in msg.tool_calls or []]
        images = tuple(msg.images or ())
        key = (msg.id, hash((msg.role, msg.kept, msg.content, msg.name, tuple(calls), images)))
        content = msg.to_api()["content"] if images or msg.kept else msg.content
        return key, msg.role, content, msg.name, calls
    fns = [c.get("function") or {} for c in msg.get("tool_calls") or [] if isinstance(c, dict)]
    calls = [(str(f.get("name") or ""), str(f.get("arguments") or "")) for f in fns]
    role, content, name = str(msg.get("role") or ""), msg.get("content"), msg.get("name")
    return (msg.get("id"), hash(repr((role, content, name, calls)))), role, content, name, calls


def _sampled(enc: Encoding, text: str) -> int:
    """A long text's tokens from SAMPLES evenly spaced slices of SAMPLE_CHARS, scaled to its
    length: the text's own characters per token (4 for English prose, 2 for one long run of a
    letter, 1 for random bytes), for a fixed price whatever its length."""
    step = len(text) // SAMPLES
    slices = (text[i * step : i * step + SAMPLE_CHARS] for i in range(SAMPLES))
    tokens = sum(len(enc.encode_ordinary(s)) for s in slices)
    return max(1, round(tokens * len(text) / (SAMPLES * SAMPLE_CHARS)))


def _part_tokens(part: Any) -> int:
    """A non-text content part: an image by OpenAI's tile rule (its size read from the data
    URL), anything else at the low-detail floor."""
    image = part.get("image_url") if isinstance(part, dict) else None
    url = image.get("url") if isinstance(image, dict) else None
    return data_url_tokens(url) if isinstance(url, str) else TOKENS_PER_NON_TEXT_PART


def _strip_dot(text: Any) -> str:
    s = "" if text is None else str(text)
    return s[:-1] if s.endswith(".") else s


def preload(model: str, *, background: bool = True) -> threading.Thread | None:
    """Load ``model``'s encoding into the process-wide loader (in a daemon thread by default)."""
    return TokenCounter(model).preload(background=background)


__all__ = [
    "CALIBRATION_MIN_TOKENS",
    "CL100K",
    "CONTEXT_WINDOWS",
    "DATA_ENV",
    "DEFAULT_CONTEXT_WINDOW",
    "DEFAULT_LOADER",
    "O200K",
    "RATIO_MAX",
    "RATIO_MIN",
    "REPLY_PRIMING",
    "SOURCE_CACHE",
    "SOURCE_ESTIMATE",
    "SOURCE_PACKAGE",
    "SUPPORTED_ENCODINGS",
    "TOKENS_PER_MESSAGE",
    "EncodingLoader",
    "TokenCounter",
    "cache_file_for",
    "context_window_for",
    "encoding_for_model",
    "estimate_tokens",
    "is_openai_model",
    "normalize_model",
    "preload",
    "tiktoken_cache_dir",
]
