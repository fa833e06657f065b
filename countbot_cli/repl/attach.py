"""The REPL's `/attach` and `/mcp` commands.

`/attach PATH|URL` reads and checks the attachment at once (a refusal is one line and attaches
nothing) and holds it for the next message (`Repl.attachments`, a
`conversation.input.attachments.PendingAttachments`; the prompt shows how many are held); `/attach`
alone lists them and `/attach clear` drops them. `/mcp` lists the configured MCP servers, their
state and tools (commands/mcp.py, the body of `countbot mcp list`), starting the session's servers
if no turn has yet.
"""

from __future__ import annotations

import io
from typing import TYPE_CHECKING

from countbot_cli.commands.mcp import list_servers
from countbot_cli.conversation.input.attachments import describe
from countbot_cli.conversation.sessions.session import plural
from countbot_cli.textsafe import sanitize_line
from countbot_cli.ui.mcp import NONE_CONFIGURED

if TYPE_CHECKING:
    from countbot_cli.repl.host import ReplHost


def cmd_attach(repl: ReplHost, arg: str) -> None:
    pending = repl.attachments
    if not arg:
        if not pending:
            repl.info("Nothing attached. /attach PATH|URL attaches to the next message.")
            return
        repl.info(f"{plural(len(pending), 'attachment')} for the next message:")
        for record in pending.records():
            repl.write("  " + sanitize_line(describe(record)))
        return
    if arg.lower() == "clear":
        n = pending.clear()
        repl.info(f"Dropped {plural(n, 'attachment')}." if n else "Nothing was attached.")
        return
    engine = repl.conversation.engine
    record = pending.add(arg, engine.settings, engine.settings.provider)
    repl.info(f"{sanitize_line(describe(record))} (sent with the next message)")


def cmd_mcp(repl: ReplHost, arg: str) -> None:
    settings = repl.conversation.settings
    if not settings.mcp.servers:
        repl.info(NONE_CONFIGURED)
        return
    tools = repl.conversation.engine.tools
    running = tools.mcp if tools is not None else None
    if running is None:
        repl.info("Tools are off in this chat (--no-tools): the servers start for this list only.")
    out = io.StringIO()
    list_servers(settings, False, out, running=running)
    repl.write(out.getvalue())
