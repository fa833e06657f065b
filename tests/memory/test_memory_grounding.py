"""The parts of memory written right, one by one: what a line may name (grounding), the durable
statements kept as said, and relative dates resolved against the day they were said."""

from __future__ import annotations

import subprocess
import sys
from datetime import date

import pytest

from countbot_cli.memory.dates import annotate, resolved_dates
from countbot_cli.memory.grounding import Grounds
from countbot_cli.memory.statements import (
    is_user_statement,
    recap,
    statements,
)
from countbot_cli.memory.summary_prompts import overflow_summary_prompt
from countbot_cli.messages import Message

FRIDAY = date(2026, 12, 4)
SAID = [
    "USER: My name is Ada and I live in Lyon. My project is called ferrox, written in Rust.",
    "USER: We paid $92,000 for the flat; I do 8 to 10 reps, and I like hands on work.",
    "USER: I sold my cello yesterday. My API key var is OPENAI_KEY, in src/main.rs.",
    "ASSISTANT: I recommend PostgreSQL 16; gpt-4o handles it. 我住在上海，有三个孩子。",
]


@pytest.fixture(scope="module")
def grounds() -> Grounds:
    return Grounds(SAID, [FRIDAY], overflow_summary_prompt("", "en"))


@pytest.mark.parametrize(
    "line",
    [
        "User's name is Ada; lives in Lyon",  # case, a possessive
        "Ada's project ferrox is written in Rust",
        "Paid $92,000 for the flat",  # 2,000 as written
        "does 8-10 reps; likes hands-on work",  # a range, a compound word
        "Sold the cello on 2026-12-03",  # "yesterday", resolved
        "Sold the cello on Thursday",  # the weekday of a day said
        "The key is in OPENAI_KEY (src/main.rs)",
        "The assistant recommended PostgreSQL 16 with gpt-4o",
        "Ada's cellos",  # an inflection
        "Sold the cello on 3 December",  # a day said, in words
        "用户住在上海，有三个孩子",
    ],
)
def test_a_line_naming_only_what_was_said_passes(grounds: Grounds, line: str) -> None:
    assert grounds.missing(line) == []


@pytest.mark.parametrize(
    ("line", "named"),
    [
        ('Your project is called "Ferrum"', "Ferrum"),
        ("User is called Bob", "Bob"),
        ("Paid $93,000 for the flat", "93,000"),
        ("does 8-12 reps", "8-12"),
        ("Sold the cello on 2026-12-01", "2026-12-01"),
        ("Keeps the key in src/lib.rs", "src/lib.rs"),
        ("Uses gpt-5o", "gpt-5o"),
        ("The assistant recommended PostgreSQL 17", "17"),
        ("用户住在北京", "北京"),
        ("用户有五个孩子", "五"),
        ("project is named 'ferrum'", "ferrum"),  # a quoted word must have been said
    ],
)
def test_a_line_naming_what_was_never_said_is_caught(
    grounds: Grounds, line: str, named: str
) -> None:
    assert named in grounds.missing(line)


@pytest.mark.parametrize(
    "sentence",
    [
        "My name is Ada and I live in Lyon.",
        "I'm allergic to peanuts.",
        "We decided to ship on Fridays.",
        "Let's use Postgres for this.",
        "Remember that the gate code is 4512.",
        "我住在上海，有三个孩子。",
        "记住我的车牌号是沪A12345",
    ],
)
def test_a_durable_statement_of_the_user_is_kept(sentence: str) -> None:
    assert is_user_statement(sentence)


@pytest.mark.parametrize(
    "sentence",
    [
        "Can you help me plan a trip?",
        "What is 12 times 7?",
        "I think so.",
        "Thanks!",
        "Please write a haiku about rain.",
        "帮我写一首诗。",
        "我觉得可以。",
        "这个怎么用？",
    ],
)
def test_a_question_request_or_passing_remark_is_not(sentence: str) -> None:
    assert not is_user_statement(sentence)


@pytest.mark.parametrize(
    ("sentence", "kept"),
    [
        ("Since I moved to Denver, which climbing gym should I join?", True),
        ("我在成都做律师，周末有什么好去处吗？", True),
        ("Can you suggest novels like 'Piranesi', which I just finished?", True),
        ("My doctor is Dr. Alvarez at St. Mary's.", True),  # one sentence, not three
        ("Can I take my phone on the plane?", False),
        ("Why does my script throw a KeyError?", False),
        ("What should I cook for dinner, since I'm hungry?", False),  # names nothing
        ("Sorry, I meant the other one.", False),
    ],
)
def test_a_fact_told_inside_a_question_is_kept_a_bare_question_not(
    sentence: str, kept: bool
) -> None:
    found = statements([Message(role="user", content=sentence)], "en")
    assert [s.text for s in found] == ([f'the user said: "{sentence}"'] if kept else [])


@pytest.mark.parametrize(
    ("answer", "kept"),
    [
        ("I'd recommend the ThinkPad X1 Carbon for travel.", True),
        ("The trip comes to about 2,400 euros in total.", True),
        ("Your share would be $1,230 a month.", True),  # a figure for them
        ("Sure, happy to help with that.", False),
        ("You should rest more.", False),  # names nothing
    ],
)
def test_the_assistants_recommendation_or_figure_is_kept_its_chatter_not(
    answer: str, kept: bool
) -> None:
    assert said(answer) == ([f'the assistant said: "{answer}"'] if kept else [])


def said(answer: str) -> list[str]:
    return [s.text for s in statements([Message(role="assistant", content=answer)], "en")]


def test_a_long_answer_leaves_the_sentence_that_carries_its_pick() -> None:
    answer = (
        "Great question! For your budget of about $800 and mostly photos, here are the phones "
        "I compared:\n\n| Phone | Camera | Price |\n|---|---|---|\n| Pixel 8a | 64 MP | $499 |\n"
        "| Galaxy S23 | 50 MP | $699 |\n\n```text\nscores: 8.9 / 8.7\n```\n\n"
        "**Go with the Pixel 8a**: the best camera for the price, and it leaves $300 for a case "
        "and a charger.\n\nLet me know if you want me to compare more models!"
    )
    assert said(answer) == [
        'the assistant said: "Go with the Pixel 8a: the best camera for the price, and it '
        'leaves $300 for a case and a charger."'
    ]


def test_a_list_of_named_picks_is_kept_as_its_lead_in_and_the_heads_of_its_items() -> None:
    answer = (
        "Here are a few cafés near the Rijksmuseum that open early:\n\n"
        "1. **Back to Black** – small roastery, opens at 8.\n"
        "2. **Lot Sixty One** – great flat whites.\n"
        "3. **Coffee & Coconuts** – big, airy, good for working.\n\nEnjoy!"
    )
    assert said(answer) == [
        'the assistant said: "Here are a few cafés near the Rijksmuseum that open early: Back to '
        "Black; "
        'Lot Sixty One; Coffee & Coconuts."'
    ]
    plan = "好的，就按这个计划：\n\n- 周二、周四游泳45分钟\n- 周六骑车30公里\n\n加油！"
    assert statements([Message(role="assistant", content=plan)], "zh")[0].text == (
        "助手说：“好的，就按这个计划：周二、周四游泳45分钟；周六骑车30公里。”"
    )


@pytest.mark.parametrize(
    "answer",
    [
        # general knowledge, however many figures it holds
        "Mount Everest is 8,849 metres high and was first climbed in 1953 by Hillary and Tenzing.",
        "光速约为每秒30万公里，太阳光到达地球大约需要8分钟。",
        # a list of names that sets out general knowledge, not picks offered to the user
        "The Beatles' best-known albums include:\n\n1. **Rubber Soul** (1965)\n"
        "2. **Revolver** (1966)\n3. **Abbey Road** (1969)",
        # a list of generic advice
        "Some ways to save energy at home:\n\n- **Lower the thermostat** by 1 °C.\n"
        "- **Wash clothes at 30 °C.**\n- **Unplug chargers** when not in use.",
        # a question back, a refusal, an offer, thanks
        "What is your budget, roughly? And do you need 5G?",
        "I can't give legal advice, but a lawyer in Berlin could help you with the 2024 rules.",
        "If you'd like, I can also write the same script in JavaScript.",
        "You're welcome! Good luck with the move.",
        "Sure! Here's a limerick about a cat:\n\nThere once was a cat from Peru\n"
        "who dreamed he was eating a shoe",
    ],
)
def test_an_answer_of_general_facts_chatter_or_refusal_leaves_nothing(answer: str) -> None:
    assert said(answer) == []


def test_a_huge_answer_is_read_once_not_once_a_letter() -> None:
    """A 200,000-letter word, an unclosed quote or code span: read in one pass (the timeout is a
    hang bound; a pattern that rescans a run of letters from each letter takes hours here)."""
    code = (
        "from countbot_cli.memory.statements import statements\n"
        "from countbot_cli.messages import Message\n"
        "for text in ('a' * 200_000, '`' + 'a' * 200_000, '`a ' * 70_000, '“' * 200_000):\n"
        "    for role, end in (('user', '?'), ('assistant', '')):\n"
        "        assert statements([Message(role=role, content=text + end)], 'en') == []\n"
    )
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    assert proc.returncode == 0, proc.stderr


def test_relative_dates_are_resolved_against_the_day_they_were_said() -> None:
    said = "I sold my cello yesterday; my sister comes next Friday, 上周五我去了上海。"
    assert annotate(said, FRIDAY) == (
        "I sold my cello yesterday (2026-12-03); my sister comes next Friday (2026-12-11), "
        "上周五（2026-11-27）我去了上海。"
    )
    assert annotate(annotate(said, FRIDAY), FRIDAY) == annotate(said, FRIDAY)  # once only
    assert annotate("in 3 days, 两个月后, last week", FRIDAY) == (
        "in 3 days (2026-12-07), 两个月后（2027-02）, last week (week of 2026-11-23)"
    )
    assert annotate("之后天气很好", FRIDAY) == "之后天气很好"  # 后天 inside another word
    assert resolved_dates("去年 and the day before yesterday", FRIDAY) == {"2025", "2026-12-02"}


def test_the_recap_is_made_of_what_the_user_said_never_punctuation() -> None:
    msgs = [
        Message(role="user", content="Can you help me plan a garden?"),
        Message(role="assistant", content="…"),
        Message(role="user", content="I live in Lyon. I grow tomatoes."),
        Message(role="user", content="Which soil is best?"),
    ]
    assert recap(msgs, "en", 400) == (
        "The user's goal: Can you help me plan a garden? The user said: I live in Lyon. "
        "I grow tomatoes. Latest open question: Which soil is best?"
    )
    assert recap([Message(role="user", content="…")], "en", 400) is None
