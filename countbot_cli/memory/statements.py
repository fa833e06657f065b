"""The durable statements in messages, kept close to verbatim when the model's summary is not.

When the summary call fails, its line is kept back, or the summariser is a smoke-test model,
memory is made of what was said instead of what a model made of it:

- **The user's statements**: sentences in the first person that state something lasting (a
  fact, a preference, a name, a decision: "My name is Ada and I live in Lyon.", "Let's use
  Postgres 16.", "我住在上海。", "记住我的车牌号是沪A12345。"), and explicit requests to remember.
  Questions, requests to the assistant ("can you…", "帮我…"), thanks and passing remarks ("I
  think so", "我觉得可以") are not statements.
- **The assistant's**: a recommendation, a plan agreed or a figure it gave, when the sentence
  names something (a number or a name): "I recommend Postgres 16 for this.".
- One line a message: `the user said: "…"` / `the assistant said: "…"` (用户说：“…” in a
  Chinese persona), its sentences as written, relative dates resolved (memory/dates.py).
- `recap`: the rolling summary without a model: the user's goal (their first request), what
  they said (newest kept) and the latest open question.
"""

from __future__ import annotations

from collections.abc import Sequence
from datetime import date
from typing import NamedTuple

from countbot_cli.memory.dates import annotate, said_on
from countbot_cli.messages import Message
from countbot_cli.prompts import is_chinese
from countbot_cli.textsafe import LazyPattern
from countbot_cli.words import STOP

SENTENCE_CHARS = 300  # a longer sentence is cut here (with …)
LINE_CHARS = 560  # a line's quoted words stop here (the quality filter allows 600)
ASSISTANT_SENTENCES = 2  # of one answer

_SPLIT = LazyPattern(r"(?<=[.!?])\s+(?=\S)|(?<=[。！？；;])|\n+")
_FIRST_PERSON = LazyPattern(
    r"\b(?:i|i'm|i’m|im|i've|i’ve|i'd|i’d|i'll|i’ll|my|mine|me|we|we're|we’re|we've|we'll|our|"
    r"us|let's|let’s)\b|我|咱|俺"
)
_REMEMBER = LazyPattern(
    r"^(?:please )?(?:remember|note|keep in mind|don't forget)\b|^(?:请)?记住|记一下"
)
_DECIDED = LazyPattern(
    r"\b(?:decided|agreed|we'll use|we will use|going with|switch(?:ed)? to|let's (?:use|go with|"
    r"pick|choose|stick with|switch))\b|决定|定了|就用|改用|选了|选用"
)
_QUESTION = LazyPattern(
    r"[?？]\s*$|[吗呢么]\s*[。.!！]?\s*$"
    r"|^(?:what|who|whom|whose|where|when|why|how|which|is|are|am|was|were|do|does|did|can|"
    r"could|would|will|should|shall|may|might|have|has|had)\b"
    r"|什么|怎么|为什么|哪里|哪个|哪些|多少|是否|能否|可不可以|能不能|要不要"
)
_REQUEST = LazyPattern(
    r"^(?:please|pls|can|could|would|help|tell|write|give|show|explain|make|list|find|"
    r"translate|summari[sz]e|fix|create|generate|check|compare|draft|suggest|recommend|"
    r"describe|calculate|plan|let me know|i (?:want|need|'d like|would like) (?:you|help|to know|"
    r"to ask|to see|a summary))\b"
    r"|^(?:请(?!记住)|帮我|帮忙|给我|告诉我|麻烦|能不能|可以帮|写一|解释|翻译|总结|推荐|我想问|我要问|我想知道)"
)
_PASSING = LazyPattern(
    r"^(?:i think|i guess|i see|i wonder|i don't know|i do not know|i'm not sure|i am not sure|"
    r"i mean|i understand|i agree|i hope|i was wondering|i got it|i'm sorry|i am sorry|i'm back|"
    r"i have a question|my question|me too|thank|thanks|ok|okay|sure|great|cool|nice|lol)\b"
    r"|^(?:我觉得|我认为|我看|我明白|我懂|我知道了|我不知道|我不确定|我有个问题|我有一个问题|谢谢|好的|嗯|哦)"
)
_ADVICE = LazyPattern(
    r"\b(?:i(?: would|'d|’d)? (?:recommend|suggest)|my (?:recommendation|suggestion)|you should|"
    r"i'd go with|the best (?:option|choice)|the plan is|we agreed|next steps?|comes to|"
    r"works out to|in total|total of|costs? about|roughly|approximately|estimated?)\b"
    r"|建议|推荐|最好|计划是|方案是|总共|合计|大约|约为|预计"
)
_NAMES_SOMETHING = LazyPattern(r"\d|(?<=\w\s)[A-Z][\w-]+|[A-Za-z]+[-_.][A-Za-z0-9]+")
_GOAL = LazyPattern(
    r"\b(?:i want|i need|i'm trying|i am trying|i'd like|i would like|help me|i'm working on|"
    r"i am working on|my goal|i plan|i'm planning|how (?:do|can) i)\b|我想|我要|我需要|帮我|我打算|我正在|目标"
)
_CJK = LazyPattern(r"[\u3400-\u9fff]")
_WORDS = LazyPattern(r"[^\W\d_]{3,}")


class Statement(NamedTuple):
    """A line made of one message's durable sentences, and where it came from."""

    text: str  # the line as stored (marked as the speaker's words)
    message: Message
    day: date | None  # when it was said (the line's date)


def sentences(text: str) -> list[str]:
    return [s.strip() for s in _SPLIT.re.split(text) if s and s.strip()]


def _content(sentence: str) -> bool:
    """Says something: two CJK characters beyond function ones, or a content word."""
    if _CJK.re.search(sentence):
        return sum(1 for ch in sentence if _CJK.re.match(ch)) >= 4
    return any(w.casefold() not in STOP for w in _WORDS.re.findall(sentence))


def is_user_statement(sentence: str) -> bool:
    """A lasting fact, preference, name or decision the user stated (see the module)."""
    s = sentence.strip().strip("\"'“”‘’*-• ")
    low = s.casefold()
    if len(s) < 6 or _QUESTION.re.search(low) or _PASSING.re.search(low):
        return False
    if _REMEMBER.re.search(low):
        return _content(s)
    if _REQUEST.re.search(low):
        return False
    return bool(_FIRST_PERSON.re.search(low) or _DECIDED.re.search(low)) and _content(s)


def is_assistant_statement(sentence: str) -> bool:
    """A recommendation, plan or figure the assistant gave that names something."""
    s = sentence.strip()
    low = s.casefold()
    if _QUESTION.re.search(low) or not _ADVICE.re.search(low):
        return False
    return bool(_NAMES_SOMETHING.re.search(s))


def _cut(text: str, limit: int) -> str:
    return text if len(text) <= limit else text[: limit - 1].rstrip() + "…"


def _join(parts: Sequence[str]) -> str:
    out = ""
    for p in parts:
        sep = "" if not out or _CJK.re.search(out[-1]) or _CJK.re.match(p[0]) else " "
        out += sep + p
    return out


def _mark(role: str, words: str, language: str) -> str:
    if is_chinese(language):
        return f"{'用户' if role == 'user' else '助手'}说：“{words}”"
    return f'the {role} said: "{words}"'


def statements(messages: Sequence[Message], language: str) -> list[Statement]:
    """One line per message holding durable statements, oldest first (see the module)."""
    out: list[Statement] = []
    for m in messages:
        if m.role not in ("user", "assistant") or m.status is not None or not m.content:
            continue
        keep = is_user_statement if m.role == "user" else is_assistant_statement
        found = [_cut(s, SENTENCE_CHARS) for s in sentences(m.content) if keep(s)]
        if m.role == "assistant":
            found = found[:ASSISTANT_SENTENCES]
        if not found:
            continue
        day = said_on(m.created_at)
        words = _cut(_join(found), LINE_CHARS)
        if day is not None:
            words = annotate(words, day)
        out.append(Statement(_mark(m.role, words, language), m, day))
    return out


def recap(messages: Sequence[Message], language: str, limit: int) -> str | None:
    """A rolling summary made of what was said (`messages`: the session so far, oldest first):
    the user's goal, their statements (newest kept within `limit`), the latest open question.
    None when the user said nothing usable."""
    users = [m for m in messages if m.role == "user" and m.status is None and m.content.strip()]
    if not users:
        return None
    zh = is_chinese(language)
    said = [s for m in users for s in sentences(m.content)]
    asked = (
        s for s in said if _REQUEST.re.search(s.casefold()) or _QUESTION.re.search(s.casefold())
    )
    goal = next((s for s in said if _GOAL.re.search(s.casefold())), next(asked, ""))
    facts = [s for s in said if s != goal and is_user_statement(s)]
    question = next((s for s in reversed(said) if _QUESTION.re.search(s.casefold())), None)
    labels = ("用户的目标：", "用户说过：", "最近的问题：") if zh else _LABELS
    head = _ended(labels[0] + _cut(goal, 200), zh) if goal else ""
    tail = ""
    if question is not None and question != goal:
        tail = _ended(labels[2] + _cut(question, 200), zh)
    room = limit - len(head) - len(tail) - len(labels[1]) - 4
    kept: list[str] = []
    for fact in reversed(facts):
        fact = _ended(_cut(fact, 200), zh)
        if sum(len(k) + 1 for k in kept) + len(fact) > room:
            break
        kept.insert(0, fact)
    body = labels[1] + _join(kept) if kept else ""
    text = ("" if zh else " ").join(p for p in (head, body, tail) if p)
    return _cut(" ".join(text.split()), limit) if _content(text) else None


_LABELS = ("The user's goal: ", "The user said: ", "Latest open question: ")


def _ended(text: str, zh: bool) -> str:
    """`text` ending as a sentence does."""
    if text.endswith((".", "!", "?", "。", "！", "？", "…", '"', "”")):
        return text
    return text + ("。" if zh else ".")
