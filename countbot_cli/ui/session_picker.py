"""The session picker of `/resume` (no id, or words): a prompt-toolkit list that filters as you
type.

A line to type in, the sessions below it, newest first. Every word typed must be in the title,
and sessions whose messages hold the words (the full-text search of conversation/sessions/search.py,
live and archived messages) follow the title matches, each with its snippet (the others with
the one-line gist of their summary, when they have one). Up/Down (Ctrl-P/
Ctrl-N) move, Enter resumes the marked session, Esc, Ctrl-C or Ctrl-D leave it. Titles and
snippets go through textsafe.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime, timezone
from typing import TYPE_CHECKING, Any

from prompt_toolkit.application import Application
from prompt_toolkit.buffer import Buffer
from prompt_toolkit.document import Document
from prompt_toolkit.formatted_text import StyleAndTextTuples
from prompt_toolkit.key_binding import KeyBindings
from prompt_toolkit.layout import Dimension, HSplit, Layout, Window
from prompt_toolkit.layout.controls import BufferControl, FormattedTextControl

from countbot_cli.conversation.sessions.search import SessionSearch
from countbot_cli.conversation.sessions.search_text import snippet
from countbot_cli.conversation.sessions.session import short_ids
from countbot_cli.errors import CountbotError, Terminated
from countbot_cli.textsafe import sanitize_line
from countbot_cli.ui.listing import relative_time
from countbot_cli.ui.transcript import UNTITLED

if TYPE_CHECKING:
    from prompt_toolkit.input import Input
    from prompt_toolkit.key_binding import KeyPressEvent
    from prompt_toolkit.output import Output

    from countbot_cli.conversation.sessions.store import SessionStore

SHOWN = 10  # rows on screen
TEXT_HITS = 20  # full-text matches asked for per keystroke


@dataclass(frozen=True)
class Row:
    id: str
    label: str
    snippet: str = ""


class Picker:
    """The rows for what is typed, and which one is marked (no terminal needed: tests use it)."""

    def __init__(
        self, store: SessionStore, *, current: str | None = None, now: datetime | None = None
    ) -> None:
        self.heads = [h for h in store.list() if h["id"] != current]
        self.shorts = short_ids([h["id"] for h in self.heads])
        self.search = SessionSearch(store, on_notice=lambda _m: None)
        self.now = now or datetime.now(timezone.utc)
        self.rows: list[Row] = []
        self.marked = 0

    def refilter(self, buffer: Buffer) -> None:
        self.filter(buffer.text)

    def filter(self, text: str) -> list[Row]:
        words = text.split()
        low = [w.lower() for w in words]
        rows = [self._row(h) for h in self.heads if all(w in h["title"].lower() for w in low)]
        if words:
            seen = {r.id for r in rows}
            rows += [r for r in self._found(words) if r.id not in seen]
        self.rows, self.marked = rows, 0
        return rows

    def move(self, step: int) -> None:
        if self.rows:
            self.marked = max(0, min(len(self.rows) - 1, self.marked + step))

    def chosen(self) -> str | None:
        return self.rows[self.marked].id if self.rows else None

    def _row(self, head: dict[str, Any], text: str = "") -> Row:
        title = sanitize_line(head["title"])[:50] or UNTITLED
        when = relative_time(str(head.get("updated_at") or ""), self.now)
        label = f"{self.shorts.get(head['id'], head['id'])}  {title} · {when}"
        return Row(head["id"], label, text or str(head.get("gist") or ""))  # or its summary

    def _found(self, words: list[str]) -> list[Row]:
        try:
            results = self.search.search(words, limit=TEXT_HITS)
        except CountbotError:  # a query the index cannot take: titles only
            return []
        heads = {h["id"]: h for h in self.heads}
        out = []
        for hit in results.hits:
            if hit.id in heads:
                text = snippet(hit.excerpts[0].content, results.terms) if hit.excerpts else ""
                out.append(self._row(heads[hit.id], text))
        return out

    def lines(self) -> StyleAndTextTuples:
        """The list as prompt-toolkit formatted text."""
        if not self.rows:
            return [("class:dim", "  no session matches\n")]
        top = max(0, self.marked - SHOWN + 1)
        out: StyleAndTextTuples = []
        for i, row in enumerate(self.rows[top : top + SHOWN], start=top):
            mark = "reverse" if i == self.marked else ""
            out.append((mark, f"{'›' if i == self.marked else ' '} {row.label}"))
            if row.snippet:
                out.append(("class:dim", f"    {sanitize_line(row.snippet)[:100]}"))
            out.append(("", "\n"))
        more = len(self.rows) - top - SHOWN
        if more > 0:
            out.append(("class:dim", f"  … {more} more\n"))
        return out


def pick_session(
    store: SessionStore,
    query: str = "",
    *,
    current: str | None = None,
    input: Input | None = None,
    output: Output | None = None,
) -> str | None:
    """Show the picker; the id chosen, or None when the user left it."""
    picker = Picker(store, current=current)
    picker.filter(query)
    buffer = Buffer(
        document=Document(query, len(query)),
        multiline=False,
        on_text_changed=picker.refilter,
    )
    keys = KeyBindings()

    @keys.add("up")
    @keys.add("c-p")
    def _up(event: KeyPressEvent) -> None:
        picker.move(-1)

    @keys.add("down")
    @keys.add("c-n")
    def _down(event: KeyPressEvent) -> None:
        picker.move(1)

    @keys.add("enter")
    def _enter(event: KeyPressEvent) -> None:
        event.app.exit(result=picker.chosen())

    @keys.add("escape", eager=True)
    @keys.add("c-c")
    @keys.add("c-d")
    def _leave(event: KeyPressEvent) -> None:
        event.app.exit(result=None)

    head = "resume (type to filter, ↑↓ choose, Enter resume, Esc cancel) › "
    layout = Layout(
        HSplit(
            [
                Window(
                    BufferControl(buffer), height=1, get_line_prefix=lambda *_: [("bold", head)]
                ),
                Window(
                    FormattedTextControl(picker.lines), height=Dimension(min=1, max=SHOWN * 2 + 1)
                ),
            ]
        )
    )
    app: Application[str | None] = Application(
        layout=layout, key_bindings=keys, input=input, output=output, erase_when_done=True
    )
    try:
        return app.run()
    except Terminated:
        raise  # SIGTERM/SIGHUP stop countbot, they do not close the picker
    except (EOFError, KeyboardInterrupt):  # the input closed, or Ctrl-C as a signal
        return None
