"""The SSE decoder: framing rules, and identical events however the bytes are cut."""

from __future__ import annotations

import json
import random
import tracemalloc
from collections.abc import Callable

import pytest

from countbot_cli.provider import sse
from countbot_cli.provider.sse import MAX_LINE, LineTooLong, SSEDecoder, SSEEvent


def decode_all(data: bytes) -> list[SSEEvent]:
    """A whole body decoded at once."""
    decoder = SSEDecoder()
    return decoder.feed(data) + decoder.close()


def _chunk(delta: dict[str, object], finish: str | None = None) -> dict[str, object]:
    return {
        "id": "chatcmpl-AB12",
        "object": "chat.completion.chunk",
        "created": 1727346182,
        "model": "gpt-4o-2024-08-06",
        "choices": [{"index": 0, "delta": delta, "logprobs": None, "finish_reason": finish}],
    }


def _data(obj: object) -> bytes:
    return b"data: " + json.dumps(obj, ensure_ascii=False).encode("utf-8") + b"\n\n"


# An OpenAI-shaped text stream with multi-byte text, a keep-alive comment and a usage chunk.
TEXT_STREAM = b"".join(
    [
        b": OPENROUTER PROCESSING\n\n",
        _data(_chunk({"role": "assistant", "content": ""})),
        _data(_chunk({"content": "Grüß dich, "})),
        _data(_chunk({"content": "你好 🌍"})),
        b": keep-alive\n\n",
        _data(_chunk({}, "stop")),
        _data({"id": "chatcmpl-AB12", "choices": [], "usage": {"prompt_tokens": 9}}),
        b"data: [DONE]\n\n",
    ]
)

# Tool-call fragments split like OpenAI's recorded stream, plus named events, ids and retry.
TOOL_STREAM = b"".join(
    [
        b"retry: 3000\n",
        b"id: 1\nevent: message\n",
        _data(
            _chunk(
                {
                    "tool_calls": [
                        {
                            "index": 0,
                            "id": "call_4Xzl",
                            "type": "function",
                            "function": {"name": "get_weather", "arguments": ""},
                        }
                    ]
                }
            )
        ),
        b"id: 2\n",
        _data(_chunk({"tool_calls": [{"index": 0, "function": {"arguments": '{"city'}}]})),
        b'data: {"multi":\ndata: "line"}\n\n',
        _data(_chunk({}, "tool_calls")),
        b"data: [DONE]\n\n",
    ]
)

STREAMS = {
    "text-lf": TEXT_STREAM,
    "text-crlf": TEXT_STREAM.replace(b"\n", b"\r\n"),
    "text-cr": TEXT_STREAM.replace(b"\n", b"\r"),
    "tool-lf": TOOL_STREAM,
    "tool-crlf": TOOL_STREAM.replace(b"\n", b"\r\n"),
    "tool-cr": TOOL_STREAM.replace(b"\n", b"\r"),
}


def _feed_parts(parts: list[bytes]) -> list[SSEEvent]:
    decoder = SSEDecoder()
    events: list[SSEEvent] = []
    for part in parts:
        events.extend(decoder.feed(part))
    return events + decoder.close()


def _cut(data: bytes, offsets: list[int]) -> list[bytes]:
    bounds = [0, *sorted(offsets), len(data)]
    return [data[a:b] for a, b in zip(bounds, bounds[1:], strict=False)]


def test_text_stream_events() -> None:
    events = decode_all(TEXT_STREAM)
    payloads = [e.data for e in events]
    assert payloads[-1] == "[DONE]"
    assert len(events) == 6  # comments are not events
    assert json.loads(payloads[2])["choices"][0]["delta"]["content"] == "你好 🌍"
    assert all(e.event is None and e.id is None for e in events)


def test_fields_event_id_retry_and_multiline_data() -> None:
    events = decode_all(TOOL_STREAM)
    first = events[0]
    assert first.event == "message"
    assert first.id == "1"
    assert first.retry == 3000
    assert events[1].id == "2" and events[1].event is None
    assert events[2].data == '{"multi":\n"line"}'
    assert json.loads(events[2].data) == {"multi": "line"}


@pytest.mark.parametrize("name", sorted(STREAMS))
def test_line_endings_give_identical_events(name: str) -> None:
    reference = "tool-lf" if name.startswith("tool") else "text-lf"
    assert decode_all(STREAMS[name]) == decode_all(STREAMS[reference])


@pytest.mark.parametrize("name", sorted(STREAMS))
def test_every_single_cut_gives_identical_events(name: str) -> None:
    data = STREAMS[name]
    whole = decode_all(data)
    for i in range(len(data) + 1):
        assert _feed_parts([data[:i], data[i:]]) == whole, f"cut at byte {i}"


@pytest.mark.parametrize("name", sorted(STREAMS))
def test_random_multi_cuts_and_byte_by_byte(name: str) -> None:
    data = STREAMS[name]
    whole = decode_all(data)
    rng = random.Random(f"sse-{name}")
    for _ in range(200):
        offsets = rng.sample(range(1, len(data)), rng.randint(1, 40))
        assert _feed_parts(_cut(data, offsets)) == whole, f"cuts at {sorted(offsets)}"
    assert _feed_parts([data[i : i + 1] for i in range(len(data))]) == whole


def test_cr_at_end_of_one_feed_and_lf_at_start_of_next() -> None:
    decoder = SSEDecoder()
    assert decoder.feed(b"data: a\r") == []
    assert decoder.feed(b"\ndata: b\r") == []  # the LF belongs to the CR: no blank line
    assert decoder.feed(b"\n\r") == [SSEEvent(data="a\nb")]
    assert decoder.feed(b"\n") == []  # the CR above already ended a blank line
    assert decoder.close() == []


def test_lone_cr_then_data_is_not_swallowed() -> None:
    decoder = SSEDecoder()
    assert decoder.feed(b"data: x\r") == []
    assert decoder.feed(b"\r") == [SSEEvent(data="x")]  # CR CR: a line end then a blank line
    assert decoder.feed(b"data: y\r\r") == [SSEEvent(data="y")]


def test_utf8_split_inside_a_character() -> None:
    raw = "data: é€😀\n\n".encode()
    for i in range(len(raw) + 1):
        assert _feed_parts([raw[:i], raw[i:]]) == [SSEEvent(data="é€😀")]


def test_comments_and_empty_data_are_skipped() -> None:
    events = decode_all(
        b": ping\n\nid: 7\n\n: ping after an id\n\ndata:\n\ndata:   \n\ndata: ok\n\n"
    )
    assert [e.data for e in events] == ["ok"]


def test_only_one_space_after_the_colon_is_stripped() -> None:
    events = decode_all(b"data:x\n\ndata:  two\n\ndata\n\ndata: \ndata: z\n\n")
    assert [e.data for e in events] == ["x", " two", "\nz"]


def test_unknown_fields_and_bad_retry_are_ignored() -> None:
    events = decode_all(b"foo: bar\nretry: soon\nid: a\x00b\ndata: 1\n\n")
    assert events == [SSEEvent(data="1")]


def test_close_flushes_an_event_without_trailing_blank_line() -> None:
    decoder = SSEDecoder()
    assert decoder.feed(b'data: {"a": 1}\ndata: [DONE]') == []
    assert decoder.close() == [SSEEvent(data='{"a": 1}\n[DONE]')]
    decoder = SSEDecoder()
    assert decoder.feed(b"data: last\n") == []
    assert decoder.close() == [SSEEvent(data="last")]


def test_leading_bom_is_ignored() -> None:
    assert decode_all(b"\xef\xbb\xbfdata: hi\n\n") == [SSEEvent(data="hi")]


def test_invalid_utf8_is_replaced_not_raised() -> None:
    assert decode_all(b"data: a\xffb\n\n") == [SSEEvent(data="a\ufffdb")]


def test_empty_feeds_are_harmless() -> None:
    decoder = SSEDecoder()
    assert decoder.feed(b"") == []
    assert decoder.feed(b"data: q\n") == []
    assert decoder.feed(b"") == []
    assert decoder.feed(b"\n") == [SSEEvent(data="q")]
    assert decoder.close() == []


# ---- cost: linear in the input, one line capped ----


class _CountedSearch:
    """The decoder's search for a feed's last line end, recording the bytes it reads."""

    def __init__(self, search: Callable[[bytes | bytearray], int]) -> None:
        self.search, self.read = search, 0

    def __call__(self, data: bytes | bytearray) -> int:
        self.read += len(data)
        return self.search(data)


def test_a_long_line_in_small_pieces_costs_linear_time(monkeypatch: pytest.MonkeyPatch) -> None:
    search = _CountedSearch(sse._last_line_end)
    monkeypatch.setattr(sse, "_last_line_end", search)
    size, piece = 4 << 20, 4096
    line = b"data: " + b"x" * size + b"\n\n"
    decoder = SSEDecoder(max_line=64 << 20)
    events = []
    for start in range(0, len(line), piece):
        events += decoder.feed(line[start : start + piece])
    assert len(events) == 1 and len(events[0].data) == size
    # every byte searched once; a decoder that rescans the pending line on each feed reads
    # it about len(line) / piece / 2 = 512 times
    assert search.read <= len(line) + 2, search.read


def test_a_line_over_the_cap_is_refused_as_soon_as_it_passes_it() -> None:
    decoder = SSEDecoder(max_line=1000)
    assert decoder.feed(b"data: ok\n\n") == [SSEEvent(data="ok")]
    decoder.feed(b"data: " + b"y" * 900)
    with pytest.raises(LineTooLong, match="longer than 1,000 bytes"):
        decoder.feed(b"y" * 200)
    # a whole over-long line arriving in one piece is refused too
    with pytest.raises(LineTooLong):
        SSEDecoder(max_line=1000).feed(b"data: " + b"z" * 2000 + b"\n\n")
    # the default cap is 16 MiB: a line right under it is fine
    assert MAX_LINE == 16 * 1024 * 1024
    assert len(decode_all(b"data: " + b"a" * (MAX_LINE - 10) + b"\n\n")[0].data) == MAX_LINE - 10


def test_a_20_mb_line_is_refused_at_the_cap_with_bounded_memory() -> None:
    decoder = SSEDecoder()
    piece = b"x" * 4096
    fed = 0
    tracemalloc.start()
    try:
        with pytest.raises(LineTooLong):
            decoder.feed(b"data: ")
            for _ in range((20 << 20) // len(piece)):
                fed += len(piece)
                decoder.feed(piece)
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    assert fed <= MAX_LINE + len(piece)  # refused by the feed that passed the cap, not later
    assert peak < MAX_LINE * 2.5  # the pending line and its growth, never the whole 20 MB twice


# ---- a feed's whole lines are decoded and split at once ----


def test_a_feed_longer_than_the_cap_made_of_short_lines_is_fine() -> None:
    burst = b"data: 0123456789\n\n" * 20  # 360 bytes, one read of a fast stream
    assert decode_all(burst) == [SSEEvent(data="0123456789")] * 20
    decoder = SSEDecoder(max_line=100)
    assert len(decoder.feed(burst)) == 20
    # a long line among short ones is still refused
    with pytest.raises(LineTooLong):
        SSEDecoder(max_line=100).feed(burst + b"data: " + b"x" * 200 + b"\n\n" + burst)


def test_only_cr_and_lf_end_lines_not_other_unicode_line_breaks() -> None:
    # str.splitlines() would also split at these: U+2028, U+2029, NEL, VT, FF, FS/GS/RS
    text = "a\u2028b\u2029c\x85d\x0be\x0cf\x1cg\x1dh\x1ei"
    for stream in (f"data: {text}\n\n", f"data: {text}\r\n\r\n", f"data: {text}\r\r"):
        assert decode_all(stream.encode()) == [SSEEvent(data=text)]


def test_several_events_and_a_partial_line_in_each_feed() -> None:
    stream = b"".join(_data(_chunk({"content": f"w{i} "})) for i in range(40))
    for piece in (7, 50, 97, 200, 333):
        events = _feed_parts([stream[i : i + piece] for i in range(0, len(stream), piece)])
        assert [json.loads(e.data)["choices"][0]["delta"]["content"] for e in events] == [
            f"w{i} " for i in range(40)
        ]
