"""countbot on a pseudo-terminal (pexpect), for the tests that need what only a terminal shows:
prompt_toolkit's prompt and toolbar, Ctrl-C from the line discipline, approval questions.

`spawn(cb, *args)` starts the installed script in `cb`'s work folder with its environment;
`expect(child, text)` waits for `text` in the byte stream and answers prompt_toolkit's cursor
position request (ESC[6n) the way a terminal does, or it never draws the bottom toolbar. The
byte stream is not a screen: expect unique strings (or feed it to a `pyte.Screen`).
"""

from __future__ import annotations

import re
import signal

import pexpect
from cbenv import CB, COUNTBOT

CPR = "\x1b[6n"  # prompt_toolkit asks where the cursor is
CPR_ANSWER = "\x1b[1;1R"
ANSI = re.compile(r"\x1b\[[0-9;?]*[A-Za-z]")
TOOLBAR_END = "no tools"  # the last field of the REPL's bottom toolbar with tools off
ALLOW = r"Allow\? \[y\]es / \[n\]o"  # the approval question


def spawn(
    cb: CB,
    *args: str,
    env: dict[str, str] | None = None,
    cols: int = 100,
    rows: int = 40,
    timeout: float = 20,
) -> pexpect.spawn:
    """`countbot ARGS` on a `rows` x `cols` pty; `env` is added to the installation's."""
    return pexpect.spawn(
        COUNTBOT,
        list(args),
        env={**cb.env, **(env or {})},
        cwd=str(cb.work),
        dimensions=(rows, cols),
        encoding="utf-8",
        timeout=timeout,
    )


def expect(child: pexpect.spawn, text: str, timeout: float = 15) -> None:
    """expect_exact that answers cursor position requests like a real terminal."""
    while child.expect_exact([CPR, text], timeout=timeout) == 0:
        child.send(CPR_ANSWER)


def plain(text: str) -> str:
    """`text` without its colour and cursor escapes."""
    return ANSI.sub("", text)


def approval_prompt(child: pexpect.spawn) -> str:
    """Wait for the approval question; the text shown above it and the question, without
    colours."""
    child.expect(ALLOW)
    shown = plain(child.before)
    child.expect(r"\(default: no\) ")
    return shown + "Allow? [y]es / [n]o" + plain(child.before)


def finish(child: pexpect.spawn) -> tuple[int, str]:
    """Wait for the process to end; (exit code, what it wrote since the last expect, plain)."""
    child.expect(pexpect.EOF)
    rest = plain(child.before)
    child.close()
    assert child.exitstatus is not None, child.signalstatus
    return child.exitstatus, rest


def terminated(child: pexpect.spawn) -> str:
    """SIGTERM the process and wait for it to end, which must be with 130 (interrupted); what it
    wrote since the last expect, plain. The child is closed in any case."""
    try:
        child.kill(signal.SIGTERM)
        code, shown = finish(child)
    finally:
        child.close(force=True)
    assert code == 130, shown[-400:]
    return shown


def spawn_ask(
    cb: CB, *args: str, env: dict[str, str] | None = None, timeout: float = 20
) -> pexpect.spawn:
    """`countbot ask ARGS` on a 120-column pty (approval questions and their diffs fit)."""
    return spawn(cb, "ask", *args, env=env, cols=120, timeout=timeout)
