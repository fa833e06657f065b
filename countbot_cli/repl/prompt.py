"""The REPL's input side: key bindings, the input history file and Tab completion (SPEC §2).

Enter sends; Alt-Enter, Esc Enter and Ctrl-J insert a newline (not while searching, so Enter
still ends a Ctrl-R search), except that Ctrl-J ends a line holding a slash command (an Enter
typed ahead while the terminal was in its cooked mode arrives as Ctrl-J); a bracketed paste stays one message (prompt-toolkit inserts it).
Ctrl-C clears a non-empty line and otherwise ends the prompt with KeyboardInterrupt (the REPL
explains how to quit); in a Ctrl-R search it cancels the search. A SIGINT that arrives as a
signal rather than as the key (the prompt's terminal is in raw mode) does the same. The history file only grows, so it is cut back to its newest entries at
exit once past a size.
"""

from __future__ import annotations

import contextlib
import os
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import TYPE_CHECKING, Any

from prompt_toolkit.completion import CompleteEvent, Completer, Completion, PathCompleter
from prompt_toolkit.document import Document

from countbot_cli.repl.slash import COMMANDS, lookup, parse
from countbot_cli.repl.template_cmds import custom_commands

if TYPE_CHECKING:
    from prompt_toolkit import PromptSession
    from prompt_toolkit.formatted_text import StyleAndTextTuples
    from prompt_toolkit.history import History
    from prompt_toolkit.input import Input
    from prompt_toolkit.key_binding import KeyBindings
    from prompt_toolkit.output import Output

    from countbot_cli.repl.host import ReplHost


HISTORY_MAX_BYTES = 1_000_000
HISTORY_KEEP = 1000


def make_prompt(
    repl: ReplHost, history_path: Path, input: Input | None, output: Output | None
) -> PromptSession[str]:
    """The REPL's prompt: history file, completion, bottom toolbar, key bindings."""
    from prompt_toolkit import PromptSession
    from prompt_toolkit.completion import ThreadedCompleter

    return PromptSession(
        message=lambda: prompt_message(len(repl.attachments)),
        history=open_history(history_path, repl.warn),
        completer=ThreadedCompleter(SlashCompleter(repl)),
        complete_while_typing=True,
        reserve_space_for_menu=4,
        bottom_toolbar=repl.toolbar,
        key_bindings=key_bindings(lambda: repl.chat.enter == "newline"),
        editing_mode=editing_mode(repl.chat.editing_mode),
        prompt_continuation=lambda width, _n, _soft: "… ".rjust(width),
        enable_open_in_editor=True,
        input=input,
        output=output,
    )


def redraw_soon(prompt: PromptSession[str] | None) -> None:
    """From another thread (a tokenizer loaded, the upkeep ended): draw the prompt again, in
    the prompt's own event loop. prompt_toolkit's `invalidate()` called from elsewhere checks
    that the prompt runs, then uses its loop, which the prompt's end clears meanwhile ("no
    running event loop"); run in that loop, it sees the prompt as it is. A prompt that has
    gone (no loop, or the loop closed since) is nothing to redraw."""
    app = prompt.app if prompt is not None else None
    loop = app.loop if app is not None else None
    if app is None or loop is None:
        return
    with contextlib.suppress(RuntimeError):  # the loop was closed meanwhile
        loop.call_soon_threadsafe(app.invalidate)


def prompt_message(attached: int) -> StyleAndTextTuples:
    """`> `, or `[2 attached] > ` while `/attach` holds something for the next message."""
    if not attached:
        return [("class:prompt", "> ")]
    return [("class:attached", f"[{attached} attached] "), ("class:prompt", "> ")]


def editing_mode(name: str) -> Any:
    """prompt-toolkit's EditingMode for `chat.editing_mode` (vi or emacs)."""
    from prompt_toolkit.enums import EditingMode

    return EditingMode.VI if name == "vi" else EditingMode.EMACS


def key_bindings(enter_newline: Callable[[], bool] = lambda: False) -> KeyBindings:
    """`enter_newline()` true (`chat.enter: newline`): Enter inserts a new line and Esc Enter
    (Alt-Enter) sends; a slash command's line still ends with Enter."""
    from prompt_toolkit.application.current import get_app
    from prompt_toolkit.filters import Condition, is_searching, vi_mode
    from prompt_toolkit.key_binding import KeyBindings

    kb = KeyBindings()
    swapped = Condition(enter_newline)
    typing_text = Condition(lambda: not is_command_line(get_app().current_buffer.text))

    @kb.add("enter", filter=swapped & ~is_searching & typing_text)
    def _enter_newline(event: Any) -> None:
        event.current_buffer.insert_text("\n")

    # in vi mode Esc is the mode key: no Esc-chords, or a lone Esc would wait for the next key
    # (Esc then Enter still sends: Enter in vi's normal mode ends the line; Ctrl-J: new line)
    @kb.add("escape", "enter", filter=swapped & ~is_searching & ~vi_mode)
    def _send(event: Any) -> None:
        event.current_buffer.validate_and_handle()

    # a slash command is one line: there Ctrl-J keeps prompt-toolkit's meaning, Enter. An Enter
    # typed ahead while the terminal was out of the prompt's raw mode (a slash command's output
    # printing) reaches the prompt as "\n" (the terminal's ICRNL), that is as Ctrl-J.
    command = Condition(lambda: is_command_line(get_app().current_buffer.text))

    @kb.add("escape", "enter", filter=~is_searching & ~swapped & ~vi_mode)
    @kb.add("c-j", filter=~is_searching & ~command)
    def _newline(event: Any) -> None:
        event.current_buffer.insert_text("\n")

    @kb.add("c-c", filter=~is_searching)
    @kb.add("<sigint>", filter=~is_searching)  # a SIGINT at the prompt (kill -INT) is Ctrl-C too
    def _cancel(event: Any) -> None:
        buf = event.current_buffer
        if buf.text:
            buf.reset()
        else:
            event.app.exit(exception=KeyboardInterrupt, style="class:aborting")

    @kb.add("<sigint>", filter=is_searching)
    def _end_search(event: Any) -> None:
        """A SIGINT during a Ctrl-R search cancels the search, as the Ctrl-C key does."""
        from prompt_toolkit.search import stop_search

        stop_search()

    return kb


def _custom_completions(word: str, start: int) -> Iterator[Completion]:
    """The templates and roles that complete `/word` (repl/template_cmds.py)."""
    try:
        found = [c for c in custom_commands() if c[0].lower().startswith(word) and not lookup(c[0])]
    except Exception:  # completion must never break typing
        return
    for name, meta, takes in found:
        yield Completion(
            f"/{name}{' ' if takes else ''}", start, display=f"/{name}", display_meta=meta
        )


def is_command_line(text: str) -> bool:
    """`text` is one line holding a slash command (`//text` is a message)."""
    return "\n" not in text and not text.startswith("//") and parse(text) is not None


def open_history(path: Path, warn: Callable[[str], None]) -> History:
    """The persistent history (file mode 0600, read in a thread); in memory if it cannot be."""
    from prompt_toolkit.history import FileHistory, InMemoryHistory, ThreadedHistory

    try:
        path.parent.mkdir(parents=True, exist_ok=True, mode=0o700)
        os.close(os.open(path, os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o600))
    except OSError as exc:
        warn(f"input history is not kept: cannot write {path} ({exc.strerror or exc})")
        return InMemoryHistory()
    return ThreadedHistory(FileHistory(str(path)))


def trim_history(path: Path, max_bytes: int = HISTORY_MAX_BYTES, keep: int = HISTORY_KEEP) -> None:
    """FileHistory only appends: past `max_bytes`, keep the last `keep` entries (atomic rewrite)."""
    try:
        if path.stat().st_size <= max_bytes:
            return
        data = path.read_text(encoding="utf-8", errors="replace")
    except OSError:
        return
    entries = ("\n" + data).split("\n# ")
    tail = "\n# ".join(entries[-keep:]).lstrip("\n")
    if not tail.startswith("# "):
        tail = "# " + tail
    tmp = path.with_name(path.name + ".tmp")
    try:
        fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
        with os.fdopen(fd, "w", encoding="utf-8") as f:
            f.write(tail)
        os.replace(tmp, path)
    except OSError:
        pass


class SlashCompleter(Completer):
    """Command names after a leading `/` (with the space that follows a command that takes
    arguments, so one Tab on `/res` gives `/resume `), then each command's arguments."""

    def __init__(self, repl: ReplHost) -> None:
        self.repl = repl
        self._paths = PathCompleter(expanduser=True)

    def get_completions(
        self, document: Document, complete_event: CompleteEvent
    ) -> Iterator[Completion]:
        text = document.text_before_cursor
        if not text.startswith("/") or "\n" in text:
            return
        if text.lower().startswith("/mo"):
            self.repl.prefetch_models()  # /model NAME completes at once when Tab comes
        if " " not in text:
            word = text[1:].lower()
            for cmd in COMMANDS:
                if cmd.name.startswith(word):  # a space after a command that takes arguments
                    yield Completion(
                        f"/{cmd.name}{' ' if cmd.args else ''}",
                        -len(text),
                        display=f"/{cmd.name}",
                        display_meta=cmd.help,
                    )
            yield from _custom_completions(word, -len(text))
            return
        name, _, arg = text[1:].partition(" ")
        found = lookup(name.lower())
        if found is None:
            return
        cmd = found
        arg = arg.lstrip()
        if cmd.name in ("export", "attach"):
            yield from self._paths.get_completions(Document(arg), complete_event)
            return
        if cmd.complete is None:
            return
        try:
            choices = list(cmd.complete(self.repl, arg))
        except Exception:  # completion must never break typing
            return
        for value, meta in choices:
            if value.lower().startswith(arg.lower()):
                yield Completion(value, -len(arg), display_meta=meta or None)
