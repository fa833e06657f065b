"""The interactive approval prompt for tool calls (SPEC §6): `TerminalConfirmer`.

It shows what approving a call means (a write's diff, `exec`'s exact command and folder, every
path outside the workspace) and asks y / n (with a reason) / a (this tool for the session) /
A (saved, config/saved_allow.py) / e (edit the arguments, then asked again). The invariant:
nothing shown can hide part of a command or a diff (invisible characters escaped, long blank
runs counted, a request taller than the screen said), and keys typed before the question
appears are discarded. Plain line input, no prompt_toolkit. The answers and the rules of what
is shown: docs/design/tools.md.
"""

from __future__ import annotations

import json
import os
import shlex
import signal
import subprocess
import tempfile
import threading
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING, Any, TextIO

from countbot_cli.config import saved_allow
from countbot_cli.config.home import default_home
from countbot_cli.errors import ConfigError
from countbot_cli.jsonsafe import JSONLimitError, loads_bounded
from countbot_cli.textsafe import SGR, cells, compact, layout, visible
from countbot_cli.tools import schema as jsonschema
from countbot_cli.tools.approval import (
    HOW_DENIED_USER,
    HOW_USER_ALWAYS,
    HOW_USER_EDITED,
    HOW_USER_ONCE,
    HOW_USER_SAVED,
    Decision,
    Reprepare,
)
from countbot_cli.ui.status import BOLD, CYAN, DIM, GREEN, NO_REVERSE, RED, REVERSE, YELLOW, paint

if TYPE_CHECKING:
    from countbot_cli.tools.base import PreparedCall


MAX_ARG_CHARS = 300  # one argument's value shown in the summary of a call without a preview

EditorRunner = Callable[[list[str], str], int]  # (argv, file path) -> exit status


def check_arguments(text: str, prepared: PreparedCall) -> tuple[dict[str, Any] | None, str | None]:
    """(arguments, None) if `text` is a JSON object that passes the tool's schema, else (None, why)."""
    try:
        value = loads_bounded(text)
    except JSONLimitError as e:
        return None, str(e)
    except json.JSONDecodeError as e:
        return None, f"not valid JSON: {e.msg} at line {e.lineno} column {e.colno}"
    if not isinstance(value, dict):
        return None, f"the arguments must be a JSON object, not {type(value).__name__}"
    if prepared.spec is None:
        return value, None
    value = jsonschema.coerce(prepared.spec.parameters, value)
    problems = jsonschema.validate(prepared.spec.parameters, value)
    if problems:
        return None, "; ".join(problems)
    return value, None


def offers_always(prepared: PreparedCall) -> bool:
    """`a` is offered only for calls inside the workspace that are not shell commands and touch
    no sensitive path."""
    kind = prepared.spec.kind if prepared.spec else ""
    return kind != "exec" and not prepared.outside_paths and not prepared.sensitive


def offers_saving(prepared: PreparedCall) -> bool:
    """`A` (a lasting rule) is offered for calls inside the workspace touching no sensitive
    path, never for the memory tool; for exec it saves the exact command."""
    kind = prepared.spec.kind if prepared.spec else ""
    if kind == "exec":  # only a command shown exactly as it is (one line, nothing escaped)
        command = str((prepared.args or {}).get("command", "")).strip()
        shown_as_is = "\n" not in command and layout(visible(command), 2) == command
        return bool(command) and shown_as_is and not prepared.outside_paths
    return kind != "memory" and offers_always(prepared)


def question(prepared: PreparedCall, *, edited: bool = False, saving: bool = False) -> str:
    if edited:
        return "Run the edited call? [y]es / [n]o / [e]dit again (default: no) "
    always = " / [a]lways for this tool" if offers_always(prepared) else ""
    if saving and offers_saving(prepared):
        kind = prepared.spec.kind if prepared.spec else ""
        what = "this exact command" if kind == "exec" else "this tool"
        always += f" / [A]lways {what}, saved"
    return f"Allow? [y]es / [n]o{always} / [e]dit (default: no) "


class TerminalConfirmer:
    """Asks on a terminal. `inp`/`out` are injectable (tests use StringIO or a pty).

    before_prompt: called before anything is drawn, so a live answer region or a status line is
    settled first. editor: the command for `e` (default `$VISUAL`, then `$EDITOR`; "" means
    inline editing). run_editor: how the editor is started (tests may replace it).
    """

    def __init__(
        self,
        inp: TextIO,
        out: TextIO,
        *,
        color: bool | None = None,
        editor: str | None = None,
        before_prompt: Callable[[], None] | None = None,
        run_editor: EditorRunner | None = None,
        allow_path: Path | None = None,
    ) -> None:
        self.inp = inp
        self.out = out
        self.color = _wants_color(out) if color is None else color
        if editor is None:
            editor = os.environ.get("VISUAL") or os.environ.get("EDITOR") or ""
        self.editor = editor.strip()
        self.before_prompt = before_prompt
        self.run_editor = run_editor or self._run_editor
        self._approved_edit: tuple[str, str] | None = None  # (call id, arguments) just approved
        # where `A` saves a lasting rule: always the user's own folder, never a project's
        self.allow_path = allow_path or saved_allow.allow_file(default_home(os.environ))

    # ---- the protocol ----

    def confirm(self, prepared: PreparedCall, reprepare: Reprepare | None = None) -> Decision:
        if self._is_approved_edit(prepared):  # asked again about the edit just shown and approved
            return Decision(True, HOW_USER_EDITED)
        if self.before_prompt is not None:
            self.before_prompt()
        self._drop_typeahead()
        self._write(self.describe(prepared))
        current, edited = prepared, None
        while True:
            line = self._ask(question(current, edited=edited is not None, saving=True))
            if line is None:  # end of input: the default
                self._write("\n")
                return self._denied(None)
            word, _, rest = line.strip().partition(" ")
            if word in ("A", "a!") and edited is None and offers_saving(prepared):
                return self._save(prepared)
            word = word.lower()
            if word in ("y", "yes"):
                return self._approved(current, edited)
            if word in ("a", "always") and edited is None and offers_always(prepared):
                return Decision(True, HOW_USER_ALWAYS, always=True)
            if word in ("e", "edit"):
                args = self._edit(current)
                if args is None:
                    continue
                if reprepare is None:
                    self._write(self._paint(DIM, "  running with: " + _json(args)) + "\n")
                    return Decision(True, HOW_USER_EDITED, args=args)
                again = reprepare(prepared, args)
                if again.error:
                    self._say(f"the edited call cannot run: {visible(again.error)}")
                    continue
                current, edited = again, args
                self._write(self.describe(current, edited=True))
                continue
            if word in ("n", "no"):
                reason = rest.strip() or self._ask_reason()
                return self._denied(reason)
            if word in ("a", "always"):
                self._say("'a' is not available for this call; not run")
            return self._denied(None)

    # ---- what is shown ----

    def describe(self, prepared: PreparedCall, *, edited: bool = False) -> str:
        """The block printed above the question (already escaped and coloured)."""
        name = self._visible(prepared.call.name)
        what = [
            self._visible(r)
            for r in prepared.reasons
            if not r.startswith(("path outside the workspace", "sensitive path"))
        ]
        verb = "would run" if edited else "wants to run"
        head = f"countbot {verb} {name}" + (f" ({', '.join(what)})" if what else "")
        head += " with your edited arguments" if edited else ""
        lines = [self._paint(BOLD, layout(head + ":"))]
        body = prepared.preview.strip("\n") if prepared.preview else ""
        if body:
            lines += [self._preview_line(x) for x in compact(body.split("\n"))]
        else:
            lines += self._arg_lines(prepared.args or {})
        warnings = [f"! outside the workspace: {p}" for p in prepared.outside_paths]
        warnings += [f"! sensitive: {s}" for s in prepared.sensitive]
        lines += [self._paint(BOLD + RED, "  " + self._display(w, 2)) for w in warnings]
        if warnings:
            lines.append(self._paint(YELLOW, "  approving allows this one call only"))
        rows = _rows(lines, self._size()[0])
        if rows > self._size()[1] - 2:
            lines.append(
                self._paint(
                    BOLD + YELLOW,
                    f"  ! {rows} lines above, more than the screen shows: scroll up and read "
                    "all of it before answering",
                )
            )
        return "\n".join(lines) + "\n"

    def _visible(self, text: str) -> str:
        return visible(text, self._mark if self.color else None)

    def _display(self, text: str, col: int) -> str:
        """Untrusted `text` as shown from column `col`: escaped, tabs expanded, long runs of
        blanks counted (`layout`)."""
        return layout(self._visible(text), col, self._mark if self.color else None)

    def _mark(self, escape: str) -> str:
        return f"{REVERSE}{escape}{NO_REVERSE}"  # the line keeps its colour after it

    def _size(self) -> tuple[int, int]:
        """(columns, rows) of the terminal the prompt is drawn on; 80x24 when unknown."""
        fd = _fileno(self.out)
        if fd is not None:
            try:
                size = os.get_terminal_size(fd)
                if size.columns > 0 and size.lines > 0:
                    return size.columns, size.lines
            except OSError:
                pass
        return 80, 24

    def _preview_line(self, raw: str) -> str:
        line = "  " + self._display(raw, 2)
        if raw.startswith(("+++", "---")):
            return self._paint(BOLD, line)
        if raw.startswith("+"):
            return self._paint(GREEN, line)
        if raw.startswith("-"):
            return self._paint(RED, line)
        if raw.startswith("@@"):
            return self._paint(CYAN, line)
        if raw.startswith(("$ ", "> ")):
            return self._paint(BOLD, line)
        if raw.startswith(("(", "[")):
            return self._paint(DIM, line)
        return line

    def _arg_lines(self, args: dict[str, Any]) -> list[str]:
        out = []
        for key, value in args.items():
            text = value if isinstance(value, str) else json.dumps(value, ensure_ascii=False)
            if len(text) > MAX_ARG_CHARS:
                n = len(text) - MAX_ARG_CHARS
                text = text[:MAX_ARG_CHARS] + f"… ({n} more character{'s' if n != 1 else ''})"
            shown_key = self._display(key, 2)
            out.append(f"  {shown_key}: {self._display(text, 4 + cells(SGR.sub('', shown_key)))}")
        return out

    # ---- answers ----

    def _approved(self, current: PreparedCall, edited: dict[str, Any] | None) -> Decision:
        if edited is None:
            return Decision(True, HOW_USER_ONCE)
        self._approved_edit = (current.call.id, _json(edited))
        return Decision(True, HOW_USER_EDITED, args=edited)

    def _save(self, prepared: PreparedCall) -> Decision:
        """Approve and save the lasting rule; say where (or why it was not saved)."""
        kind = prepared.spec.kind if prepared.spec else ""
        name = prepared.call.name
        try:
            if kind == "exec":
                rule = str((prepared.args or {}).get("command", "")).strip()
                saved_allow.add_command(self.allow_path, rule)
                what = f"the command {rule!r}"
            else:
                rule = name
                saved_allow.add_tool(self.allow_path, name)
                what = f"the tool {name}"
        except ConfigError as e:
            self._say(f"not saved ({visible(str(e))}); approved this once")
            return Decision(True, HOW_USER_ONCE)
        self._say(
            f"saved: {self._visible(what)} runs without asking from now on; rule in "
            f"{self._visible(str(self.allow_path))} "
            f"(countbot config allow remove {self._visible(shlex.quote(rule))})"
        )
        return Decision(True, HOW_USER_SAVED, always=kind != "exec")

    def _is_approved_edit(self, prepared: PreparedCall) -> bool:
        """The tool loop asks again about an edited call that reaches a new path outside the
        workspace; this prompt has already shown exactly that call and had it approved."""
        key, self._approved_edit = self._approved_edit, None
        return key is not None and key == (prepared.call.id, _json(prepared.args or {}))

    def _denied(self, reason: str | None) -> Decision:
        if reason:
            why = f"the user declined this call; their reason: {reason}"
        else:
            why = "the user declined this call"
        return Decision(False, HOW_DENIED_USER, reason=why)

    def _ask_reason(self) -> str | None:
        line = self._ask("Reason for the model (optional, Enter to skip): ")
        return line.strip() if line and line.strip() else None

    def _edit(self, prepared: PreparedCall) -> dict[str, Any] | None:
        """Edited arguments that pass the schema, or None (nothing changed, or invalid)."""
        current = prepared.args or {}
        if self.editor:
            text = self._edit_in_editor(json.dumps(current, indent=2, ensure_ascii=False) + "\n")
        else:
            self._write(
                "Current arguments:\n  " + visible(json.dumps(current, ensure_ascii=False)) + "\n"
            )
            text = self._ask("New arguments as one line of JSON (Enter keeps them): ")
        if text is None or not text.strip():
            self._say("arguments unchanged")
            return None
        args, problem = check_arguments(text, prepared)
        if args is None:
            self._say(f"edited arguments not used: {problem}")
            return None
        if args == current:
            self._say("arguments unchanged")
            return None
        return args

    def _edit_in_editor(self, text: str) -> str | None:
        fd, path = tempfile.mkstemp(prefix="countbot-args-", suffix=".json")
        try:
            with os.fdopen(fd, "w", encoding="utf-8") as f:
                f.write(text)
            try:
                argv = shlex.split(self.editor)
            except ValueError as e:
                self._say(f"cannot parse the editor command {self.editor!r}: {e}")
                return None
            status = self.run_editor(argv, path)
            if status != 0:
                self._say(f"the editor exited with status {status}")
                return None
            with open(path, encoding="utf-8") as f:
                return f.read()
        except (OSError, UnicodeDecodeError) as e:
            self._say(f"editing failed: {e}")
            return None
        finally:
            try:
                os.unlink(path)
            except OSError:
                pass

    def _run_editor(self, argv: list[str], path: str) -> int:
        """Run the editor on the terminal; Ctrl-C belongs to the editor meanwhile (like git)."""
        inp, out = _fileno(self.inp), _fileno(self.out)
        previous = None
        if threading.current_thread() is threading.main_thread():
            previous = signal.signal(signal.SIGINT, signal.SIG_IGN)
        try:
            self.out.flush()
            return subprocess.call([*argv, path], stdin=inp, stdout=out, stderr=out)
        except OSError as e:
            self._say(f"cannot start the editor {argv[0]!r}: {e.strerror or e}")
            return 127
        finally:
            if previous is not None:
                signal.signal(signal.SIGINT, previous)

    # ---- terminal I/O ----

    def _ask(self, prompt: str) -> str | None:
        """One line of input, or None at end of input. Ctrl-C raises KeyboardInterrupt, after
        ending the line (the terminal echoed ^C after the question)."""
        self._write(self._paint(BOLD, prompt))
        try:
            line = self.inp.readline()
        except KeyboardInterrupt:
            self._write("\n")
            raise
        if not line:
            return None
        return line.rstrip("\r\n")

    def _drop_typeahead(self) -> None:
        """Discard keys typed before the question was shown (e.g. while the answer streamed):
        an approval must answer the prompt, not be a stray "y" and Enter typed earlier."""
        fd = _fileno(self.inp)
        if fd is None or not os.isatty(fd):
            return
        try:
            import termios

            termios.tcflush(fd, termios.TCIFLUSH)
        except (ImportError, OSError):
            pass

    def _say(self, text: str) -> None:
        self._write(self._paint(YELLOW, "  " + text) + "\n")

    def _write(self, text: str) -> None:
        self.out.write(text)
        self.out.flush()

    def _paint(self, style: str, text: str) -> str:
        return paint(style, text) if self.color else text


def _json(args: dict[str, Any]) -> str:
    return visible(json.dumps(args, ensure_ascii=False, sort_keys=True))


def _rows(lines: list[str], columns: int) -> int:
    """Terminal rows these lines take (colour codes ignored, tabs already expanded by
    `layout`, wide characters counted twice)."""
    total = 0
    for line in (row for text in lines for row in text.split("\n")):
        width = cells(SGR.sub("", line))
        total += max(1, -(-width // max(columns, 1)))
    return total


def _fileno(stream: TextIO) -> int | None:
    try:
        return stream.fileno()
    except (AttributeError, OSError, ValueError):
        return None


def _wants_color(out: TextIO) -> bool:
    """Styles on a terminal that takes them; NO_COLOR drops only the colours (ui/status.py)."""
    if os.environ.get("TERM") == "dumb":
        return False
    try:
        return out.isatty()
    except (AttributeError, ValueError):
        return False
