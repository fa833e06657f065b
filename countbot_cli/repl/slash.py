"""The REPL's slash commands (SPEC §2): one table of name, arguments, help, handler, completer.

A handler gets the running REPL (as `ReplHost`, what a handler may use of it) and the argument
text. It changes the conversation through its operations (`repl.conversation`, a
`conversation.chat.Conversation`), prints through the REPL and raises errors from errors.py for
bad input (the REPL prints them and goes on). Nothing typed here is
ever sent to the model: an unknown command says so and names the nearest ones.

The handlers of the commands on the conversation itself are in `conversation_cmds.py`; those
of a feature with its own module beside it (branching, attach, tuning, templates, copy, tidy).
"""

from __future__ import annotations

import difflib
import io
import re
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass
from typing import TYPE_CHECKING

from countbot_cli.commands.memory import memory_add, memory_search, memory_show
from countbot_cli.conversation.sessions.session import plural
from countbot_cli.errors import CountbotError, UsageError
from countbot_cli.memory.store import MemoryStore
from countbot_cli.repl.attach import cmd_attach, cmd_mcp
from countbot_cli.repl.branching import cmd_edit, cmd_fork, cmd_recap, cmd_resume, cmd_search
from countbot_cli.repl.context_view import context_report
from countbot_cli.repl.conversation_cmds import (
    cmd_delete,
    cmd_export,
    cmd_new,
    cmd_rename,
    cmd_retry,
    cmd_sessions,
    cmd_summary,
    cmd_system,
    cmd_tools,
    cmd_undo,
)
from countbot_cli.repl.copy_answer import cmd_copy
from countbot_cli.repl.help_layout import paragraph, two_columns
from countbot_cli.repl.template_cmds import cmd_skills, custom_help, run_custom
from countbot_cli.repl.tidy_cmd import cmd_memory_tidy
from countbot_cli.repl.toolbar import token_report
from countbot_cli.repl.tuning_cmds import cmd_role, cmd_set, complete_keys, complete_roles
from countbot_cli.textsafe import sanitize, sanitize_line

if TYPE_CHECKING:
    from countbot_cli.repl.host import ReplHost

Handler = Callable[["ReplHost", str], None]
ArgCompleter = Callable[["ReplHost", str], Iterable[tuple[str, str]]]  # arg text -> (value, meta)

COMMAND_RE = re.compile(r"/([A-Za-z][\w-]*)(?:\s+|$)")
KEYS_HELP = (
    "Enter sends · Alt-Enter, Esc Enter or Ctrl-J: new line · Ctrl-R: search history · "
    "Tab: complete · Ctrl-X Ctrl-E: edit in $EDITOR · Ctrl-C: stop the answer or clear the line · "
    "Ctrl-D or /exit: quit · //text sends text that starts with / · "
    "while an answer streams: Enter queues the line, Esc Enter stops the answer and sends it, "
    "Up takes back the last queued line"
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
    if cmd is None and run_custom(repl, name, arg):  # a template or a role: /NAME args
        return
    if cmd is None:
        near = nearest(name)
        hint = f"; did you mean {', '.join('/' + n for n in near)}?" if near else ""
        repl.warn(
            f"unknown command /{sanitize_line(name)}{hint} (/help lists them; nothing was sent)"
        )
        return
    cmd.handler(repl, arg)


# ---- help and the REPL itself ----


def cmd_help(repl: ReplHost, arg: str) -> None:
    width = max(20, repl.columns() - 1)  # the last column left free: no terminal wraps there
    if arg:
        cmd = lookup(arg.lstrip("/").lower())
        if cmd is None:
            raise UsageError(f"no command /{sanitize_line(arg.lstrip('/'))}")
        lines = paragraph(f"/{cmd.name} {cmd.args}".rstrip(), width, "  ", first="")
        repl.write("\n".join(lines + paragraph(cmd.help, width, "  ")) + "\n")
        return
    rows = two_columns([(f"/{c.name} {c.args}".rstrip(), c.help) for c in COMMANDS], width)
    keys = paragraph("Keys: " + KEYS_HELP, width, "  ", first="")
    repl.write("\n".join(["Commands:", *rows, "", custom_help(width), *keys]) + "\n")


def cmd_last_tool(repl: ReplHost, arg: str) -> None:
    last = repl.tool_outputs.last()
    if last is None:
        repl.info("No tool has run in this REPL yet.")
        return
    call, output = last
    repl.info(f"⚙ {call}")
    repl.write(sanitize(output) + "\n")


def cmd_clear(repl: ReplHost, arg: str) -> None:
    repl.clear_screen()


def cmd_exit(repl: ReplHost, arg: str) -> None:
    repl.request_exit()


# ---- model ----


def cmd_model(repl: ReplHost, arg: str) -> None:
    if not arg:
        names = repl.model_names(refresh=True, quiet=False)
        current = repl.conversation.provider.model
        for name in names:
            repl.write(f"{'*' if name == current else ' '} {sanitize_line(name)}\n")
        repl.info(f"current: {sanitize_line(current)} · /model NAME switches")
        return
    if len(arg.split()) != 1:
        raise UsageError("usage: /model NAME (a model name has no spaces)")
    known = repl.model_names()
    repl.conversation.switch_model(arg)
    repl.meter.reset()  # the last usage was reported for the other model
    note = "" if not known or arg in known else " (not in the provider's model list)"
    repl.info(f"Model: {sanitize_line(arg)}{note}.")


# ---- memory and context ----


def cmd_memory(repl: ReplHost, arg: str) -> None:
    sub, _, rest = arg.partition(" ")
    rest = rest.strip()
    out = io.StringIO()
    store = MemoryStore(repl.conversation.settings.memory.file)
    if not sub:
        memory_show(store, out, tail=10)
    elif sub == "search" and rest:
        memory_search(store, rest.split(), out)
    elif sub == "add" and rest:
        memory_add(store, rest, out)
    elif sub == "tidy":
        return cmd_memory_tidy(repl)
    elif sub == "tail":
        if rest and not rest.isdigit():
            raise UsageError("usage: /memory tail N")
        memory_show(store, out, tail=int(rest) if rest else 10)
    else:
        raise UsageError("usage: /memory [search WORDS | add TEXT | tail N | tidy]")
    repl.write(out.getvalue())
    if sub == "add":
        repl.meter.invalidate()


def cmd_tokens(repl: ReplHost, arg: str) -> None:
    repl.write(token_report(repl.meter, repl.conversation))


def cmd_context(repl: ReplHost, arg: str) -> None:
    repl.write(context_report(repl.meter, repl.conversation))


def cmd_compact(repl: ReplHost, arg: str) -> None:
    try:
        lines = repl.conversation.compact()
    except CountbotError as exc:
        repl.info(f"Could not compact: {exc.user_message()}; the messages stay in the history.")
        return
    repl.meter.invalidate()
    archived = getattr(lines, "archived", 0)
    if not lines and not archived:
        repl.info("Nothing to compact.")
        return
    for note in getattr(lines, "notes", []):
        repl.info(note)
    if lines:
        repl.write("".join(sanitize(line).rstrip("\n") + "\n" for line in lines))
    else:
        left = plural(archived, "message")
        repl.info(f"{left} left the history window; nothing in them to keep in memory.")


# ---- completion of arguments ----


def _sessions(repl: ReplHost, arg: str) -> Iterator[tuple[str, str]]:
    for head in repl.conversation.store.list()[:200]:
        when = str(head.get("updated_at") or "")[:16].replace("T", " ")
        n = plural(head.get("message_count", 0), "msg")
        yield head["id"], f"{sanitize_line(head['title'])[:40]} · {n} · {when}"


def _models(repl: ReplHost, arg: str) -> Iterator[tuple[str, str]]:
    current = repl.conversation.provider.model
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
    Command(
        "resume",
        "[ID|WORDS]",
        "switch to a saved conversation (no id or words: a picker that filters as you type)",
        cmd_resume,
        _sessions,
    ),
    Command("recap", "", "what this conversation is about (its summary)", cmd_recap),
    Command("search", "WORDS", "find conversations by what was said in them", cmd_search),
    Command("fork", "[N]", "copy this conversation up to message N into a new one", cmd_fork),
    Command("rename", "TITLE", "rename this conversation", cmd_rename),
    Command("delete", "[ID]", "delete a conversation (this one by default)", cmd_delete, _sessions),
    Command("model", "[NAME]", "list the provider's models, or switch", cmd_model, _models),
    Command(
        "set",
        "[KEY [VALUE]]",
        "per-call option for the rest of the chat (as -o), or editing_mode, enter, notify; "
        "KEY alone removes it; alone: list",
        cmd_set,
        complete_keys,
    ),
    Command(
        "role",
        "[NAME|none]",
        "switch the chat's role (roles/NAME.md); alone: list",
        cmd_role,
        complete_roles,
    ),
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
        "[search WORDS|add TEXT|tail N|tidy]",
        "long-term memory (MEMORY.md)",
        cmd_memory,
        _words(
            ("search", "find entries"),
            ("add", "remember a fact"),
            ("tail", "the last N entries"),
            ("tidy", "merge, supersede, drop lines"),
        ),
    ),
    Command("tokens", "", "what the next request holds, against the context window", cmd_tokens),
    Command(
        "context",
        "",
        "what went into the last request: prompt parts, memory, window, tools, cached prefix",
        cmd_context,
    ),
    Command("compact", "", "summarise old messages out of the history window now", cmd_compact),
    Command("retry", "", "ask the last question again", cmd_retry),
    Command("undo", "", "remove the last exchange", cmd_undo),
    Command("edit", "[TEXT]", "change the last question and ask it again", cmd_edit),
    Command(
        "export",
        "[FILE] [--format md|json]",
        "write this conversation to FILE: .md markdown, .json JSON (or --format)",
        cmd_export,
    ),
    Command(
        "attach",
        "[PATH|URL|clear]",
        "attach a file, image, PDF or web page to the next message; alone: list them",
        cmd_attach,
    ),
    Command("mcp", "", "MCP servers: state, tools, which run without asking", cmd_mcp),
    Command(
        "tools",
        "[ask|auto|off]",
        "show or set the approval mode (ask and off revoke [a]lways approvals)",
        cmd_tools,
        _words(
            ("ask", "ask before changes"), ("auto", "allow file changes"), ("off", "no changes")
        ),
    ),
    Command(
        "skills",
        "",
        "the skills the model may read (skills/NAME/SKILL.md); left-out ones",
        cmd_skills,
    ),
    Command("last-tool", "", "the full output of the last tool call", cmd_last_tool),
    Command("copy", "[N]", "copy the last answer, or its N-th code block", cmd_copy),
    Command("clear", "", "clear the screen", cmd_clear),
    Command("exit", "", "quit (Ctrl-D too)", cmd_exit, aliases=("quit",)),
)
