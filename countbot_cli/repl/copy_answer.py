"""`/copy [N]`: the last answer, or its N-th fenced code block, to the clipboard.

The blocks are the ones `ask -x` sees (`ui.codeblocks.code_blocks`); the copy goes out as OSC 52
on the terminal and through the platform's clipboard command when one is there
(`ui.clipboard.copy_text`, which copies what `ask -x` would print: no escape sequences or
control characters but newline and tab), and the REPL says what it copied, how, and how many
characters it removed.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from countbot_cli.conversation.sessions.session import plural
from countbot_cli.errors import UsageError
from countbot_cli.ui.clipboard import OSC52_MAX_BYTES, copy_text
from countbot_cli.ui.codeblocks import code_blocks

if TYPE_CHECKING:
    from countbot_cli.repl.host import ReplHost


def last_answer(repl: ReplHost) -> str | None:
    """The text of the conversation's last assistant message that has any."""
    for m in reversed(repl.conversation.session.messages):
        if m.role == "assistant" and m.content.strip():
            return m.content
    return None


def cmd_copy(repl: ReplHost, arg: str) -> None:
    answer = last_answer(repl)
    if answer is None:
        repl.info("There is no answer to copy yet.")
        return
    if not arg:
        text, what = answer, f"the last answer ({plural(_lines(answer), 'line')})"
    else:
        if not arg.isdigit() or int(arg) < 1:
            raise UsageError(f"/copy takes the number of a code block (1, 2, …), not {arg!r}")
        blocks = code_blocks(answer)
        n = int(arg)
        if n > len(blocks):
            have = plural(len(blocks), "code block") if blocks else "no code block"
            raise UsageError(f"the last answer has {have}: there is no block {n}")
        text, what = blocks[n - 1].code, f"code block {n} ({blocks[n - 1].describe()})"
    used, removed = copy_text(text, repl.raw_write)
    if not used:
        repl.warn(
            f"Nothing copied: {what} is over {OSC52_MAX_BYTES // 1000} kB for OSC 52 and no "
            "clipboard command (wl-copy, xclip, xsel, pbcopy) was found."
        )
        return
    note = ""
    if removed:
        note = (
            f" Removed {plural(removed, 'control character')}, as `ask -x` does: an escape "
            "sequence in it could end a bracketed paste and run the rest in your shell."
        )
    repl.info(f"Copied {what} to the clipboard ({', '.join(used)}).{note}")


def _lines(text: str) -> int:
    return text.count("\n") + (0 if text.endswith("\n") else 1)
