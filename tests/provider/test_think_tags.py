"""A `<think>` block opening a local model's answer (Qwen3) is reasoning, not the answer
(provider/think_tags.py): the same split whatever pieces the stream comes in, the finished
answer rewritten alike, and an answer without one passed on untouched."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from countbot_cli.messages import Finished, ReasoningDelta, StreamEvent, TextDelta
from countbot_cli.provider.think_tags import split_thinking, thinking_in_text, without_thinking

QWEN3 = "<think>\nThe user greets me. Answer briefly.\n</think>\n\nHello! How can I help?"


def streamed(text: str, cuts: list[int]) -> Iterator[StreamEvent]:
    edges = [0, *cuts, len(text)]
    for a, b in zip(edges, edges[1:], strict=False):
        if b > a:
            yield TextDelta(text[a:b])
    yield Finished(content=text, tool_calls=[], finish_reason="stop")


def seen(events: Iterator[StreamEvent]) -> tuple[str, str, Finished]:
    out = list(thinking_in_text(events))
    text = "".join(e.text for e in out if isinstance(e, TextDelta))
    reasoning = "".join(e.text for e in out if isinstance(e, ReasoningDelta))
    finished = out[-1]
    assert isinstance(finished, Finished)
    return text, reasoning, finished


@pytest.mark.parametrize("size", [1, 2, 3, 5, 7, 11, 1000])
def test_a_thinking_block_is_reasoning_in_any_pieces(size: int) -> None:
    text, reasoning, finished = seen(streamed(QWEN3, list(range(size, len(QWEN3), size))))
    assert text == "Hello! How can I help?"
    assert reasoning.strip() == "The user greets me. Answer briefly."
    assert (finished.content, finished.reasoning) == (text, reasoning.strip())


@pytest.mark.parametrize(
    "answer",
    ["Hello there.", "<b>bold</b> claim", "  <thin ice", "<th", "I <think> so.", ""],
)
def test_an_answer_without_an_opening_block_is_untouched(answer: str) -> None:
    text, reasoning, finished = seen(streamed(answer, list(range(1, len(answer)))))
    assert (text, reasoning, finished.content) == (answer, "", answer)


def test_a_block_never_closed_is_all_reasoning() -> None:
    cut = "<think>still weighing it up"
    text, reasoning, finished = seen(streamed(cut, [3, 9]))
    assert (text, finished.content) == ("", "")
    assert reasoning == "still weighing it up" == finished.reasoning


def test_the_whole_answer_splits_the_same_way() -> None:
    assert split_thinking(QWEN3) == (
        "The user greets me. Answer briefly.",
        "Hello! How can I help?",
    )
    assert split_thinking("<think></think>Hi") == ("", "Hi")
    plain = Finished(content="Hi", tool_calls=[], finish_reason="stop")
    assert without_thinking(plain) is plain


def test_the_local_provider_streams_the_thinking_as_reasoning(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """The embedded provider (a pulled Qwen3) applies it to what its model process sends."""
    from cbenv import local_settings

    from countbot_cli.messages import ChatRequest
    from countbot_cli.provider.local import LocalProvider, bundled_model_path

    if bundled_model_path() is None:
        pytest.skip("the bundled GGUF (the local extra) is not installed")
    provider = LocalProvider(local_settings())
    monkeypatch.setattr(provider, "_generate", lambda req: streamed(QWEN3, [4, 9, 40, 47, 50]))
    req = ChatRequest(model="m", messages=[{"role": "user", "content": "hi"}])
    out = list(provider.stream(req))
    assert "".join(e.text for e in out if isinstance(e, TextDelta)) == "Hello! How can I help?"
    assert "greets me" in "".join(e.text for e in out if isinstance(e, ReasoningDelta))
    assert isinstance(out[-1], Finished) and out[-1].content == "Hello! How can I help?"
