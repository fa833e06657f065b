"""The summariser's prompts: what upkeep asks the model of the messages leaving the window.

The overflow and conversation-to-memory prompts (one memory line of the messages), and the
rolling-summary prompt of a window step (the session's summary brought up to date, and with
`memory.overflow_summary` the memory line, in one reply labelled MEMORY:, SUMMARY:, TITLE:).
They keep CountBot's rules in our own words, in English and Chinese by `persona.language`, and
add what a memory line must be: only names, numbers and dates the messages hold, dates as
YYYY-MM-DD (the messages carry the day they were said, their relative dates resolved), the
assistant's recommendations and figures marked as the assistant's, "; " between English items
and "；" between Chinese ones.
"""

from __future__ import annotations

from collections.abc import Sequence
from datetime import date

from countbot_cli.prompts import NO_MEMORY_SENTINEL, is_chinese

_KEEP_EN = """Keep only: the user's explicit preferences and habits; facts about the user and their \
work (names, places, people, projects); important decisions and conclusions; project settings and \
technical details; what the assistant recommended, figures it gave and plans agreed, each marked as \
the assistant's ("the assistant recommended …")"""
_CONCRETE_EN = """Every item must be concrete, and name only what the messages say: the names, numbers \
and dates written in them, never others. Write dates as YYYY-MM-DD (a date in brackets after \
"yesterday" or "next Friday" is what it means)."""
_KEEP_ZH = "只记录：用户明确的偏好和习惯；关于用户及其工作的事实（名字、地点、人物、项目）；重要的决定和结论；项目配置和技术细节；助手给出的建议、数字和商定的计划，并注明是助手的（如“助手建议……”）"
_CONCRETE_ZH = "每个事项都要具体，并且只写消息里出现过的名称、数字和日期，不要写别的。日期写成 YYYY-MM-DD（“昨天”“下周五”后面括号里的日期就是它的意思）。"

_OVERFLOW_EN = """You summarise conversations for long-term memory. The messages below are older \
history that is about to leave the conversation window. Turn whatever has lasting value into one \
concise memory entry.

Rules:
1. Output a single line; separate items with "; ".
2. {keep}; key results of tool calls (not temporary look-ups).
3. Leave out: greetings, thanks and repetition; one-off results (weather, news, searches); \
intermediate tool steps and temporary data.
4. {concrete}
5. If nothing is worth keeping, output exactly: {sentinel}
{written}
Conversation:
{messages}

Output (one line, items separated by "; "):"""

_OVERFLOW_ZH = """你是对话摘要助手。下面是即将移出对话窗口的较早历史记录，请把其中有长期价值的信息整理成一条简洁的记忆。

规则：
1. 只输出一行，各事项之间用全角分号"；"分隔。
2. {keep}；工具调用的关键结果（不含临时查询）。
3. 不记录：问候、致谢和重复内容；一次性查询结果（天气、新闻、搜索）；工具的中间步骤和临时数据。
4. {concrete}
5. 如果没有值得记录的内容，只输出：{sentinel}
{written}
对话内容:
{messages}

输出（一行，事项用；分隔）:"""

_CONVERSATION_EN = """You summarise a conversation into one concise long-term memory entry.

Rules:
1. Output a single line; separate items with "; ".
2. {keep}; anything the user asked to remember.
3. Leave out: greetings, thanks, chit-chat, test messages and repetition; one-off results \
(weather, news, searches); intermediate steps and temporary data.
4. {concrete}
5. If nothing is worth keeping, output exactly: {sentinel}
{written}
Conversation:
{messages}

Output (one line, items separated by "; "):"""

_CONVERSATION_ZH = """请把下面的对话整理成一条简洁的长期记忆。

规则：
1. 只输出一行，各事项之间用全角分号"；"分隔。
2. {keep}；用户要求记住的内容。
3. 不记录：问候、致谢、闲聊、测试内容和重复内容；一次性查询结果（天气、新闻、搜索）；中间步骤和临时数据。
4. {concrete}
5. 如果没有值得记录的内容，只输出：{sentinel}
{written}
对话内容:
{messages}

输出（一行，事项用；分隔）:"""


def written_on(days: Sequence[date], language: str) -> str:
    """The line saying when the messages were written (a day, or the first and last), or ""."""
    if not days:
        return ""
    first, last = min(days).isoformat(), max(days).isoformat()
    span = first if first == last else f"{first} – {last}"
    return (
        f"\n消息写于 {span}。\n"
        if is_chinese(language)
        else f"\nThe messages were written on {span}.\n"
    )


def _memory_prompt(en: str, zh: str, messages_text: str, language: str, written: str) -> str:
    zh_ = is_chinese(language)
    return (zh if zh_ else en).format(
        keep=_KEEP_ZH if zh_ else _KEEP_EN,
        concrete=_CONCRETE_ZH if zh_ else _CONCRETE_EN,
        sentinel=NO_MEMORY_SENTINEL,
        written=written,
        messages=messages_text,
    )


def overflow_summary_prompt(messages_text: str, language: str, written: str = "") -> str:
    return _memory_prompt(_OVERFLOW_EN, _OVERFLOW_ZH, messages_text, language, written)


def conversation_memory_prompt(messages_text: str, language: str, written: str = "") -> str:
    return _memory_prompt(_CONVERSATION_EN, _CONVERSATION_ZH, messages_text, language, written)


# ---- the rolling session summary (memory/rolling.py): one call per window step ----

MEMORY_MARK, SUMMARY_MARK, TITLE_MARK = "MEMORY:", "SUMMARY:", "TITLE:"

_ROLLING_MEMORY_EN = """1. MEMORY: one long-term memory entry with what has lasting value in the messages leaving the window and the newer ones not yet in memory (never the ones memory already holds). {keep}; key tool results. {concrete} Items separated by "; "; no greetings, one-off results or temporary data. If nothing is worth keeping, write exactly {sentinel}.
"""
_ROLLING_EN = """You keep the running summary of a conversation whose older messages are leaving its window{and_memory}. Write:

{memory_rule}{n}. SUMMARY: the summary so far brought up to date with the messages below: what the conversation is about, the user's goals and constraints, decisions and facts settled, open questions, where it stands now. Plain text, at most {words} words; keep what still matters, drop what no longer does.
{title_rule}{written}
Summary so far:
{summary}
{backlog}{known}
Messages leaving the window:
{messages}
{newer}
Answer with {lines}, each starting with its label exactly as shown:
{labels}"""

_ROLLING_MEMORY_ZH = """1. MEMORY: 把移出窗口的消息和尚未写入记忆的较新消息（不包括记忆中已有的）中有长期价值的信息整理成一条长期记忆。{keep}；工具调用的关键结果。{concrete}事项之间用"；"分隔；不记录问候、一次性结果和临时数据。如果没有值得记录的内容，写：{sentinel}
"""
_ROLLING_ZH = """你负责维护一段对话的滚动摘要，这段对话较早的消息正在移出窗口{and_memory}。请写出：

{memory_rule}{n}. SUMMARY: 结合下面的消息更新后的对话摘要：对话的主题、用户的目标和限制、已确定的决定和事实、未解决的问题、目前的进展。纯文本，不超过 {words} 字；保留仍然重要的内容，去掉不再重要的内容。
{title_rule}{written}
目前的摘要:
{summary}
{backlog}{known}
移出窗口的消息:
{messages}
{newer}
请按以下格式回答（{lines}，标签原样保留）:
{labels}"""


_BACKLOG_HEAD = (
    "Earlier messages not yet in the summary (for the summary only):",
    "之前未写进摘要的消息（只用于摘要）:",
)
_KNOWN_HEAD = (
    "Messages leaving the window that long-term memory already holds (for the summary only):",
    "移出窗口、已在长期记忆中的消息（只用于摘要）:",
)
_NEWER_HEAD = (
    "Newer messages, still in the window, not yet in long-term memory (for MEMORY only):",
    "较新的、仍在窗口中且尚未写入长期记忆的消息（只用于 MEMORY）:",
)


def _section(text: str, head: str) -> str:
    return f"\n{head}\n{text}\n" if text else ""


def rolling_summary_prompt(
    summary: str,
    backlog: str,
    messages_text: str,
    language: str,
    *,
    memory: bool,
    words: int,
    title: bool = False,
    known: str = "",
    newer: str = "",
    written: str = "",
) -> str:
    """One call per window step: the session's rolling summary brought up to date with the
    block leaving the window (`known`, its messages long-term memory holds already, and
    `messages_text`; `backlog`, older messages it missed); with `memory`, the memory entry of
    `messages_text` and `newer` (later messages not yet in memory) in the same reply; with
    `title`, a title for it."""
    zh = is_chinese(language)
    none = "（暂无）" if zh else "(none yet)"
    backlog = _section(backlog, _BACKLOG_HEAD[zh])
    known = _section(known, _KNOWN_HEAD[zh])
    newer = _section(newer, _NEWER_HEAD[zh])
    rule = (_ROLLING_MEMORY_ZH if zh else _ROLLING_MEMORY_EN).format(
        sentinel=NO_MEMORY_SENTINEL,
        keep=_KEEP_ZH if zh else _KEEP_EN,
        concrete=_CONCRETE_ZH if zh else _CONCRETE_EN,
    )
    labels = [MEMORY_MARK + " …", SUMMARY_MARK + " …"] if memory else [SUMMARY_MARK + " …"]
    title_rule = ""
    if title:
        n = len(labels) + 1
        title_rule = (
            f"{n}. TITLE: 这段对话的标题，不超过 12 个字。\n"
            if zh
            else f"{n}. TITLE: a title for the conversation, at most 8 words.\n"
        )
        labels.append(TITLE_MARK + " …")
    two = (("一行", "两行", "三行") if zh else ("one line", "two lines", "three lines"))[
        len(labels) - 1
    ]
    and_memory = ("，同时提取长期记忆" if zh else ", and its long-term memory") if memory else ""
    return (_ROLLING_ZH if zh else _ROLLING_EN).format(
        and_memory=and_memory,
        memory_rule=rule if memory else "",
        n=2 if memory else 1,
        words=words,
        summary=summary.strip() or none,
        backlog=backlog,
        known=known,
        newer=newer,
        messages=messages_text,
        lines=two,
        labels="\n".join(labels),
        title_rule=title_rule,
        written=written,
    )
