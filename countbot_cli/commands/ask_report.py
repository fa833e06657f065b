"""What `ask` leaves behind, the end of its body (commands/ask.py): the --json object, the line
after the answer on a terminal, the exit code (and -x's code or --schema's value on stdout), and
the `status` scripts read, which agrees with the exit code; `print_error`, every command's."""

from __future__ import annotations

import os
import traceback
from typing import TYPE_CHECKING, Any, Protocol, TextIO

from countbot_cli.errors import (
    EXIT_EMPTY_ANSWER,
    EXIT_INTERRUPTED,
    EXIT_MAX_ITERATIONS,
    CountbotError,
    UnexpectedError,
)
from countbot_cli.textsafe import json_text, sanitize
from countbot_cli.ui.codeblocks import extracted
from countbot_cli.ui.status import dim
from countbot_cli.ui.terminal import isatty

if TYPE_CHECKING:
    from countbot_cli.conversation.structured import Structured
    from countbot_cli.provider import Provider


class AskOptions(Protocol):
    """What of `ask`'s options decides its output (commands.ask.AskOptions)."""

    @property
    def json_out(self) -> bool: ...
    @property
    def jsonl(self) -> bool: ...
    @property
    def extract(self) -> str | None: ...
    @property
    def schema(self) -> str | None: ...


def script_status(shaped: Structured, code: int) -> str:
    """The `status` of --json and --jsonl's end event, agreeing with the exit code: `ok`,
    `failed`, `interrupted`; at exit 8 why the tool loop stopped (`max_iterations`,
    `repeated_tool_call`); at exit 7 `empty`, or `invalid` (--schema)."""
    result = shaped.result
    if result.status != "ok" or code == 0:
        return result.status
    if code == EXIT_MAX_ITERATIONS:
        return result.finish_reason or "max_iterations"
    if code == EXIT_EMPTY_ANSWER:
        return "invalid" if shaped.errors else "empty"
    return "failed"


def report(
    opts: AskOptions, shaped: Structured, provider: Provider, out: TextIO, err: TextIO
) -> int:
    result = shaped.result
    code = exit_code(opts, shaped, out, err)
    if opts.json_out:
        obj: dict[str, Any] = {
            "session_id": result.session_id,
            "model": result.model,
            "answer": result.answer,
            "usage": result.usage.to_dict() if result.usage_reported else None,
            "tool_calls": result.tool_calls,
            "finish_reason": result.finish_reason,
            "status": script_status(shaped, code),
            "exit_code": code,
            "cache": result.cache.to_json(),  # what changed since the previous request
            **result.memory,  # memory_used, memory_written (memory/report.py)
        }
        if opts.schema is not None:
            obj["parsed"] = shaped.value
        if result.cost_today is not None:
            obj["cost_today"] = result.cost_today
        if result.saved_today is not None:  # what the cache saved today, all sessions
            obj["saved_today"] = result.saved_today
        if result.fallback is not None:  # answered by a link of the chain: from, to, reason
            obj["fallback"] = result.fallback
        if result.error is not None or shaped.errors:
            message = result.error.user_message() if result.error else shaped.error_text
            obj["error"] = {"message": message, "exit_code": code}
        out.write(json_text(obj, indent=None) + "\n")
        out.flush()
    if result.error is not None and result.status == "failed":
        print_error(result.error, err)
    stats = provider.last_stats
    if stats is not None and isatty(err) and not opts.json_out:
        err.write(dim(stats.describe()) + "\n")
    if result.session_id and isatty(err) and not opts.json_out:
        from countbot_cli.ui.transcript import ask_usage  # on a terminal only (start-up)

        usage = ask_usage(result)
        sid = result.session_id
        err.write(dim(f"session {sid}{usage} · continue with -s {sid[:8]}") + "\n")
        err.flush()
    return code


def exit_code(opts: AskOptions, shaped: Structured, out: TextIO, err: TextIO) -> int:
    """-x's code or --schema's value on stdout; an empty answer or one that does not match
    the schema (7) or a stopped tool loop (8) said on stderr."""
    result = shaped.result
    if result.status == "interrupted":
        return EXIT_INTERRUPTED
    if result.error is not None:
        return result.error.exit_code
    if result.finish_reason in ("max_iterations", "repeated_tool_call"):  # the engine's
        return EXIT_MAX_ITERATIONS  # notice said why countbot stopped the tool loop
    if shaped.errors:
        err.write(f"countbot: error: {sanitize(shaped.error_text)} (after one repair attempt)\n")
        return EXIT_EMPTY_ANSWER
    if opts.schema is not None:
        if not (opts.json_out or opts.jsonl):
            out.write(json_text(shaped.value, indent=None) + "\n")
        return 0
    if not result.answer.strip():
        _notice(err, "the answer was empty")
        return EXIT_EMPTY_ANSWER
    if opts.extract:
        code = extracted(result.answer, every=opts.extract == "all")
        if not code:
            _notice(err, "the answer has no fenced code block (-x printed nothing)")
            return EXIT_EMPTY_ANSWER
        out.write(sanitize(code))
        out.flush()
    return 0


def print_error(error: CountbotError, err: TextIO) -> None:
    if isinstance(error, UnexpectedError) and os.environ.get("COUNTBOT_DEBUG"):
        # the turn was saved; now show the bug the error line names
        traceback.print_exception(error.__cause__ or error, file=err)
    err.write(f"countbot: error: {sanitize(error.user_message())}\n")
    err.flush()


def _notice(err: TextIO, text: str) -> None:
    err.write(f"countbot: {sanitize(text)}\n")
    err.flush()
