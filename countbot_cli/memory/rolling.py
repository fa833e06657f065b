"""The rolling session summary: what left the window, kept in the session.

A short summary of the conversation so far, so a long session keeps its thread after its oldest
messages leave the history window. The window's start moves in steps (`context.window_step`) and the block a step leaves
behind is archived by the overflow summary (keeper.py); the same call now also brings the
session's `rolling_summary` up to date with that block, so a step costs one call, not two
(`summary_prompts.rolling_summary_prompt` asks for `MEMORY: …` and `SUMMARY: …`; with
`memory.overflow_summary` off only the summary is asked for and nothing goes to MEMORY.md).

- **In the stable head.** The request carries `Session.context_summary()` in the system prompt:
  the user's `/summary` when set (it wins and is never overwritten; `/summary clear` returns to
  the rolling one), else the rolling summary. It changes only when a step is written, which is
  also when the window's start moves, so between two steps every request extends the previous
  one and the provider's cached prefix survives.
- **Bounded.** The reply is capped at `ROLLING_CHARS`; the prompt carries the summary so far,
  the block (within the overflow batch budget) and at most `BACKLOG_CHARS` of older messages it
  missed.
- **Failure changes nothing.** A failed call archives nothing and leaves the summary as it was;
  the block is tried again after a later turn (keeper.py). A reply whose summary part is missing
  or unusable still writes its memory line and archives the block, but the summary and its
  cursor (`cursors["rolling"]`, the key of the last message folded in) stay: the next step
  shows the missed messages as a backlog, so they are summarised then.
- **A title.** While the session's title is still the first question's (`title_from`), the same
  call asks for a title, which replaces it once; a title the user gave is never replaced.
- **Compatible.** Files without `rolling_summary` load with none; older countbots ignore it.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from datetime import date
from typing import TYPE_CHECKING

from countbot_cli.conversation.context import sendable
from countbot_cli.conversation.sessions.session import title_from
from countbot_cli.memory.coverage import Share
from countbot_cli.memory.digest import format_newest, is_no_memory, message_key, summary_line
from countbot_cli.memory.grounding import Grounds
from countbot_cli.memory.quality import has_words
from countbot_cli.memory.statements import recap
from countbot_cli.memory.summary_prompts import (
    overflow_summary_prompt,
    rolling_summary_prompt,
    written_on,
)
from countbot_cli.messages import Message

if TYPE_CHECKING:
    from countbot_cli.config.settings import Settings
    from countbot_cli.conversation.sessions.session import Session

CURSOR_ROLLING = "rolling"  # message_key of the last message folded into the rolling summary
CURSOR_SAID = "rolling_said"  # 1: the summary is made of what was said (`recap`), not a model's
ROLLING_CHARS = 1200  # the summary is cut here (at a word) if the model wrote more
ROLLING_WORDS = 150  # what the prompt asks for
BACKLOG_CHARS = 4000  # older messages the summary missed, newest kept
_LABEL = re.compile(r"[*#\s]*\b(MEMORY|SUMMARY|TITLE)\b\s*\**\s*[:：]\s*\**", re.IGNORECASE)
TITLE_WORDS = 12


def labelled(reply: str) -> dict[str, str]:
    """The parts of a `MEMORY: … SUMMARY: … TITLE: …` reply by label (the first of each)."""
    marks = list(_LABEL.finditer(reply))
    parts: dict[str, str] = {}
    for i, m in enumerate(marks):
        end = marks[i + 1].start() if i + 1 < len(marks) else len(reply)
        parts.setdefault(m.group(1).upper(), reply[m.end() : end].strip(" *\n\t"))
    return parts


def split_reply(reply: str) -> tuple[str | None, str | None]:
    """(memory part, summary part) of a reply; None for a part whose label is missing (both
    None: the model ignored the format)."""
    parts = labelled(reply)
    return parts.get("MEMORY"), parts.get("SUMMARY")


def auto_title(session: Session) -> bool:
    """Whether the title is still the one the first question gave it (never the user's)."""
    first = next((m for m in session.all_messages() if m.role == "user"), None)
    return first is not None and bool(session.title) and session.title == title_from(first.content)


def clean_title(text: str | None) -> str | None:
    """A model's title: one line, no quotes, at most TITLE_WORDS words and TITLE_MAX chars."""
    if not text:
        return None
    words = " ".join(text.split()).strip(" \"'“”‘’「」《》.。").split()[:TITLE_WORDS]
    title = title_from(" ".join(words))
    return title or None


def clean_summary(text: str | None, limit: int = ROLLING_CHARS) -> str | None:
    """The summary as kept: one paragraph, at most `limit` characters (cut at a word); None
    when it holds no word (punctuation, a bare number) or is a "nothing" reply."""
    if text is None:
        return None
    text = " ".join(text.split())
    if not has_words(text) or is_no_memory(text):
        return None
    if len(text) > limit:
        cut = text[: limit - 1]
        space = cut.rfind(" ")
        text = (cut[:space] if space > limit // 2 else cut).rstrip(" ,;") + "…"
    return text


def _backlog(session: Session) -> list[Message]:
    """Archived messages after the rolling cursor (all of them when there is none)."""
    key = session.cursors.get(CURSOR_ROLLING)
    archived = session.archived
    if key is None:
        return sendable(archived)
    for i in range(len(archived) - 1, -1, -1):
        if message_key(archived[i].id) == key:
            return sendable(archived[i + 1 :])
    return [] if session.rolling_summary else sendable(archived)


@dataclass
class Rolling:
    """The rolling summary through one overflow run (its batches, oldest first)."""

    enabled: bool  # memory.session_summary
    memory: bool  # memory.overflow_summary: the same call also makes the memory line
    language: str
    summary: str
    backlog: list[str] = field(default_factory=list)
    limit: int = ROLLING_CHARS  # of the summary
    backlog_chars: int = BACKLOG_CHARS
    title: bool = False  # a title asked for too (the first question's is still the title)
    new_title: str | None = None  # the last reply's
    asked: bool = False  # the last prompt asked for a memory line
    said: bool = False  # the summary is a recap of what was said, not a model's

    @classmethod
    def start(cls, settings: Settings, session: Session, context_window: int) -> Rolling:
        """The run's state from the saved session; `context_window` (the summariser's, in
        tokens) bounds the summary and the backlog on a small model: a character is at most
        about a token, and both must leave the block and the reply room."""
        enabled = settings.memory.session_summary
        limit = max(200, min(ROLLING_CHARS, context_window // 6))
        backlog_chars = max(0, min(BACKLOG_CHARS, context_window // 8))
        missed = _backlog(session) if enabled and backlog_chars else []
        text = format_newest(missed, backlog_chars) if missed else ""
        return cls(
            enabled=enabled,
            memory=settings.memory.overflow_summary,
            language=settings.persona.language,
            summary=clean_summary(session.rolling_summary, limit) or "",
            backlog=text.split("\n") if text else [],
            limit=limit,
            backlog_chars=backlog_chars,
            title=enabled and auto_title(session),
            said=bool(session.cursors.get(CURSOR_SAID)),
        )

    def wants_call(self, part: Share) -> bool:
        """Whether a batch needs a call: lines for the summary, or for memory ones MEMORY.md
        does not hold yet (memory/coverage.py)."""
        return bool(part.known or part.fresh) if self.enabled else bool(part.fresh or part.newer)

    def prompt(self, part: Share, written: str = "") -> str:
        """The call for one batch: memory only of `part.fresh` and `part.newer`, the summary of
        the whole batch (`part.known` and `part.fresh`); `written`, when they were said."""
        self.asked = self.memory and bool(part.fresh or part.newer)
        if not self.enabled:
            text = "\n".join([*part.fresh, *part.newer])
            return overflow_summary_prompt(text, self.language, written)
        split = self.asked  # without a memory line to ask for, the batch is one block
        return rolling_summary_prompt(
            self.summary,
            "\n".join(self.backlog),
            "\n".join(part.fresh if split else [*part.known, *part.fresh]),
            self.language,
            memory=self.asked,
            words=ROLLING_WORDS,
            title=self.title,
            known="\n".join(part.known) if split else "",
            newer="\n".join(part.newer) if split else "",
            written=written,
        )

    def template(self) -> str:
        """The longest prompt a step sends, without its messages (the input budget's share)."""
        asked = self.asked
        text = self.prompt(Share(fresh=[""]), written_on([date.today()], self.language))
        self.asked = asked
        return text

    def grounds(self, part: Share, language: str, days: Sequence[date]) -> Grounds:
        """What a reply to `prompt(part)` may name: the summary so far and the messages shown."""
        texts = [self.summary, *self.backlog, *part.known, *part.fresh, *part.newer]
        instructions = rolling_summary_prompt("", "", "", language, memory=True, words=0)
        return Grounds(texts, days, instructions)

    def usable(self, summary: str | None, grounds: Grounds) -> str | None:
        """The summary part of a reply when it names only what was said, else None."""
        if summary is None or grounds.missing(summary):
            return None
        return summary

    def said_instead(self, model_summaries: bool) -> bool:
        """Whether a step without a usable summary from the model makes one of what was said:
        the model writes none (`model_summaries` False), there is none yet, or the one there is
        was made so. A model's summary otherwise stays until its next call catches up."""
        return self.enabled and (not model_summaries or not self.summary or self.said)

    def recap(self, messages: Sequence[Message]) -> str | None:
        """The summary made of what was said in `messages` (memory/statements.py)."""
        return recap(messages, self.language, self.limit)

    def read(self, reply: str | None) -> tuple[str | None, str | None]:
        """(the reply for a memory line, the new summary) of one call's reply."""
        self.new_title = None
        if reply is None or not self.enabled:
            return (reply if self.asked else None), None
        parts = labelled(reply)
        memory, summary = parts.get("MEMORY"), parts.get("SUMMARY")
        if memory is None and summary is None:  # no labels: take it as the memory line
            return (reply if self.asked else None), None
        self.new_title = clean_title(parts.get("TITLE")) if self.title else None
        return (memory if self.asked else None), clean_summary(summary, self.limit)

    def commit(
        self, summary: str | None, batch: Sequence[Message], *, said: bool = False
    ) -> Callable[[Session], None]:
        """The batch's change to the session (applied inside the write that archives it);
        `said`: the summary is a recap of what was said."""

        title = self.new_title

        def apply(s: Session) -> None:
            if summary is not None and batch:
                s.rolling_summary = summary
                if said:  # the model's next summary still gets the block, as a backlog
                    s.cursors[CURSOR_SAID] = 1
                else:
                    s.cursors[CURSOR_ROLLING] = message_key(batch[-1].id)
                    s.cursors.pop(CURSOR_SAID, None)
            if title is not None and auto_title(s):  # never over a title the user gave
                s.title = title

        return apply

    def written(self, summary: str | None, batch: Sequence[Message], *, said: bool = False) -> None:
        """After the batch's write: the next batch builds on what this one left."""
        if not self.enabled:
            return
        if self.new_title is not None:
            self.title = False  # titled once: the first question no longer names it
        if summary is not None:
            self.summary, self.said = summary, said
            if not said:
                self.backlog = []
                return
        lines = [line for m in sendable(batch) if (line := summary_line(m)) is not None]
        self.backlog = [*self.backlog, *lines]
        while self.backlog and sum(len(x) + 1 for x in self.backlog) > self.backlog_chars:
            self.backlog.pop(0)
