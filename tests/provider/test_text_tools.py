"""Tool calls a local model writes as text (provider/text_tools.py).

The parser and the stream on their own, then `countbot ask -p local` as a user runs it, with the
embedded provider built from the config as usual and only the model's generation scripted (no
GGUF that writes tool calls ships with countbot): the three shapes run as tool calls, an unknown
tool and broken JSON are answered with error results, a repeated call is stopped, and an answer
that merely contains JSON is shown as it is.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from dataclasses import replace
from pathlib import Path
from typing import Any

import pytest
from cbenv import CB, make_cb
from local_extra import needs_local

from countbot_cli.messages import ChatRequest, Finished, StreamEvent, TextDelta, ToolCallDelta
from countbot_cli.provider.local import LocalProvider
from countbot_cli.provider.text_tools import (
    calls_in_text,
    finished_with_text_calls,
    offered_names,
    parse_text_calls,
)


def tool(name: str) -> dict[str, Any]:
    return {"type": "function", "function": {"name": name, "parameters": {"type": "object"}}}


TOOLS = [tool("read_file"), tool("list_dir")]
NAMES = offered_names(TOOLS)
READ = {"name": "read_file", "arguments": {"path": "a.txt"}}


# ---- the three shapes ----

SHAPES = {
    "hermes tag": f"<tool_call>\n{json.dumps(READ)}\n</tool_call>",
    "fenced json": f"```json\n{json.dumps(READ, indent=2)}\n```",
    "bare object": json.dumps(READ),
    "bare, parameters": '{"name": "read_file", "parameters": {"path": "a.txt"}}',
    "openai shape": json.dumps({"type": "function", "function": READ}),
    "arguments as a string": json.dumps({"name": "read_file", "arguments": '{"path": "a.txt"}'}),
    "tag without its end": f"<tool_call>{json.dumps(READ)}",
}


@pytest.mark.parametrize("text", SHAPES.values(), ids=SHAPES.keys())
def test_each_shape_is_a_call(text: str) -> None:
    parsed = parse_text_calls(text, NAMES)
    assert parsed is not None
    outside, calls = parsed
    assert outside == ""
    assert [(c.name, json.loads(c.arguments)) for c in calls] == [("read_file", {"path": "a.txt"})]
    assert calls[0].id.startswith("call_")


def test_tags_keep_the_text_around_them_and_may_hold_several_calls() -> None:
    text = (
        "Let me look.\n"
        '<tool_call>{"name": "list_dir", "arguments": {}}</tool_call>\n'
        f"<tool_call>{json.dumps(READ)}</tool_call>"
    )
    outside, calls = parse_text_calls(text, NAMES) or ("", [])
    assert outside == "Let me look."
    assert [c.name for c in calls] == ["list_dir", "read_file"]
    assert len({c.id for c in calls}) == 2
    two = json.dumps([READ, {"name": "list_dir"}])
    assert [c.name for c in (parse_text_calls(two, NAMES) or ("", []))[1]] == [
        "read_file",
        "list_dir",
    ]


def test_a_tag_is_a_call_whatever_its_name_and_however_broken() -> None:
    unknown = parse_text_calls(
        '<tool_call>{"name": "get_weather", "arguments": {}}</tool_call>', NAMES
    )
    assert unknown is not None and unknown[1][0].name == "get_weather"  # the registry says no
    broken_body = '{"name": "read_file", "arguments": {"path": "a.txt"}'
    broken = parse_text_calls(f"<tool_call>{broken_body}</tool_call>", NAMES)
    assert broken is not None
    assert (broken[1][0].name, broken[1][0].arguments) == ("read_file", broken_body)
    bare = parse_text_calls(broken_body, NAMES)  # broken, but it starts as a call does
    assert bare is not None and bare[1][0].arguments == broken_body


NOT_CALLS = {
    "prose": "Paris is the capital of France.",
    "json data": '{"name": "Ada", "age": 36}',
    "a call shape, a name not offered": '{"name": "get_weather", "arguments": {"city": "Paris"}}',
    "extra keys": '{"name": "read_file", "arguments": {"path": "a"}, "reason": "x"}',
    "arguments not an object": '{"name": "read_file", "arguments": ["a.txt"]}',
    "json inside an answer": f"Here is the call you asked about: {json.dumps(READ)}",
    "fenced inside an answer": f"Example:\n```json\n{json.dumps(READ)}\n```\nThat is all.",
    "another language's fence": f"```python\nprint({json.dumps(READ)!r})\n```",
    "the tag in prose": "Hermes models wrap calls in a `<tool_call>` tag, then JSON.",
    "broken json data": '{"name": "Ada", "age": ',
    "a list of data": '[{"name": "read_file"}, {"name": "Ada"}]',
}


@pytest.mark.parametrize("text", NOT_CALLS.values(), ids=NOT_CALLS.keys())
def test_answers_that_merely_contain_json_are_not_calls(text: str) -> None:
    assert parse_text_calls(text, NAMES) is None


def test_nothing_is_a_call_when_no_tools_were_offered() -> None:
    assert parse_text_calls(json.dumps(READ), offered_names(None)) is None
    assert parse_text_calls(f"<tool_call>{json.dumps(READ)}</tool_call>", frozenset()) is None


# ---- the stream ----


def stream(pieces: list[str], pulled: list[int] | None = None) -> Iterator[StreamEvent]:
    for n, piece in enumerate(pieces):
        if pulled is not None:
            pulled.append(n)
        yield TextDelta(piece)
    yield Finished(content="".join(pieces), tool_calls=[], finish_reason="stop")


def run(pieces: list[str], tools: list[dict[str, Any]] | None = TOOLS) -> list[StreamEvent]:
    return list(calls_in_text(stream(pieces), tools))


def shown(events: list[StreamEvent]) -> str:
    return "".join(e.text for e in events if isinstance(e, TextDelta))


def test_plain_text_streams_as_it_comes() -> None:
    pulled: list[int] = []
    events = calls_in_text(stream(["Paris ", "is the ", "capital."], pulled), TOOLS)
    first = next(events)
    assert first == TextDelta("Paris ") and pulled == [0]  # shown before the next piece
    rest = list(events)
    assert shown([first, *rest]) == "Paris is the capital."
    assert isinstance(rest[-1], Finished) and rest[-1].tool_calls == []


def test_a_tag_is_held_back_and_the_text_before_it_shown() -> None:
    pieces = ["Let me look.", "\n<tool", '_call>{"name": "read_file", ', '"arguments": {"path": ']
    pieces += ['"a.txt"}}</tool_call>']
    events = run(pieces)
    assert shown(events) == "Let me look.\n"
    fin = events[-1]
    assert isinstance(fin, Finished) and fin.finish_reason == "tool_calls"
    assert fin.content == "Let me look."
    assert [(c.name, json.loads(c.arguments)) for c in fin.tool_calls] == [
        ("read_file", {"path": "a.txt"})
    ]


def test_a_whole_answer_call_shows_nothing() -> None:
    text = f"```json\n{json.dumps(READ)}\n```"
    events = run([text[:2], text[2:9], text[9:20], text[20:]])
    assert shown(events) == ""
    fin = events[-1]
    assert isinstance(fin, Finished) and fin.content == "" and fin.tool_calls[0].name == "read_file"


def test_held_text_that_is_no_call_is_shown_at_the_end() -> None:
    for pieces in (
        ['{"name": "Ada", ', '"age": 36}'],  # JSON data
        ["A <tool", "box> is not a tag."],  # a tag's first letters, then not
        ["```", "python\nprint(1)\n```"],  # a fence, then not JSON
    ):
        events = run(pieces)
        assert shown(events) == "".join(pieces)
        fin = events[-1]
        assert isinstance(fin, Finished) and fin.tool_calls == []


def test_without_tools_offered_the_stream_is_untouched() -> None:
    pieces = [json.dumps(READ)]
    assert run(pieces, tools=None) == list(stream(pieces))


def test_real_tool_calls_pass_through_and_closing_closes_the_inner_stream() -> None:
    closed: list[bool] = []

    def inner() -> Iterator[StreamEvent]:
        try:
            yield ToolCallDelta(0, "read_file")
            yield TextDelta("more")
        finally:
            closed.append(True)

    events = calls_in_text(inner(), TOOLS)
    assert next(events) == ToolCallDelta(0, "read_file")
    events.close()
    assert closed == [True]


def test_a_non_streamed_answer_gets_its_calls_too() -> None:
    fin = Finished(
        content=f"<tool_call>{json.dumps(READ)}</tool_call>", tool_calls=[], finish_reason="stop"
    )
    out = finished_with_text_calls(fin, TOOLS)
    assert out.content == "" and out.finish_reason == "tool_calls"
    assert out.tool_calls[0].name == "read_file"
    plain = Finished(content='{"name": "Ada"}', tool_calls=[], finish_reason="stop")
    assert finished_with_text_calls(plain, TOOLS) is plain


# ---- `countbot ask -p local`, the model's text scripted ----


class ScriptedModel:
    """Stands in for the GGUF's generation inside the real LocalProvider: each answer is the
    next scripted text, streamed in small pieces; every request is recorded."""

    def __init__(self, *answers: str) -> None:
        self.answers = list(answers)
        self.requests: list[ChatRequest] = []

    def generate(self, req: ChatRequest) -> Iterator[StreamEvent]:
        self.requests.append(replace(req, messages=list(req.messages)))  # as it was sent
        text = self.answers.pop(0)
        for i in range(0, len(text), 7):
            yield TextDelta(text[i : i + 7])
        yield Finished(content=text, tool_calls=[], finish_reason="stop")

    def tool_results(self, n: int) -> list[str]:
        return [m["content"] for m in self.requests[n].messages if m["role"] == "tool"]


@pytest.fixture
def local_cb(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> tuple[CB, ScriptedModel]:
    model = ScriptedModel()
    monkeypatch.setattr(LocalProvider, "_generate", model.generate)
    monkeypatch.setattr(LocalProvider, "supports_tools", property(lambda self: True))
    cb = make_cb(tmp_path, "http://127.0.0.1:9/v1", tools={"enabled": True})
    (cb.work / "a.txt").write_text("alpha\n", encoding="utf-8")
    return cb, model


@needs_local
def test_local_ask_runs_the_three_shapes_and_answers_bad_calls_with_errors(
    local_cb: tuple[CB, ScriptedModel],
) -> None:
    cb, model = local_cb
    model.answers = [
        f"I will read it.\n<tool_call>\n{json.dumps(READ)}\n</tool_call>",
        '```json\n{"name": "list_dir", "arguments": {"path": "."}}\n```',
        '{"name": "read_file", "arguments": {"path": "a.txt", "start_line": 1}}',
        '<tool_call>{"name": "get_weather", "arguments": {"city": "Lyon"}}</tool_call>'
        '<tool_call>{"name": "read_file", "arguments": {"path": "a.txt"</tool_call>',
        'The file says alpha. As JSON: {"name": "a.txt", "text": "alpha"}',
    ]
    proc = cb.invoke("ask", "-p", "local", "what is in a.txt?")
    assert proc.returncode == 0, proc.stderr
    answer = 'The file says alpha. As JSON: {"name": "a.txt", "text": "alpha"}'
    assert proc.stdout == f"I will read it.\n{answer}\n"  # the text, none of the calls
    assert "<tool_call>" not in proc.stdout + proc.stderr
    assert len(model.requests) == 5
    assert model.tool_results(1) == ["[File: a.txt | Lines: 1]\n1| alpha"]
    assert "a.txt" in model.tool_results(2)[-1]  # list_dir's listing
    assert model.tool_results(3)[-1].endswith("\n1| alpha")  # from line 1, as it asked
    unknown, broken = model.tool_results(4)[-2:]
    assert unknown.startswith("Error: unknown tool 'get_weather'")
    assert broken.startswith("Error: arguments are not valid JSON")
    assert "get_weather" in proc.stderr and "not valid JSON" in proc.stderr  # said on screen
    calls = [m for m in model.requests[1].messages if m.get("tool_calls")]
    assert calls[0]["content"].strip() == "I will read it."  # the text around the call kept
    saved = cb.only_session()
    assert [r["outcome"] for r in saved["tool_conversations"]] == ["ok"] * 3 + ["error"] * 2
    assert [m["content"] for m in saved["messages"]] == ["what is in a.txt?", answer]


@needs_local
@pytest.mark.parametrize("lead", range(7))  # the model's pieces are 7 characters long
def test_local_ask_runs_a_tag_cut_between_pieces_at_any_offset(
    local_cb: tuple[CB, ScriptedModel], lead: int
) -> None:
    cb, model = local_cb
    before = "Let me read" + "!" * lead  # moves every cut through the tag's first letters
    model.answers = [f"{before}\n<tool_call>{json.dumps(READ)}</tool_call>", "It says alpha."]
    proc = cb.invoke("ask", "-p", "local", "what is in a.txt?")
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout == f"{before}\nIt says alpha.\n"  # not a letter of the tag
    assert model.tool_results(1) == ["[File: a.txt | Lines: 1]\n1| alpha"]


@needs_local
def test_local_ask_stops_a_model_repeating_one_call(local_cb: tuple[CB, ScriptedModel]) -> None:
    cb, model = local_cb
    call = '<tool_call>{"name": "read_file", "arguments": {"path": "nowhere.txt"}}</tool_call>'
    model.answers = [call] * 10
    proc = cb.invoke("ask", "-p", "local", "read my notes")
    assert proc.returncode == 8, proc.stderr
    assert "same read_file call 3 times in this turn" in proc.stderr
    assert len(model.requests) == 3 and len(model.answers) == 7  # the other rounds not spent
    assert [r["outcome"] for r in cb.only_session()["tool_conversations"]] == ["error"] * 2


# ---- calls the model only copied ----


def test_a_copied_call_stays_text_beside_the_models_own_call() -> None:
    copied = f"<tool_call>{json.dumps(READ)}</tool_call>"
    own = '<tool_call>{"name": "list_dir", "arguments": {"path": "."}}</tool_call>'
    messages = [
        {"role": "system", "content": "Be brief."},
        {"role": "user", "content": f"what is {copied}?"},
        {"role": "assistant", "content": own},  # what the model said before is not a source
    ]
    events = list(calls_in_text(stream([f"It is {copied}", " and now ", own]), TOOLS, messages))
    fin = events[-1]
    assert isinstance(fin, Finished)
    assert [c.name for c in fin.tool_calls] == ["list_dir"]
    assert copied in shown(events) and copied in fin.content


def test_a_whole_answer_copied_from_a_tool_result_or_an_image_message_is_text() -> None:
    spaced = json.dumps(READ, indent=2)
    from_tool = [{"role": "tool", "tool_call_id": "c1", "content": f"file:\n{spaced}"}]
    parts = [{"role": "user", "content": [{"type": "text", "text": spaced}, {"type": "x"}]}]
    for messages in (from_tool, parts):
        fin = Finished(content=json.dumps(READ), tool_calls=[], finish_reason="stop")
        assert finished_with_text_calls(fin, TOOLS, messages) is fin
    fin = Finished(content=json.dumps(READ), tool_calls=[], finish_reason="stop")
    assert finished_with_text_calls(fin, TOOLS, [{"role": "user", "content": "hi"}]).tool_calls
