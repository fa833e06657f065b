"""The slash commands on the conversation itself (SPEC §2): `/new`, `/sessions`, `/rename`,
`/delete`, `/retry`, `/undo`, `/export`, `/system`, `/summary` and `/tools` (the approval mode).
Each calls one operation of `repl.conversation` and says what it did; the table that names them
is `slash.py`.
"""

from __future__ import annotations

import io
from pathlib import Path
from typing import TYPE_CHECKING

from countbot_cli.commands.sessions import export_format, sessions_export, sessions_list
from countbot_cli.config import saved_allow
from countbot_cli.conversation.sessions.session import plural
from countbot_cli.errors import UsageError
from countbot_cli.textsafe import sanitize, sanitize_line

if TYPE_CHECKING:
    from countbot_cli.repl.host import ReplHost


def cmd_new(repl: ReplHost, arg: str) -> None:
    revoked = repl.conversation.new(arg)
    repl.meter.reset()
    repl.info("New conversation" + (f" “{sanitize_line(arg)}”" if arg else "") + ".")
    _note_revoked(repl, revoked)


def cmd_sessions(repl: ReplHost, arg: str) -> None:
    if arg and not (arg.isdigit() and int(arg) > 0):
        raise UsageError("usage: /sessions [N] (show the N most recent; 20 by default)")
    c = repl.conversation
    out = io.StringIO()
    sessions_list(c.store, out, limit=int(arg) if arg else 20)
    repl.write(out.getvalue())
    current = "not saved yet" if c.is_new else c.session.id
    repl.info(f"current: {current} · /resume ID switches")


def _note_revoked(repl: ReplHost, names: list[str]) -> None:
    if names:
        repl.info(f"Session approvals revoked: {', '.join(names)} (asks again before running).")


def cmd_rename(repl: ReplHost, arg: str) -> None:
    if not arg.split():
        raise UsageError("usage: /rename TITLE")
    title = repl.conversation.rename(arg)
    repl.info(f"Renamed to “{sanitize_line(title)}”.")


def cmd_delete(repl: ReplHost, arg: str) -> None:
    c = repl.conversation
    if not arg and c.is_new:
        raise UsageError("this conversation is not saved yet: there is nothing to delete")
    sid = c.store.resolve(arg) if arg else c.session.id
    head = next((h for h in c.store.list() if h["id"] == sid), None)
    title = sanitize_line(head["title"]) if head else ""
    count = head["message_count"] if head else 0
    if not repl.confirm(
        f"Delete session {sid} “{title or '(untitled)'}” ({plural(count, 'message')})?"
    ):
        repl.info("Nothing deleted.")
        return
    current = c.delete(sid)
    repl.info(f"Deleted {sid}.")
    if current:
        repl.meter.reset()
        repl.info("New conversation.")


def cmd_retry(repl: ReplHost, arg: str) -> None:
    """Ask the last question again (the conversation replaces the earlier attempt)."""
    last = repl.conversation.last_question()
    if last is None:
        repl.info("Nothing to retry.")
        return
    if last[1]:
        repl.info("Asking again (the failed or interrupted attempt is replaced).")
    else:
        repl.info("Asking again (the previous answer is replaced).")
    repl.turn(repl.conversation.retry)


def cmd_undo(repl: ReplHost, arg: str) -> None:
    removed = repl.conversation.undo()
    repl.meter.invalidate()
    if not removed:
        repl.info("Nothing to undo.")
        return
    first = next((m.content for m in removed if m.role == "user"), "")
    repl.info(
        f"Removed the last exchange ({plural(len(removed), 'message')}): “{_clip(first, 60)}”"
    )


def cmd_export(repl: ReplHost, arg: str) -> None:
    c = repl.conversation
    if c.is_new:
        raise UsageError("this conversation is not saved yet: there is nothing to export")
    words = arg.split()
    fmt: str | None = None
    if "--format" in words:  # /export [FILE] [--format md|json]
        at = words.index("--format")
        if at + 1 >= len(words):
            raise UsageError("usage: /export [FILE] [--format md|json]")
        fmt = words[at + 1]
        arg = " ".join(words[:at] + words[at + 2 :])
    name = f"countbot-{c.session.id}.{fmt or 'md'}"
    path = Path(arg).expanduser() if arg else Path(name)
    if path.is_dir():
        path = path / name
    fmt = export_format(path, fmt)  # an unknown extension is refused before anything is asked
    if path.exists() and not repl.confirm(f"{path} exists. Overwrite it?"):
        repl.info("Nothing exported.")
        return
    out = io.StringIO()
    sessions_export(c.store, c.session.id, fmt=fmt, output=path, out=out, force=True)  # asked above
    repl.info(out.getvalue().strip())


def cmd_system(repl: ReplHost, arg: str) -> None:
    """The conversation's extra instructions, kept in its session file (they win over --system);
    `clear` removes them, and --system's text too for the rest of this conversation."""
    c = repl.conversation
    if not arg:
        current = c.system
        repl.info(
            f"Extra instructions: {sanitize(current)}"
            if current
            else "No extra instructions (/system TEXT sets them)."
        )
        return
    text = "" if arg.lower() == "clear" else arg
    c.set_system(text)  # saved with the first turn while the conversation is new
    if not text:
        repl.info("Extra instructions cleared.")
    else:
        repl.info("Extra instructions set for this conversation (kept when it is resumed).")
    repl.meter.invalidate()


def cmd_summary(repl: ReplHost, arg: str) -> None:
    if not arg:
        text = repl.conversation.session.summary
        none = "No summary of yours (/summary TEXT sets one; /recap shows the rolling one)."
        repl.info(f"Summary: {sanitize(text)}" if text else none)
        return
    text = "" if arg.lower() == "clear" else arg
    repl.conversation.set_summary(text)
    repl.info("Summary cleared." if not text else "Summary saved.")
    repl.meter.invalidate()


def cmd_tools(repl: ReplHost, arg: str) -> None:
    c = repl.conversation
    policy = c.policy
    if not arg:
        if c.engine.tool_schemas():
            offered = "offered to the model"
        elif c.engine.tools is not None:
            offered = "not offered: this model cannot take tools"
        else:
            offered = "not offered (--no-tools or config)"
        repl.info(f"Tools: {offered} · approval mode {policy.mode} (/tools ask|auto|off)")
        if policy.yes_writes:
            repl.info("--yes: file writes and edits run without asking; shell commands still ask")
        granted = sorted(policy.session_allowed)
        if granted:
            repl.info(
                f"Allowed for this session without asking: {', '.join(granted)} (/tools ask revokes)"
            )
        saved_file = c.settings.tools.saved_file
        if saved_file is not None and (line := saved_allow.summary(saved_file)):
            repl.info(sanitize_line(line))
        return
    mode, revoked = c.set_tool_mode(arg)
    what = {
        "ask": "changes need your approval",
        "auto": "file writes and edits run without asking; shell commands still ask",
        "off": "nothing that changes files or runs commands is allowed",
    }[mode]
    repl.info(f"Tool mode: {mode} ({what}).")
    _note_revoked(repl, revoked)


def _clip(text: str, limit: int) -> str:
    line = sanitize_line(text)
    return line if len(line) <= limit else line[: limit - 1] + "…"
