"""The REPL's slash commands (SPEC §2): one table of name, arguments, help, handler, completer.

A handler gets the running REPL (as `ReplHost`, what a handler may use of it) and the argument
text. It prints through the REPL and raises
errors from errors.py for bad input (the REPL prints them and goes on). Nothing typed here is
ever sent to the model: an unknown command says so and names the nearest ones.
"""

from __future__ import annotations

import difflib
import io
import re
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

from countbot_cli.conversation.session import plural
from countbot_cli.errors import CountbotError, UsageError
from countbot_cli.textsafe import sanitize, sanitize_line

if TYPE_CHECKING:
    from countbot_cli.conversation.session import Session
    from countbot_cli.messages import Message
    from countbot_cli.repl.host import ReplHost

Handler = Callable[["ReplHost", str], None]
ArgCompleter = Callable[["ReplHost", str], Iterable[tuple[str, str]]]  # arg text -> (value, meta)

COMMAND_RE = re.compile(r"/([A-Za-z][\w-]*)(?:\s+|$)")
TOOL_MODES = ("ask", "auto", "off")
KEYS_HELP = (
    "Enter sends · Alt-Enter, Esc Enter or Ctrl-J: new line · Ctrl-R: search history · "
    "Tab: complete · Ctrl-X Ctrl-E: edit in $EDITOR · Ctrl-C: stop the answer or clear the line · "
    "Ctrl-D or /exit: quit · //text sends text that starts with /"
)


@dataclass(frozen=True)
class Command:
    name: str
    args: str
    help: str
    handler: Handler
    complete: ArgCompleter | None = None
    aliases: tuple[str, ...] = ()


def parse(line: str) -> tuple[str, str] | None:
    """(name, argument text) when `line` is shaped like a slash command, else None."""
    text = line.strip()
    m = COMMAND_RE.match(text)
    if m is None:
        return ("", "") if text == "/" else None
    return m.group(1).lower(), text[m.end() :].strip()


def lookup(name: str) -> Command | None:
    for cmd in COMMANDS:
        if name == cmd.name or name in cmd.aliases:
            return cmd
    return None


def nearest(name: str) -> list[str]:
    names = [c.name for c in COMMANDS]
    found = [n for n in names if name and n.startswith(name)]
    found += [n for n in difflib.get_close_matches(name, names, n=3, cutoff=0.5) if n not in found]
    return found[:3]


def dispatch(repl: ReplHost, line: str) -> None:
    parsed = parse(line)
    name, arg = parsed if parsed is not None else ("", "")
    cmd = lookup(name) if name else lookup("help")
    if cmd is None:
        near = nearest(name)
        hint = f"; did you mean {', '.join('/' + n for n in near)}?" if near else ""
        repl.warn(
            f"unknown command /{sanitize_line(name)}{hint} (/help lists them; nothing was sent)"
        )
        return
    cmd.handler(repl, arg)


# ---- conversation ----


def cmd_help(repl: ReplHost, arg: str) -> None:
    if arg:
        cmd = lookup(arg.lstrip("/").lower())
        if cmd is None:
            raise UsageError(f"no command /{sanitize_line(arg.lstrip('/'))}")
        repl.write(f"/{cmd.name} {cmd.args}".rstrip() + f"\n  {cmd.help}\n")
        return
    width = max(len(f"/{c.name} {c.args}") for c in COMMANDS)
    rows = [f"  {f'/{c.name} {c.args}'.ljust(width)}  {c.help}" for c in COMMANDS]
    repl.write("Commands:\n" + "\n".join(rows) + "\n\nKeys: " + KEYS_HELP + "\n")


def cmd_new(repl: ReplHost, arg: str) -> None:
    granted = sorted(repl.engine.policy.session_allowed)
    repl.start_new(arg)
    repl.info("New conversation" + (f" “{sanitize_line(arg)}”" if arg else "") + ".")
    _note_revoked(repl, granted)


def cmd_sessions(repl: ReplHost, arg: str) -> None:
    from countbot_cli.ui.sessions import sessions_list

    if arg and not (arg.isdigit() and int(arg) > 0):
        raise UsageError("usage: /sessions [N] (show the N most recent; 20 by default)")
    out = io.StringIO()
    sessions_list(repl.store, out, limit=int(arg) if arg else 20)
    repl.write(out.getvalue())
    current = "not saved yet" if repl.is_new else repl.session.id
    repl.info(f"current: {current} · /resume ID switches")


def cmd_resume(repl: ReplHost, arg: str) -> None:
    if not arg:
        raise UsageError("usage: /resume ID (a unique prefix or 'latest'; /sessions lists them)")
    granted = sorted(repl.engine.policy.session_allowed)
    repl.resume(repl.store.resolve(arg))
    _note_revoked(repl, granted)


def _note_revoked(repl: ReplHost, names: list[str]) -> None:
    if names:
        repl.info(f"Session approvals revoked: {', '.join(names)} (asks again before running).")


def cmd_rename(repl: ReplHost, arg: str) -> None:
    title = " ".join(arg.split())
    if not title:
        raise UsageError("usage: /rename TITLE")
    if repl.is_new:
        repl.session.title = title
    else:
        repl.store.rename(repl.session.id, title)
        repl.reload()
    repl.info(f"Renamed to “{sanitize_line(title)}”.")


def cmd_delete(repl: ReplHost, arg: str) -> None:
    if not arg and repl.is_new:
        raise UsageError("this conversation is not saved yet: there is nothing to delete")
    sid = repl.store.resolve(arg) if arg else repl.session.id
    head = next((h for h in repl.store.list() if h["id"] == sid), None)
    title = sanitize_line(head["title"]) if head else ""
    count = head["message_count"] if head else 0
    if not repl.confirm(
        f"Delete session {sid} “{title or '(untitled)'}” ({plural(count, 'message')})?"
    ):
        repl.info("Nothing deleted.")
        return
    repl.store.delete(sid)
    repl.info(f"Deleted {sid}.")
    if sid == repl.session.id and not repl.is_new:
        repl.start_new("")
        repl.info("New conversation.")


def cmd_retry(repl: ReplHost, arg: str) -> None:
    """Ask the last question again. A failed or interrupted attempt is replaced by the engine
    (`replaces=`) and left out of the request; a good answer is removed first."""
    msgs = repl.session.messages
    idx = last_user_index(msgs)
    if repl.is_new or idx is None:
        repl.info("Nothing to retry.")
        return
    user, after = msgs[idx], msgs[idx + 1 :]
    if user.status is not None or any(m.status is not None for m in after):
        repl.info("Asking again (the failed or interrupted attempt is replaced).")
        repl.send(user.content, replaces=user.id)
        return
    undo_last(repl)
    repl.info("Asking again (the previous answer is replaced).")
    repl.send(user.content)


def undo_last(repl: ReplHost) -> list[Message]:
    """Remove the last exchange (the last user message and all after it) from the session file."""
    if repl.is_new or last_user_index(repl.session.messages) is None:
        return []

    def apply(s: Session) -> list[Message]:
        idx = last_user_index(s.messages)
        if idx is None:
            return []
        removed, s.messages = s.messages[idx:], s.messages[:idx]
        gone = {m.id for m in removed}
        s.tool_conversations = [r for r in s.tool_conversations if r.get("message_id") not in gone]
        return removed

    removed = repl.store.update(repl.session.id, apply)
    repl.reload()
    repl.meter.invalidate()
    return removed


def last_user_index(messages: list[Message]) -> int | None:
    for i in range(len(messages) - 1, -1, -1):
        if messages[i].role == "user":
            return i
    return None


def cmd_undo(repl: ReplHost, arg: str) -> None:
    removed = undo_last(repl)
    if not removed:
        repl.info("Nothing to undo.")
        return
    first = next((m.content for m in removed if m.role == "user"), "")
    repl.info(
        f"Removed the last exchange ({plural(len(removed), 'message')}): “{_clip(first, 60)}”"
    )


def cmd_export(repl: ReplHost, arg: str) -> None:
    from countbot_cli.ui.sessions import sessions_export

    if repl.is_new:
        raise UsageError("this conversation is not saved yet: there is nothing to export")
    path = Path(arg).expanduser() if arg else Path(f"countbot-{repl.session.id}.md")
    if path.is_dir():
        path = path / f"countbot-{repl.session.id}.md"
    if path.exists() and not repl.confirm(f"{path} exists. Overwrite it?"):
        repl.info("Nothing exported.")
        return
    fmt = "json" if path.suffix.lower() == ".json" else "md"
    out = io.StringIO()
    sessions_export(repl.store, repl.session.id, fmt=fmt, output=path, out=out)
    repl.info(out.getvalue().strip())


def cmd_last_tool(repl: ReplHost, arg: str) -> None:
    if repl.last_tool is None:
        repl.info("No tool has run in this REPL yet.")
        return
    call, output = repl.last_tool
    repl.info(f"⚙ {call}")
    repl.write(sanitize(output) + "\n")


def cmd_clear(repl: ReplHost, arg: str) -> None:
    repl.clear_screen()


def cmd_exit(repl: ReplHost, arg: str) -> None:
    repl.request_exit()


# ---- model and prompt ----


def cmd_model(repl: ReplHost, arg: str) -> None:
    if not arg:
        names = repl.model_names(refresh=True, quiet=False)
        current = repl.engine.provider.model
        for name in names:
            repl.write(f"{'*' if name == current else ' '} {sanitize_line(name)}\n")
        repl.info(f"current: {sanitize_line(current)} · /model NAME switches")
        return
    if len(arg.split()) != 1:
        raise UsageError("usage: /model NAME (a model name has no spaces)")
    known = repl.model_names()
    repl.switch_model(arg)
    note = "" if not known or arg in known else " (not in the provider's model list)"
    repl.info(f"Model: {sanitize_line(arg)}{note}.")


def cmd_system(repl: ReplHost, arg: str) -> None:
    """The conversation's extra instructions, kept in its session file (they win over --system);
    `clear` removes them, and --system's text too for the rest of this conversation."""
    if not arg:
        current = repl.session.system or repl.engine.system_override
        repl.info(
            f"Extra instructions: {sanitize(current)}"
            if current
            else "No extra instructions (/system TEXT sets them)."
        )
        return
    text = "" if arg.lower() == "clear" else arg
    if repl.is_new:  # saved with the first turn
        repl.session.system = text
    else:
        repl.store.update(repl.session.id, lambda s: setattr(s, "system", text))
        repl.reload()
    if not text:
        repl.engine.system_override = None
        repl.info("Extra instructions cleared.")
    else:
        repl.info("Extra instructions set for this conversation (kept when it is resumed).")
    repl.meter.invalidate()


def cmd_summary(repl: ReplHost, arg: str) -> None:
    if not arg:
        text = repl.session.summary
        repl.info(f"Summary: {sanitize(text)}" if text else "No summary (/summary TEXT sets one).")
        return
    text = "" if arg.lower() == "clear" else arg
    if repl.is_new:
        repl.session.summary = text
    else:
        repl.store.set_summary(repl.session.id, text)
        repl.reload()
    repl.info("Summary cleared." if not text else "Summary saved.")
    repl.meter.invalidate()


def cmd_tools(repl: ReplHost, arg: str) -> None:
    policy = repl.engine.policy
    if not arg:
        if repl.engine.tool_schemas():
            offered = "offered to the model"
        elif repl.engine.tools is not None:
            offered = "not offered: this model cannot take tools"
        else:
            offered = "not offered (--no-tools or config)"
        repl.info(f"Tools: {offered} · approval mode {policy.mode} (/tools ask|auto|off)")
        granted = sorted(policy.session_allowed)
        if granted:
            repl.info(
                f"Allowed for this session without asking: {', '.join(granted)} (/tools ask revokes)"
            )
        return
    mode = arg.lower()
    if mode not in TOOL_MODES:
        raise UsageError(f"unknown tool mode '{sanitize_line(arg)}'", hint="use ask, auto or off")
    policy.mode = mode
    revoked = policy.revoke_session() if mode != "auto" else []
    what = {
        "ask": "changes need your approval",
        "auto": "file writes and edits run without asking; shell commands still ask",
        "off": "nothing that changes files or runs commands is allowed",
    }[mode]
    repl.info(f"Tool mode: {mode} ({what}).")
    _note_revoked(repl, revoked)


# ---- memory and context ----


def cmd_memory(repl: ReplHost, arg: str) -> None:
    from countbot_cli.ui.memory import memory_add, memory_search, memory_show

    sub, _, rest = arg.partition(" ")
    rest = rest.strip()
    out = io.StringIO()
    store = repl.memory()
    if not sub:
        memory_show(store, out, tail=10)
    elif sub == "search" and rest:
        memory_search(store, rest.split(), out)
    elif sub == "add" and rest:
        memory_add(store, rest, out)
    elif sub == "tail":
        if rest and not rest.isdigit():
            raise UsageError("usage: /memory tail N")
        memory_show(store, out, tail=int(rest) if rest else 10)
    else:
        raise UsageError("usage: /memory [search WORDS | add TEXT | tail N]")
    repl.write(out.getvalue())
    if sub == "add":
        repl.meter.invalidate()


def cmd_tokens(repl: ReplHost, arg: str) -> None:
    from countbot_cli.repl.toolbar import token_report

    repl.write(token_report(repl.meter, repl.engine, repl.session))


def cmd_compact(repl: ReplHost, arg: str) -> None:
    hook = repl.compact_hook()
    if hook is None or repl.is_new:
        repl.info("Nothing to compact.")
        return
    try:
        lines = hook(repl.session.id)
    except CountbotError as exc:
        repl.info(f"Could not compact: {exc.user_message()}; the messages stay in the history.")
        return
    repl.reload()
    repl.meter.invalidate()
    if not lines:
        repl.info("Nothing to compact.")
        return
    repl.write("".join(sanitize(line).rstrip("\n") + "\n" for line in lines))


def _clip(text: str, limit: int) -> str:
    line = sanitize_line(text)
    return line if len(line) <= limit else line[: limit - 1] + "…"


# ---- completion of arguments ----


def _sessions(repl: ReplHost, arg: str) -> Iterator[tuple[str, str]]:
    for head in repl.store.list()[:200]:
        when = str(head.get("updated_at") or "")[:16].replace("T", " ")
        n = plural(head.get("message_count", 0), "msg")
        yield head["id"], f"{sanitize_line(head['title'])[:40]} · {n} · {when}"


def _models(repl: ReplHost, arg: str) -> Iterator[tuple[str, str]]:
    current = repl.engine.provider.model
    for name in repl.model_names():
        yield name, "current" if name == current else ""


def _words(*pairs: tuple[str, str]) -> ArgCompleter:
    def complete(repl: ReplHost, arg: str) -> Iterable[tuple[str, str]]:
        return pairs if " " not in arg else ()

    return complete


COMMANDS: tuple[Command, ...] = (
    Command("help", "[COMMAND]", "commands and keys", cmd_help),
    Command("new", "[TITLE]", "start a new conversation", cmd_new),
    Command("sessions", "[N]", "list saved conversations", cmd_sessions),
    Command("resume", "ID", "switch to a saved conversation", cmd_resume, _sessions),
    Command("rename", "TITLE", "rename this conversation", cmd_rename),
    Command("delete", "[ID]", "delete a conversation (this one by default)", cmd_delete, _sessions),
    Command("model", "[NAME]", "list the provider's models, or switch", cmd_model, _models),
    Command(
        "system",
        "[TEXT|clear]",
        "extra instructions for this conversation (saved with it)",
        cmd_system,
        _words(("clear", "remove them")),
    ),
    Command(
        "summary",
        "[TEXT|clear]",
        "show, set or clear the session summary",
        cmd_summary,
        _words(("clear", "remove it")),
    ),
    Command(
        "memory",
        "[search WORDS|add TEXT|tail N]",
        "long-term memory (MEMORY.md)",
        cmd_memory,
        _words(
            ("search", "find entries"), ("add", "remember a fact"), ("tail", "the last N entries")
        ),
    ),
    Command("tokens", "", "what the next request holds, against the context window", cmd_tokens),
    Command("compact", "", "summarise old messages out of the history window now", cmd_compact),
    Command("retry", "", "ask the last question again", cmd_retry),
    Command("undo", "", "remove the last exchange", cmd_undo),
    Command("export", "[FILE]", "write this conversation as markdown (.json: JSON)", cmd_export),
    Command(
        "tools",
        "[ask|auto|off]",
        "show or set the approval mode (ask and off revoke [a]lways approvals)",
        cmd_tools,
        _words(
            ("ask", "ask before changes"), ("auto", "allow file changes"), ("off", "no changes")
        ),
    ),
    Command("last-tool", "", "the full output of the last tool call", cmd_last_tool),
    Command("clear", "", "clear the screen", cmd_clear),
    Command("exit", "", "quit (Ctrl-D too)", cmd_exit, aliases=("quit",)),
)
