"""Slash commands that branch and find conversations: /fork, /edit, /resume, /recap, /search.

`/fork [N]` copies this conversation up to message N (all of it by default) into a new
session and goes on there; the original stays as it was. `/edit` puts the last question back
on the prompt to change (Ctrl-X Ctrl-E opens it in $EDITOR) and asks it again in place of the
last exchange. `/resume` with no id, or with words that are not an id, opens the session picker
(ui/session_picker.py); `/recap` prints what the conversation is about (its summary, yours or
the rolling one: what a resume shows above the last exchanges); `/search WORDS` lists the
sessions that hold the words. The table rows
are in slash.py.
"""

from __future__ import annotations

import io
from typing import TYPE_CHECKING

from countbot_cli.commands.session_search import sessions_search
from countbot_cli.conversation.sessions.session import plural
from countbot_cli.errors import UsageError
from countbot_cli.memory.session_meaning import MeaningSearch
from countbot_cli.textsafe import sanitize_line
from countbot_cli.ui.transcript import recap

if TYPE_CHECKING:
    from countbot_cli.repl.host import ReplHost


def cmd_fork(repl: ReplHost, arg: str) -> None:
    c = repl.conversation
    if arg and not arg.isdigit():
        raise UsageError("usage: /fork [N] (copy messages 1..N into a new session; all by default)")
    if c.is_new and not c.session.messages:
        raise UsageError("this conversation has no messages yet: there is nothing to fork")
    before = c.session.id if not c.is_new else None
    fork = c.fork(int(arg) if arg else None)
    repl.meter.invalidate()
    title = sanitize_line(fork.title) or "(untitled)"
    kept = plural(len(fork.messages), "message")
    repl.info(f"Forked into session {fork.id} “{title}” ({kept}); you are in the fork now.")
    if before:
        repl.info(f"The original is unchanged: /resume {before} goes back to it.")


def cmd_edit(repl: ReplHost, arg: str) -> None:
    c = repl.conversation
    last = c.last_question()
    if last is None:
        repl.info("Nothing to edit: no question asked in this conversation yet.")
        return
    if not arg:
        repl.info("Edit the question, then Enter asks it (Ctrl-C clears; empty cancels).")
    text = arg or repl.edit_text(last[0].content)
    if text is None or not text.strip():
        repl.info("Edit cancelled; the conversation is unchanged.")
        return
    repl.info("Asking the edited question (the last exchange is replaced).")
    repl.turn(lambda view: c.edit(text.strip("\n"), view))


def cmd_resume(repl: ReplHost, arg: str) -> None:
    c = repl.conversation
    ref: str | None = arg if arg and len(arg.split()) == 1 else None
    if ref is not None:
        try:
            ref = c.store.resolve(ref)
        except UsageError:  # not an id: words to look for
            ref = None
    if ref is None:
        ref = repl.pick_session(arg)
        if ref is None:
            repl.info("Nothing resumed.")
            return
    revoked = c.resume(ref)
    repl.meter.reset()
    repl.show_recent()
    if revoked:
        repl.info(f"Session approvals revoked: {', '.join(revoked)} (asks again before running).")


def cmd_search(repl: ReplHost, arg: str) -> None:
    if not arg.split():
        raise UsageError("usage: /search WORDS (sessions holding the words; /resume WORDS picks)")
    c = repl.conversation
    out = io.StringIO()
    search = MeaningSearch(c.store, on_notice=repl.info, wait=c.settings.memory.recall_wait)
    sessions_search(search, arg.split(), out)
    repl.write(out.getvalue())
    repl.info("/resume ID switches to one")


def cmd_recap(repl: ReplHost, arg: str) -> None:
    said = recap(repl.conversation.session)
    if said is None:
        repl.info(
            "No recap yet: this conversation has no summary (one is made when its oldest "
            "messages leave the history window; /summary TEXT sets your own)."
        )
        return
    repl.info(said)
