"""A local model's thinking, written into its answer as `<think>…</think>` (Qwen3, the
DeepSeek-R1 distills): shown and kept as reasoning, not as the answer.

Only a block that opens the answer (after whitespace) counts; what follows `</think>`, its
leading blank lines dropped, is the answer. While streaming, text is held back only while it
may still be the opening tag or the closing one; a block never closed is all reasoning. The
`Finished` is rewritten by the same rule (`split_thinking`), so the session keeps what the
user saw. The invariant: the answer never carries the opening block.
"""

from __future__ import annotations

from collections.abc import Generator, Iterable
from dataclasses import replace

from countbot_cli.messages import Finished, ReasoningDelta, StreamEvent, TextDelta

OPEN, CLOSE = "<think>", "</think>"


def split_thinking(text: str) -> tuple[str, str]:
    """(reasoning, answer) of a whole answer: the opening block's text, and what follows it."""
    stripped = text.lstrip()
    if not stripped.startswith(OPEN):
        return "", text
    body = stripped[len(OPEN) :]
    end = body.find(CLOSE)
    if end < 0:
        return body.strip(), ""
    return body[:end].strip(), body[end + len(CLOSE) :].lstrip()


def without_thinking(finished: Finished) -> Finished:
    """A whole answer with its opening `<think>` block moved to its reasoning."""
    reasoning, content = split_thinking(finished.content)
    if not reasoning and content == finished.content:
        return finished
    joined = "\n\n".join(r for r in (finished.reasoning, reasoning) if r)
    return replace(finished, content=content, reasoning=joined)


def _partial_close(text: str) -> int:
    """How many of `text`'s last characters may be the start of `</think>`."""
    for n in range(min(len(CLOSE) - 1, len(text)), 0, -1):
        if CLOSE.startswith(text[-n:]):
            return n
    return 0


class _Split:
    """The streamed text's state: start (deciding) -> think -> after (blank lines dropped) ->
    answer; `held` is what may still be a tag."""

    def __init__(self) -> None:
        self.state, self.held = "start", ""

    def add(self, text: str) -> list[StreamEvent]:
        if self.state == "answer":
            return [TextDelta(text)]
        self.held += text
        out: list[StreamEvent] = []
        if self.state == "start":
            lead = self.held.lstrip()
            if not lead or (OPEN.startswith(lead) and lead != OPEN):
                return []  # blank, or maybe the tag: wait for more
            if not lead.startswith(OPEN):
                self.state, held, self.held = "answer", self.held, ""
                return [TextDelta(held)]
            self.state, self.held = "think", lead[len(OPEN) :]
        if self.state == "think":
            end = self.held.find(CLOSE)
            if end < 0:
                keep = _partial_close(self.held)
                cut = len(self.held) - keep
                thought, self.held = self.held[:cut], self.held[cut:]
                return [ReasoningDelta(thought)] if thought else []
            if end:
                out.append(ReasoningDelta(self.held[:end]))
            self.state, self.held = "after", self.held[end + len(CLOSE) :]
        rest, self.held = self.held.lstrip(), ""
        if rest:
            self.state = "answer"
            out.append(TextDelta(rest))
        return out

    def end(self) -> list[StreamEvent]:
        """What is still held when the answer ends: a short answer that only looked like the
        tag, or the last of a block never closed."""
        if self.state == "start" and self.held:
            return [TextDelta(self.held)]
        if self.state == "think" and self.held:
            return [ReasoningDelta(self.held)]
        return []


def thinking_in_text(events: Iterable[StreamEvent]) -> Generator[StreamEvent, None, None]:
    """`events` with an opening `<think>` block streamed as reasoning (see the module).
    Closing this generator closes `events` (stops generation)."""
    split = _Split()
    try:
        for event in events:
            if isinstance(event, TextDelta):
                yield from split.add(event.text)
            elif isinstance(event, Finished):
                yield from split.end()
                yield without_thinking(event)
            else:
                yield event
    finally:
        close = getattr(events, "close", None)
        if callable(close):
            close()
