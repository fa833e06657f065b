"""The durable statements in messages, kept close to verbatim when the model's summary is not.

When the summary call fails, its line is kept back, or the summariser is a smoke-test model,
memory is made of what was said: one line a message, `the user said: "…"` / `the assistant
said: "…"` (用户说：“…” in a Chinese persona), its sentences as written, relative dates resolved.

- **The user's**: what they state of their own (a fact, a preference, a name, a decision), also
  inside a question ("Since I moved to Denver, which gym…?") or past an interjection; a request
  to remember. Bare questions, requests, thanks and passing remarks are not statements.
- **The assistant's**: only what names something (a number, a date, a name), the best kind
  first: advice, a plan agreed, a result worked out; else a list of named things offered to the
  user; else words on the user's own case ("your share would be $1,230"). General knowledge,
  questions back, offers of more help and refusals leave nothing; a list is read as its lead-in
  and its items' heads; at most two sentences, so a long answer leaves a short line.
- `recap`: the rolling summary without a model: the user's goal (their first request), what
  they said (newest kept) and the latest open question.
"""

from __future__ import annotations

import re
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
ASSISTANT_CHARS = 320  # an answer's line stops here
ITEM_CHARS = 80  # a list item's head

# A sentence ends at . ! ? (not after an initial or a common abbreviation), at 。！？；; and a line.
_SPLIT = LazyPattern(
    r"(?<=[.!?])(?<!\b[A-Z]\.)(?<!\b(?:Dr|Mr|Ms|St|vs)\.)(?<!\bMrs\.)(?<!\be\.g\.)(?<!\bi\.e\.)"
    r"\s+(?=\S)|(?<=[。！？；;])|\n+"
)
_CLAUSE = LazyPattern(r"\s+[—–-]+\s+|[,，:：、]\s*|——")
_LEADING = LazyPattern(
    r"^(?:which|who|that|since|because|as|when|while|after|before|now that|and|but|so|"
    r"though|although)\s+|^(?:因为|所以|但是|不过|而且)"
)
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
_INTERJECTION = LazyPattern(  # leads a sentence without making it a passing remark
    r"^(?:(?:ok|okay|great|cool|nice|sure|yes|yeah|yep|no|nope|well|so|oh|ah|alright|right|"
    r"perfect|awesome|haha|lol|hmm|thanks|thank you)\b[\s,!.]*)+"
    r"|^(?:(?:好的|好吧|好|嗯|哦|啊|对|是的|行|谢谢)[，,！!。\s]*)+",
    re.I,
)
_PASSING = LazyPattern(
    r"^(?:i think|i guess|i see|i wonder|i don't know|i do not know|i'm not sure|i am not sure|"
    r"i mean|i meant|i understand|i agree|i hope|i was wondering|i got it|i'm sorry|i am sorry|"
    r"sorry|i'm back|i have a question|my question|me too|thank)\b"
    r"|^(?:我觉得|我认为|我看|我明白|我懂|我知道了|我不知道|我不确定|我有个问题|我有一个问题|谢谢|抱歉|不好意思)"
)
# Said of oneself without "I": "Started a new job at Deloitte.", "Just got back from Hanoi."
_UNSAID_I = LazyPattern(
    r"^(?:just |finally |recently |also )?(?:[a-z]+[^\We]ed|got|went|bought|been|spent|took|sold|left|"
    r"met|found|began)\b"
)
# A possession that names something, told inside a question: "my daughter Lily's party"
_MY_NAMED = LazyPattern(r"\b(?:my|our) (?:[a-z]+(?:'s)? ){0,2}(?:[A-Z][\w-]+|\d)")
# What ties an answer's sentence to the user's case: the assistant's advice, a plan agreed, a
# result it worked out (preferred) — or words addressed to the user, "'d", a day.
_ADVICE = LazyPattern(
    r"\b(?:recommend\w*|suggest\w*|advise|(?:my|our|top) (?:pick|choice)|go with|opt for|"
    r"i(?:'d|’d| would) (?:use|get|go|pick|choose|buy|book|take|try|start)|would be my|"
    r"would (?:be|make) (?:a |an )?(?:great|good|nice|thoughtful|perfect|ideal|solid)|"
    r"(?:best|safest|simplest|cleanest|easiest) (?:bet|option|choice|fit|fix|way|approach)|"
    r"(?:the|our|your) plan|agreed|settled on|comes to|works out|in total|total of)\b"
    r"|建议|推荐|值得|首选|最适合|安排|计划|方案|总共|合计|算下来"
)
_CASE = LazyPattern(
    r"\b(?:you|your|yours|we|our|us|let['’]s|that['’]s|that is)\b|\w['’]d\b"
    r"|\b(?:jan|feb|mar|apr|may|jun|jul|aug|sep|sept|oct|nov|dec)[a-z]*\.? \d{1,2}\b"
    r"|你|您|我们|咱们|\d{1,2}月\d{1,2}[日号]"
)
_NAME = r"(?:(?<=[\w,;:(]\s)|(?<=\s\*\*)|(?<=[(\x22\x27“‘]))[A-Z][\w-]+"  # capitalised, not first
# (each part starts where a word or a quote does, so a long run of letters is read once)
_PICK = (  # a name or an identifier: what a list of picks is made of
    _NAME + r"|(?<![A-Za-z])[A-Za-z]+(?:[_.][A-Za-z0-9]|-\d)|\b\w*[a-z][A-Z]"
    r"|`(?=[^`\n]{0,100}`)[^`\n]*?[A-Za-z_]{3}|\*\*[\u3400-\u9fff]+\*\*|[「“《][^」”》\n]{1,60}[」”》]"
)
_NAMED = LazyPattern(_PICK)
_NAMES_SOMETHING = LazyPattern(  # a number, a name, a Latin word among Chinese ones
    r"\d|"
    + _PICK
    + r"|(?<=[\u3400-\u9fff])\s*[A-Za-z]{2}|(?<![A-Za-z])[A-Za-z]{2,}\s*(?=[\u3400-\u9fff])"
)
# A list offered to the user (not one that sets out general knowledge): its lead-in speaks to
# them or of the assistant, or there is no lead-in.
_OFFERED = LazyPattern(
    r"^$|\b(?:you|your|we|our|i|i'd|i’d|i've|i’ve|here(?:'s|’s| are| is)|these are)\b"
    r"|你|您|我"
)
_FIGURE = LazyPattern(r"\d|[\u3400-\u9fff]|" + _NAME)  # what the user's case is told with
_OFFER = LazyPattern(  # of more help
    r"^(?:if you(?:'d| would)? (?:want|like|prefer|have any)|i can also|i(?:'d| would) be happy)\b"
    r"|\b(?:let me know|feel free|don't hesitate|hope this helps|happy to help)\b"
    r"|^(?:如果你|如果需要|需要的话|希望)|随时"
)
_DECLINES = LazyPattern(
    r"\bi (?:can't|can’t|cannot|am unable|'m unable|’m unable|don't have|do not have|"
    r"am not able|'m not able|’m not able)\b|我无法|我不能|无法提供|没有办法"
)
_GOAL = LazyPattern(
    r"\b(?:i want|i need|i'm trying|i am trying|i'd like|i would like|help me|i'm working on|"
    r"i am working on|my goal|i plan|i'm planning|how (?:do|can) i)\b|我想|我要|我需要|帮我|我打算|我正在|目标"
)
_CJK = LazyPattern(r"[\u3400-\u9fff]")
_WORDS = LazyPattern(r"[^\W\d_]{3,}")
_CODE = LazyPattern(r"```.*?(?:```|$)", re.S)
_TABLE = LazyPattern(r"^\s*\||^\s*[-=*_]{3,}\s*$")
_ITEM = LazyPattern(r"^\s*(?:[-*+•]\s+|\d+[.)、]\s*|\*\*|__)")
_MARKER = LazyPattern(r"^\s*(?:[-*+•]\s+|\d+[.)、]\s*)")
_GLOSS = LazyPattern(r"\s+[—–-]\s+|——|—(?=\s)")
_EMPHASIS = LazyPattern(r"\*\*|__|^#+\s*")


class Statement(NamedTuple):
    """A line made of one message's durable sentences, and where it came from."""

    text: str  # the line as stored (marked as the speaker's words)
    message: Message
    day: date | None  # when it was said (the line's date)


def sentences(text: str) -> list[str]:
    return [s.strip().rstrip(";；") for s in _SPLIT.re.split(text) if s and s.strip(" ;；\n")]


def _content(sentence: str) -> bool:
    """Says something: two CJK characters beyond function ones, or a content word."""
    if _CJK.re.search(sentence):
        return sum(1 for ch in sentence if _CJK.re.match(ch)) >= 4
    return any(w.casefold() not in STOP for w in _WORDS.re.findall(sentence))


def _states(clause: str) -> bool:
    """A first-person clause that says something: not a question, a request or a passing remark."""
    low = clause.casefold()
    if len(clause) < 6 or _QUESTION.re.search(low) or _PASSING.re.search(low):
        return False
    if _REQUEST.re.search(low):
        return False
    if _UNSAID_I.re.match(low) and _NAMES_SOMETHING.re.search(clause):
        return True
    return bool(_FIRST_PERSON.re.search(low) or _DECIDED.re.search(low)) and _content(clause)


def _tells(sentence: str) -> bool:
    """A question or request with a clause of its own that states a fact about the user
    ("Since I moved to Denver last month, what…?") and a sentence that names something (a
    Chinese clause of four content characters is as specific as it gets)."""
    if not (_CJK.re.search(sentence) or _NAMES_SOMETHING.re.search(sentence)):
        return False
    if _MY_NAMED.re.search(sentence):
        return True
    clauses = _CLAUSE.re.split(sentence.rstrip("?？ "))
    return any(_states(_LEADING.re.sub("", c.strip().casefold())) for c in clauses)


def is_user_statement(sentence: str) -> bool:
    """A lasting fact, preference, name or decision the user stated (see the module)."""
    s = sentence.strip().strip("\"'“”‘’*-• ")
    s = _INTERJECTION.re.sub("", s)
    low = s.casefold()
    if len(s) < 6 or _PASSING.re.search(low):
        return False
    if _REMEMBER.re.search(low):
        return _content(s)
    if _QUESTION.re.search(low) or _REQUEST.re.search(low):
        return _tells(s)
    return _states(s)


class _Unit(NamedTuple):
    """A sentence of an answer; a list's lead-in carries the heads of its items."""

    text: str
    heads: tuple[str, ...] = ()


def _plain(text: str) -> str:
    return " ".join(_EMPHASIS.re.sub("", text).split())


def _head(item: str) -> str:
    """A list item up to its gloss ("**Café Pinson** – relaxed…" → "**Café Pinson**")."""
    return _GLOSS.re.split(_MARKER.re.sub("", item), maxsplit=1)[0].strip()


def _units(text: str) -> list[_Unit]:
    """An answer read as its sentences, code and tables left out; a list (two or more item
    lines) joined to the line before it (its lead-in, if any)."""
    lines = [ln.strip() for ln in _CODE.re.sub("\n|\n", text).splitlines()]  # code: a table
    out: list[_Unit] = []
    i = 0
    while i < len(lines):
        lead, j = ("", i) if _MARKER.re.match(lines[i]) else (lines[i], i + 1)
        while lead and j < len(lines) and not lines[j]:
            j += 1
        item = _ITEM if lead.endswith((":", "：")) else _MARKER
        k = j
        while k < len(lines) and item.re.match(lines[k]):
            k += 1
        heads = tuple(_head(ln) for ln in lines[j:k])
        if len(heads) < 2:  # not a list: the line alone
            lead, heads, k = lines[i], (), i + 1
        said = [_Unit(s) for s in sentences("" if _TABLE.re.match(lead) else lead)]
        if heads:
            said = said[:-1] + [_Unit(said[-1].text if said else "", heads)]
        out += said
        i = k
    return out


def _worth(unit: _Unit) -> int:
    """0: not a statement to keep; 1: about the user's case; 2: a list of named picks; 3:
    advice, a plan agreed, a result worked out."""
    low = unit.text.casefold()
    if (_QUESTION.re.search(low.rstrip(":： ")) and not unit.heads) or _OFFER.re.search(low):
        return 0
    if not _NAMES_SOMETHING.re.search(" ".join((unit.text, *unit.heads))):
        return 0
    if _ADVICE.re.search(" ".join((low, *unit.heads)).casefold()):
        return 3
    named = sum(bool(_NAMED.re.search(h)) for h in unit.heads)
    if unit.heads and named * 2 >= len(unit.heads) and _OFFERED.re.search(low):
        return 2
    if not _FIGURE.re.search(unit.text):
        return 0  # words to the user that give no figure or name
    return 1 if _CASE.re.search(low) else 0


def _said(unit: _Unit, zh: bool) -> str:
    heads = [_cut(_plain(h).rstrip(".;。；"), ITEM_CHARS) for h in unit.heads]
    if not heads:
        return _cut(_plain(unit.text), SENTENCE_CHARS)
    text = (
        _plain(unit.text)
        + ("" if zh or not unit.text else " ")
        + ("；" if zh else "; ").join(heads)
    )
    return _cut(text, SENTENCE_CHARS - 1) + ("。" if zh else ".")


def assistant_statements(answer: str) -> list[str]:
    """The sentences of an answer worth keeping, the best kind first chosen, in their order;
    none from an answer that declines."""
    units = _units(answer)
    if units and _DECLINES.re.search(units[0].text.casefold()):
        return []
    worth = [_worth(u) for u in units]
    best = max(worth, default=0)
    if best == 0:
        return []
    kept = [u for u, w in zip(units, worth, strict=True) if w == best][:ASSISTANT_SENTENCES]
    return [_said(u, bool(_CJK.re.search(" ".join((u.text, *u.heads))))) for u in kept]


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
        if m.role == "user":
            found = [_cut(s, SENTENCE_CHARS) for s in sentences(m.content) if is_user_statement(s)]
            limit = LINE_CHARS
        else:
            found, limit = assistant_statements(m.content), ASSISTANT_CHARS
        if not found:
            continue
        day = said_on(m.created_at)
        words = _cut(_join(found), limit)
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
