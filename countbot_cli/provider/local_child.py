"""The embedded model's own process: `python -m countbot_cli.provider.local_child` (SPEC §9).

countbot (provider/local.py) starts it on the first request to the local model and stops it
when it ends, so a native crash of llama.cpp kills this process, never countbot. One JSON
request a line on stdin (`chat`, `tokens`, `info`, `models`, `unload`, `cancel`), JSON lines on
stdout (chunks, then `end`, or an `error`); it exits when stdin closes. Models load once per
process through llama_load, each with an abort callback: a `cancel` of the running request
stops it between two steps of llama.cpp's evaluation, a long prompt's too, and its last reply is
`cancelled`. `keep_state` saves and restores the model's state around an upkeep call (a
cancelled one too). Replies go to a duplicate of fd 1, fd 1 itself to stderr. The protocol in
full: docs/design/providers.md.
"""

from __future__ import annotations

import importlib
import json
import os
import queue
import signal
import sys
import threading
import time
from collections.abc import Iterable, Mapping
from pathlib import Path
from typing import IO, Any

from countbot_cli.provider.assemble import Assembler
from countbot_cli.provider.llama_load import abort_callback, load_llama

CRASH_FILE_ENV = "COUNTBOT_TEST_MODEL_CRASH"
CRASH_AFTER = 3  # chunks
REPEAT_PENALTY = 1.1  # llama.cpp server's default; tiny models loop without it
DEFAULT_MAX_TOKENS = 1024  # reply limit when the config sets no max_tokens


class LoadFailed(Exception):
    """A model file that cannot be loaded: a configuration error for countbot."""

    def __init__(self, message: str, hint: str | None = None) -> None:
        super().__init__(message)
        self.hint = hint


# ---- requests, as llama-cpp-python takes them ----


def api_messages(messages: Iterable[Mapping[str, Any]]) -> list[dict[str, Any]]:
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


def template_uses_tools(llm: Any) -> bool:
    metadata = getattr(llm, "metadata", None) or {}
    return "tools" in str(metadata.get("tokenizer.chat_template") or "")


def chat_kwargs(req: Mapping[str, Any], llm: Any, stream: bool) -> dict[str, Any]:
    """`create_chat_completion`'s arguments for a request (tools only when the template uses
    them or `tool_choice` forces one: llama-cpp-python then constrains the output to it)."""
    kw: dict[str, Any] = {
        "messages": api_messages(req.get("messages") or []),
        "stream": stream,
        "model": req.get("model") or "",
        "repeat_penalty": REPEAT_PENALTY,
    }
    tools, choice = req.get("tools"), req.get("tool_choice")
    if tools and (isinstance(choice, dict) or template_uses_tools(llm)):
        kw["tools"] = tools
        if choice is not None:
            kw["tool_choice"] = choice
    if req.get("temperature") is not None:
        kw["temperature"] = req["temperature"]
    # with no limit a small model may ramble until its context is full (minutes on a CPU)
    limit = req.get("max_tokens")
    kw["max_tokens"] = limit if limit is not None else DEFAULT_MAX_TOKENS
    return kw


def evaluated(llm: Any) -> list[int]:
    """The tokens already in the model's KV cache (what an earlier call evaluated)."""
    n = int(getattr(llm, "n_tokens", 0) or 0)
    ids = getattr(llm, "input_ids", None)
    return [] if ids is None or n <= 0 else [int(t) for t in ids[:n]]


def reused(before: list[int], llm: Any, prompt_tokens: int) -> int:
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


def count_tokens(llm: Any, text: str) -> int:
    return len(llm.tokenize(text.encode("utf-8"), add_bos=False, special=False))


# ---- the process ----


class Child:
    """The request loop; `out` is the protocol stream."""

    def __init__(self, out: IO[bytes]) -> None:
        self.out = out
        self.models: dict[tuple[str, int], Any] = {}
        self.cancelled = -1  # the id of the request to stop
        self.running = 0  # the id of the request being handled
        self.requests: queue.Queue[dict[str, Any]] = queue.Queue()
        self.abort: Any = None  # llama.cpp's abort callback, made with the first model
        self.kept: tuple[Any, Any] | None = None  # (model, state) to put back (`put_back`)

    def stopping(self) -> bool:
        """Whether the running request was cancelled (llama.cpp asks during evaluation)."""
        return self.cancelled == self.running

    def send(self, obj: dict[str, Any]) -> None:
        self.out.write(json.dumps(obj, ensure_ascii=False).encode("utf-8") + b"\n")
        self.out.flush()

    def read_stdin(self, stdin: IO[bytes]) -> None:
        """The reader thread: requests to the queue, cancels at once; EOF ends the process."""
        for line in stdin:
            try:
                msg = json.loads(line)
            except ValueError:
                continue
            if msg.get("op") == "cancel":
                self.cancelled = int(msg.get("id", -1))
            else:
                self.requests.put(msg)
        os._exit(0)  # countbot is gone: nothing to answer to

    def serve(self) -> None:
        while True:
            msg = self.requests.get()
            rid = self.running = int(msg.get("id", 0))
            try:
                self.send({"id": rid, **self.handle(msg)})
            except LoadFailed as exc:
                error = {"kind": "config", "message": str(exc), "hint": exc.hint}
                self.send({"id": rid, "error": error})
            except Exception as exc:  # a failed call; the process goes on
                text = str(exc).strip() or type(exc).__name__
                self.send({"id": rid, "error": {"kind": "call", "message": text}})
            finally:
                self.put_back()

    def put_back(self) -> None:
        """The chat's KV cache back as it was before an upkeep call (`keep_state`): after the
        call's last reply, so a cancelled one ends at once, and before the next request."""
        if self.kept is not None:
            llm, saved = self.kept
            self.kept = None
            llm.load_state(saved)

    def handle(self, msg: dict[str, Any]) -> dict[str, Any]:
        op = msg.get("op")
        if op == "models":
            return {"models": [[p, n, int(m.n_tokens)] for (p, n), m in self.models.items()]}
        if op == "unload":
            for llm in self.models.values():
                llm.close()
            self.models.clear()
            return {"ok": True}
        llm, load_s = self.model(str(msg["model_path"]), int(msg.get("n_ctx") or 0))
        if op == "tokens":
            return {"count": count_tokens(llm, str(msg.get("text", "")))}
        if op == "info":
            return {"tools": template_uses_tools(llm), "load_seconds": load_s}
        if op != "chat":
            raise ValueError(f"unknown request {op!r}")
        if msg.get("keep_state") and llm.n_tokens:
            self.kept = (llm, llm.save_state())
        return self.chat(int(msg["id"]), llm, msg, load_s)

    def model(self, path: str, n_ctx: int) -> tuple[Any, float]:
        """The cached model for (path, n_ctx), and the seconds this call spent loading it."""
        key = (str(Path(path).resolve()), n_ctx)
        if key in self.models:
            return self.models[key], 0.0
        if not Path(path).is_file():
            raise LoadFailed(f"no such model file: {path}")
        start = time.perf_counter()
        if self.abort is None:
            self.abort = abort_callback(self.stopping)
        try:
            llm = load_llama(path, n_ctx, abort=self.abort)
        except (ValueError, RuntimeError, OSError) as exc:
            raise LoadFailed(
                f"{path} is not a GGUF model llama-cpp-python can load ({exc})",
                hint="point model_path at a .gguf file",
            ) from exc
        self.models[key] = llm
        return llm, time.perf_counter() - start

    def chat(self, rid: int, llm: Any, msg: dict[str, Any], load_s: float) -> dict[str, Any]:
        """One chat completion; `cancelled` when it was cancelled, also while llama.cpp
        evaluated the prompt (its abort callback: llama-cpp-python raises RuntimeError)."""
        try:
            return self._chat(rid, llm, msg, load_s)
        except RuntimeError:
            if self.stopping():
                return {"cancelled": True}
            raise

    def _chat(self, rid: int, llm: Any, msg: dict[str, Any], load_s: float) -> dict[str, Any]:
        req, stream = msg.get("request") or {}, bool(msg.get("stream", True))
        before = evaluated(llm)
        if not stream:
            resp = llm.create_chat_completion(**chat_kwargs(req, llm, False))
            prompt = int((resp.get("usage") or {}).get("prompt_tokens") or 0)
            cached = reused(before, llm, prompt)
            return {"end": {"response": resp, "cached": cached, "load_seconds": load_s}}
        acc = Assembler()
        chunks = llm.create_chat_completion(**chat_kwargs(req, llm, True))
        try:
            for n, chunk in enumerate(chunks):
                if self.stopping():
                    return {"cancelled": True}
                acc.add_object(chunk)
                self.send({"id": rid, "chunk": chunk})
                if n + 1 == CRASH_AFTER:
                    _crash_if_asked()
        finally:  # also on cancel: stop generating now
            chunks.close()
        fin = acc.finish(True)
        completion = count_tokens(llm, fin.content + "".join(c.arguments for c in fin.tool_calls))
        prompt = max(int(llm.n_tokens) - completion, 0)  # the rest of what it evaluated
        usage = {"prompt": prompt, "completion": completion, "cached": reused(before, llm, prompt)}
        return {"end": {"usage": usage, "load_seconds": load_s}}


def _crash_if_asked() -> None:
    """The test hook (see the module docstring): one SIGSEGV, as llama.cpp would die."""
    marker = os.environ.get(CRASH_FILE_ENV)
    if marker and os.path.exists(marker):
        os.unlink(marker)
        os.kill(os.getpid(), signal.SIGSEGV)


def main() -> None:
    out = os.fdopen(os.dup(1), "wb")
    os.dup2(2, 1)  # native prints go to stderr, not into the protocol
    child = Child(out)
    importlib.import_module("llama_cpp")  # the slow part of starting, before saying ready
    child.send({"ready": True, "pid": os.getpid()})
    threading.Thread(target=child.read_stdin, args=(sys.stdin.buffer,), daemon=True).start()
    child.serve()


if __name__ == "__main__":
    main()
