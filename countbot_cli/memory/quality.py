"""Which summary replies may become a MEMORY.md line: junk is never stored.

A memory line is injected into later prompts of every session, so a reply is stored only if
it passes every check (`rejection` names the first one it fails):

- not "nothing to keep" in any wording or language: the sentinel 无需记录 and replies that mean
  it ("Nothing worth keeping.", "No durable facts.", "N/A", "无", "没有值得记录的内容" ...), nor
  a refusal ("I'm sorry, I can't ...", "抱歉，我无法 ...");
- not an echo of a system prompt ("You are a helpful AI assistant named SmolLM ...": small
  local models recite their chat template's default) or of the summariser's instructions (half
  of its word trigrams, or CJK 4-grams, found in the instruction text);
- not a worked answer: an equation between numbers (`12 * 7 = 80`, `12 times 7 is 84`,
  `12乘以7等于84`) or a line that gives "the answer" (`The answer is 80.`, `答案是 84`). What
  was computed or answered in a conversation stays in its session; a memory line is a fact
  about the user or their work that later sessions need, and a sum stored there (the bundled
  135M model's are often wrong) would be recalled into every later prompt as a truth;
- not a copy of the conversation: the transcript's role labels (`USER:`, `ASSISTANT:`, the
  way the summariser is shown the messages) or a question (`What is 12 times 7?`): a fact is
  a statement;
- at most `MAX_CHARS` characters (a summary is one line of facts, not an essay);
- not a duplicate of a stored line (same words, ignoring case, spacing and punctuation).

The keeper treats a rejected reply like the sentinel: the batch is archived (overflow) or the
cursor moves (automatic memory), nothing is written, and the user is told once. "Nothing to
keep" (the sentinel or any wording of it) is a normal outcome, not a rejection:
`ReplyFilter.nothing` counts it and the upkeep says so dimmed, never as a failure.
"""

from __future__ import annotations

import re
from collections.abc import Iterable
from typing import TYPE_CHECKING

from countbot_cli.prompts import is_sentinel
from countbot_cli.textsafe import CJK_CHARS, LazyPattern

if TYPE_CHECKING:
    from countbot_cli.memory.grounding import Grounds

MAX_CHARS = 600
NOTHING = "it said there was nothing to keep"
NOTHING_NOTE = "memory: nothing worth keeping in the older messages"
REPEATED = "it repeated a stored line"
_ECHO_SHARE = 0.5
_PUNCT = re.compile(r"[\W_]+")
_CJK = LazyPattern(f"[{CJK_CHARS}]")
_WORDS = LazyPattern(f"[^\\W\\d_]{{2}}|[{CJK_CHARS}]")  # two letters in a row, or CJK

# whole replies (punctuation, case and spacing ignored) that mean "nothing to keep"
_NOTHING = LazyPattern(
    r"^(?:"
    r"n a|na|nil|null|no|empty|"
    r"(?:there is |there s |i have |i found |i see )?(?:nothing|none)(?: \w+){0,8}|"
    r"no (?:(?:durable|new|important|notable|relevant|significant|lasting|useful|key|"
    r"memorable|additional|personal|long term) )?"
    r"(?:facts?|information|info|memories|memory|details?|points?|preferences|content|"
    r"updates?)(?: \w+){0,6}|"
    r"无|没有|暂无|无内容|无信息|无事实|无记录|不需要|无需|不需要记录|没有需要记录的?|"
    r"(?:没有|无|暂无)(?:任何|值得|需要|可以|重要|新的?|长期)\w{0,12}"
    r")$"
)
_REFUSAL = LazyPattern(
    r"^(?:i m sorry|i am sorry|sorry|i cannot|i can t|i can not|i m unable|i am unable|"
    r"as an ai|unfortunately i|抱歉|对不起|很抱歉|我无法|我不能|作为一个?(?:ai|人工智能))"
)
_SYSTEM_ECHO = LazyPattern(
    r"^(?:you are|you re|your name is|you will|you must|you should|i am an? (?:ai|helpful|"
    r"language model|assistant)|i m an? (?:ai|helpful|language model|assistant)|system|"
    r"你是|您是|你叫|我是一个?(?:ai|人工智能|助手))"
    r"|\b(?:ai assistant named|trained by hugging face|helpful ai assistant)\b"
)
# a worked sum: numbers joined by operators, then "=" and a number (on the raw reply: the
# operators are punctuation), or the same in words (on the plain form)
_NUMBER = r"-?\d[\d.,]*"
_SUM = re.compile(
    rf"{_NUMBER}\s*(?:\*\*|[-+*/×÷^x])\s*\(?\s*{_NUMBER}\s*\)?"
    rf"(?:\s*(?:\*\*|[-+*/×÷^x])\s*\(?\s*{_NUMBER}\s*\)?)*\s*=\s*{_NUMBER}",
    re.I,
)
_SUM_IN_WORDS = re.compile(
    r"\b\d+ (?:times|plus|minus|divided by|multiplied by|over) \d+ "
    r"(?:is|equals|makes|gives|would be)(?: equal to)? \d+\b"
    r"|\d+ ?(?:乘以?|加上?|减去?|除以) ?\d+ ?(?:等于|是|得) ?\d+"
)
# the language of answering a question, not of recording a fact
_ANSWER = re.compile(
    r"\bthe (?:final |correct |right )?(?:answer|result) (?:is|was|would be)\b"
    r"|^(?:answer|result)\b|答案(?:是|为)|结果(?:是|为)"
)

# the summariser's transcript format (memory/digest.py summary_line), upper case as it is sent
_TRANSCRIPT = re.compile(r"(?:^|\s)(?:USER|ASSISTANT|SYSTEM|TOOL):")


def words_of(text: str) -> str:
    """Lower case, every run of punctuation and spacing one space (for comparisons)."""
    return " ".join(_PUNCT.sub(" ", text.casefold()).split())


def has_words(text: str) -> bool:
    """Whether `text` holds a word (two letters in a row, or a CJK character): a reply of
    punctuation, numbers or symbols alone says nothing."""
    return bool(_WORDS.re.search(text))


def rejection(
    reply: str, *, instructions: str, existing: Iterable[str], grounds: Grounds | None = None
) -> str | None:
    """Why `reply` must not be stored (a short phrase for the notice), or None to store it.
    With `grounds` (the text it was made from), a reply naming what that text never said is
    not stored either."""
    plain = words_of(reply)
    if not plain or is_sentinel(reply) or _NOTHING.re.match(plain):
        return NOTHING
    if not has_words(plain):
        return "it held no words"
    if _REFUSAL.re.match(plain):
        return "it was a refusal"
    if _SYSTEM_ECHO.re.search(plain) or _echoes(plain, words_of(instructions)):
        return "it repeated the instructions or a system prompt"
    if _SUM.search(reply) or _SUM_IN_WORDS.search(plain) or _ANSWER.search(plain):
        return "it was a worked answer, not a fact to keep"
    if _TRANSCRIPT.search(reply) or reply.strip().endswith(("?", "？")):
        return "it copied the conversation, not a fact to keep"
    if len(reply) > MAX_CHARS:
        return f"it was longer than {MAX_CHARS} characters"
    if any(words_of(line) == plain for line in existing):
        return REPEATED
    missing = grounds.missing(reply) if grounds is not None else []
    if missing:
        named = ", ".join(f'"{m}"' for m in missing[:3]) + (" …" if len(missing) > 3 else "")
        return f"it named {named}, which the messages never said"
    return None


def _grams(text: str, cjk: bool) -> set[str]:
    if cjk:
        chars = text.replace(" ", "")
        return {chars[i : i + 4] for i in range(len(chars) - 3)}
    words = text.split()
    return {" ".join(words[i : i + 3]) for i in range(len(words) - 2)}


def _echoes(plain: str, instructions: str) -> bool:
    cjk = bool(_CJK.re.search(plain))  # the reply's script decides how both are cut
    mine = _grams(plain, cjk)
    if len(mine) < 3:
        return False
    theirs = _grams(instructions, cjk)
    return len(mine & theirs) >= _ECHO_SHARE * len(mine)


class ReplyFilter:
    """The junk filter of one keeper: `keep` says whether to store a reply and remembers why
    not; `notes` says once what was kept back since the last call (a normal outcome: the
    filter did its job, never "upkeep failed")."""

    def __init__(self) -> None:
        self.reasons: list[str] = []  # why replies were kept back
        self.nothing = 0  # replies that said there was nothing to keep (a normal "no")
        self.own_words = 0  # lines written from what was said instead of a kept-back reply

    def keep(
        self,
        reply: str | None,
        instructions: str,
        existing: Iterable[str],
        grounds: Grounds | None = None,
    ) -> bool:
        return self.check(reply, instructions, existing, grounds) is None if reply else False

    def check(
        self,
        reply: str,
        instructions: str,
        existing: Iterable[str],
        grounds: Grounds | None = None,
    ) -> str | None:
        """`rejection`, remembered: None (store it), NOTHING, or the reason it is kept back."""
        why = rejection(reply, instructions=instructions, existing=existing, grounds=grounds)
        if why == NOTHING:
            self.nothing += 1
        elif why is not None:
            self.reasons.append(why)
        return why

    def reset(self) -> None:
        self.reasons, self.nothing, self.own_words = [], 0, 0

    def notes(self) -> list[str]:
        """What to tell the user of the replies since the last call: one kept back (with how
        many lines of what was said stand for it), and "nothing worth keeping"."""
        out = [NOTHING_NOTE] if self.nothing else []
        if self.reasons:
            why, own = self.reasons[0], self.own_words
            said = f"; kept what was said instead ({own} line{'s' if own != 1 else ''})"
            out.insert(0, f"memory: the model's summary was kept back ({why}){said if own else ''}")
        self.reset()
        return out
