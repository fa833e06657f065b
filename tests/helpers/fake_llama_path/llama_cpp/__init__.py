"""A scripted stand-in for llama-cpp-python: countbot's real model process
(provider/local_child.py) imports it as `llama_cpp` when a test puts this folder's parent first
on PYTHONPATH (tests/helpers/fake_llama.py does), so `countbot ask` runs the whole local path
(its child process, the protocol, text tool calls, approvals) with answers a test chose and no
weights.

The script is the JSON file named by FAKE_LLAMA (fake_llama.py writes it):

- `answers`: one text per chat completion, in order (the last one repeats). `{ECHO}` in it
  stands for the first `<tool_call>…</tool_call>` in the latest message that is not the
  model's (the user's text, an attachment, a tool result): a model that copies what it read;
  `{LAST}` for the latest user message.
- `summary`: the answer to a completion whose first message is not a system prompt (memory
  upkeep's calls), instead of the next of `answers`.
- `slow_prompts`: seconds each of the first such calls spends evaluating its prompt before its
  first token, as llama.cpp does in native code: it asks the context's abort callback
  (`abort_callback`, set through llama_cpp.llama_context_default_params) every 10 ms, and
  `abort_lag` seconds after it says stop, the evaluation fails as llama.cpp's does
  (RuntimeError "llama_decode returned 2"). `events_file` gets a line for each evaluation
  begun (`evaluating`) and each one aborted (`aborted`).
- `pid_file`: the child writes its pid there once it is importing us.
- `ready`: "hang" never finishes importing (the child never says it is ready).
- `line_bytes`: the child's first reply to a chat is one protocol line that many bytes long
  (a chunk whose text is all "x", written a MiB at a time); with `"newline": false` it never
  ends, and the child then waits forever.
- `stall`: after the first chunk the answer stops coming and cancels are not heard (a model
  stuck in native code).
- `reply`: the child's replies to a chat are replaced by a malformed one: "no-kind" (neither
  chunk, end nor error), "not-json" (a line that is not JSON), "bad-end" (usage that is not an
  object).
"""

from __future__ import annotations

import json
import os
import re
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

_SCRIPT: dict[str, Any] = json.loads(Path(os.environ["FAKE_LLAMA"]).read_text(encoding="utf-8"))
_TAG = re.compile(r"<tool_call>.*?</tool_call>", re.S)
_calls = 0
_slow = list(_SCRIPT.get("slow_prompts") or [])

if _SCRIPT.get("pid_file"):
    Path(_SCRIPT["pid_file"]).write_text(str(os.getpid()), encoding="utf-8")

if _SCRIPT.get("ready") == "hang":
    while True:
        time.sleep(3600)


def _break_replies(kind: str) -> None:
    """Make the child's chat replies malformed (the child module is __main__)."""
    child = sys.modules["__main__"].Child
    send = child.send

    def broken(self: Any, obj: dict[str, Any]) -> None:
        if "chunk" not in obj and "end" not in obj:
            return send(self, obj)
        if kind == "long-line":
            _long_line(self.out, obj["id"], int(_SCRIPT["line_bytes"]))
        elif kind == "not-json":
            self.out.write(b"this is not JSON\n")
            self.out.flush()
        elif kind == "bad-end":
            send(self, {"id": obj["id"], "end": {"usage": ["not", "an", "object"]}})
        else:
            send(self, {"id": obj["id"], "surprise": True})
        return None

    child.send = broken


def _long_line(out: Any, rid: int, size: int) -> None:
    """One reply line of `size` bytes, written a MiB at a time (the child stays small)."""
    head = b'{"id": %d, "chunk": {"text": "' % rid
    out.write(head)
    left = size - len(head) - len(b'"}}')
    block = b"x" * (1 << 20)
    while left > 0:
        out.write(block[: min(left, len(block))])
        left -= len(block)
    if _SCRIPT.get("newline", True):
        out.write(b'"}}\n')
        out.flush()
        return
    out.flush()
    while True:
        time.sleep(3600)


if _SCRIPT.get("line_bytes"):
    _break_replies("long-line")
elif _SCRIPT.get("reply"):
    _break_replies(_SCRIPT["reply"])


def _echo(messages: list[dict[str, Any]]) -> str:
    for message in reversed(messages):
        content = message.get("content")
        if message.get("role") != "assistant" and isinstance(content, str):
            found = _TAG.search(content)
            if found:
                return found.group(0)
    return "(nothing to echo)"


def _last_user(messages: list[dict[str, Any]]) -> str:
    said = [m.get("content") for m in messages if m.get("role") == "user"]
    return str(said[-1]) if said else ""


def _event(what: str) -> None:
    if _SCRIPT.get("events_file"):
        with open(_SCRIPT["events_file"], "a", encoding="utf-8") as f:
            f.write(what + "\n")


def _chunk(delta: dict[str, Any], finish: str | None = None) -> dict[str, Any]:
    choice = {"index": 0, "delta": delta, "finish_reason": finish}
    return {"id": "fake", "object": "chat.completion.chunk", "choices": [choice]}


class Llama:
    """What local_child.py uses of llama_cpp.Llama."""

    def __init__(self, model_path: str, n_ctx: int = 0, **_kw: Any) -> None:
        from llama_cpp import llama_cpp as lowlevel  # its defaults, as countbot set them

        self.model_path = model_path
        self.abort = lowlevel.llama_context_default_params().abort_callback
        self.metadata = {"tokenizer.chat_template": "{% if tools %}{{ tools }}{% endif %}"}
        self.n_tokens = 0
        self.input_ids: list[int] = []

    def tokenize(self, text: bytes, add_bos: bool = False, special: bool = False) -> list[int]:
        return list(range(len(text) // 4 + 1))

    def create_chat_completion(self, **kw: Any) -> Any:
        global _calls
        messages = kw.get("messages") or []
        evaluate = 0.0
        if "summary" in _SCRIPT and messages and messages[0].get("role") != "system":
            text = str(_SCRIPT["summary"])
            evaluate = _slow.pop(0) if _slow else 0.0
        else:
            answers = _SCRIPT.get("answers") or ["ok"]
            text = str(answers[min(_calls, len(answers) - 1)])
            _calls += 1
        text = text.replace("{ECHO}", _echo(messages)).replace("{LAST}", _last_user(messages))
        self.n_tokens = len(self.tokenize(text.encode()))
        if evaluate:
            return self._evaluated(evaluate, text, bool(kw.get("stream")))
        if not kw.get("stream"):
            message = {"role": "assistant", "content": text}
            usage = {"prompt_tokens": 1, "completion_tokens": 1, "total_tokens": 2}
            choice = {"index": 0, "message": message, "finish_reason": "stop"}
            return {"id": "fake", "object": "chat.completion", "choices": [choice], "usage": usage}
        return self._stream(text)

    def _evaluated(self, seconds: float, text: str, stream: bool) -> Iterator[dict[str, Any]]:
        """The prompt evaluated first (lazily, as llama-cpp-python's stream does)."""
        _event("evaluating")
        end = time.monotonic() + seconds
        while time.monotonic() < end:
            if self.abort is not None and self.abort(None):
                time.sleep(float(_SCRIPT.get("abort_lag", 0)))
                _event("aborted")
                raise RuntimeError("llama_decode returned 2")
            time.sleep(0.01)
        assert stream, "slow_prompts are for streamed calls"
        yield from self._stream(text)

    def _stream(self, text: str) -> Iterator[dict[str, Any]]:
        yield _chunk({"role": "assistant", "content": ""})
        for piece in re.findall(r".{1,8}", text, re.S):
            yield _chunk({"content": piece})
            if _SCRIPT.get("stall"):
                while True:
                    time.sleep(3600)
        yield _chunk({}, "stop")

    def save_state(self) -> None:
        return None

    def load_state(self, state: Any) -> None:
        return None

    def close(self) -> None:
        return None
