"""The error tree. Every failure a user can see is one of these.

Each error carries a one-line user message (`str(err)`), an exit code (usage and config 2, the
provider's refusal 3, authentication 4, rate limit 5, network and server 6, a bug 1, Ctrl-C
130) and whether a retry before the first byte may help. HTTP statuses are mapped to it in one
place, provider/http_errors.py. `OutputClosed`, outside the tree, is the reader of stdout gone
(`ask … | head -1`): the turn is saved as on Ctrl-C and countbot exits quietly with 0. The
whole tree and why 0: docs/design/robustness.md.
"""

from __future__ import annotations

EXIT_OK = 0
EXIT_ERROR = 1
EXIT_USAGE = 2
EXIT_PROVIDER = 3
EXIT_AUTH = 4
EXIT_RATE_LIMIT = 5
EXIT_NETWORK = 6
EXIT_EMPTY_ANSWER = 7  # `ask`: the answer was empty, or -x/--extract found no code block in it
EXIT_MAX_ITERATIONS = 8  # `ask`: countbot stopped the tool loop (max_iterations, a repeated call)
EXIT_INTERRUPTED = 130

_EXIT_ROWS = (
    (EXIT_OK, "success"),
    (EXIT_ERROR, "unexpected error"),
    (EXIT_USAGE, "usage, config or data"),
    (EXIT_PROVIDER, "provider rejected (4xx)"),
    (EXIT_AUTH, "authentication (401/403)"),
    (EXIT_RATE_LIMIT, "rate limit or quota, after retries"),
    (EXIT_NETWORK, "network, timeout or server error, after retries"),
    (EXIT_EMPTY_ANSWER, "empty answer (with -x: no code block in it)"),
    (EXIT_MAX_ITERATIONS, "the tool-round limit (max_iterations) or a repeated call"),
    (EXIT_INTERRUPTED, "interrupted"),
)


def _columns(rows: tuple[tuple[int, str], ...]) -> str:
    """The rows in two columns, each code right-aligned and each text starting at one place."""
    half = (len(rows) + 1) // 2
    left, right = rows[:half], rows[half:]
    code_w = [max(len(str(c)) for c, _ in col) for col in (left, right)]
    text_w = max(len(t) for _, t in left)
    lines = []
    for i, (code, text) in enumerate(left):
        line = f"  {code:>{code_w[0]}} {text:<{text_w}}"
        if i < len(right):
            line += f"  {right[i][0]:>{code_w[1]}} {right[i][1]}"
        lines.append(line.rstrip())
    return "\n".join(lines)


EXIT_CODES_HELP = "Exit codes:\n" + _columns(_EXIT_ROWS)


class CountbotError(Exception):
    """Base of every error countbot reports to the user."""

    exit_code: int = EXIT_ERROR
    retryable: bool = False
    partial_text: str = ""  # answer text that arrived before a provider's stream broke

    def __init__(self, message: str, *, hint: str | None = None) -> None:
        super().__init__(message)
        self.message = message
        self.hint = hint

    def user_message(self) -> str:
        """One line for the terminal: the message, then the hint if any."""
        return f"{self.message} ({self.hint})" if self.hint else self.message


class UsageError(CountbotError):
    exit_code = EXIT_USAGE


class ConfigError(CountbotError):
    """A configuration problem. `file`, `line` and `key` locate it when known."""

    exit_code = EXIT_USAGE

    def __init__(
        self,
        message: str,
        *,
        file: str | None = None,
        line: int | None = None,
        key: str | None = None,
        hint: str | None = None,
    ) -> None:
        self.file = file
        self.line = line
        self.key = key
        where = ""
        if file:
            where = file + (f":{line}" if line else "")
        if key:
            where = f"{where} key '{key}'" if where else f"key '{key}'"
        super().__init__(f"{where}: {message}" if where else message, hint=hint)


class FetchError(CountbotError):
    """An attached URL could not be fetched (network, timeout, 5xx): nothing was sent."""

    exit_code = EXIT_NETWORK


class StorageError(CountbotError):
    exit_code = EXIT_ERROR


class SessionLockedError(StorageError):
    pass


class DamagedDataError(StorageError):
    """Data countbot keeps is damaged or something else stands at its path: not a bug (exit 1)
    but something the user can look at and fix, so exit 2 like a bad config file."""

    exit_code = EXIT_USAGE


class NotUsableError(StorageError):
    """A folder or file countbot keeps cannot be used as it is: a file where its folder goes,
    no permission, a session written by a newer countbot. Not a bug (exit 1) but the user's to
    fix, as the message says, so exit 2 like a bad config file."""

    exit_code = EXIT_USAGE


class ProviderError(CountbotError):
    """The provider answered with an error. `status` is the HTTP status when there was one."""

    exit_code = EXIT_PROVIDER

    def __init__(
        self,
        message: str,
        *,
        status: int | None = None,
        hint: str | None = None,
        retry_after: float | None = None,
    ) -> None:
        super().__init__(message, hint=hint)
        self.status = status
        self.retry_after = retry_after


class ModelNotFoundError(ProviderError):
    pass


class ContextLengthError(ProviderError):
    pass


class AuthError(ProviderError):
    exit_code = EXIT_AUTH


class RateLimitError(ProviderError):
    exit_code = EXIT_RATE_LIMIT
    retryable = True


class QuotaExceededError(RateLimitError):
    retryable = False


class TransientError(ProviderError):
    exit_code = EXIT_NETWORK
    retryable = True


class ConnectError(TransientError):
    pass


class ReadTimeoutError(TransientError):
    pass


class ServerError(TransientError):
    pass


class StreamError(TransientError):
    """The stream broke after it started: never retried (bytes were already shown)."""

    retryable = False
    partial_text: str = ""  # the answer text that arrived before the stream broke


class UnexpectedError(CountbotError):
    """An exception nothing expected, caught at the end of a turn so the turn is still saved.
    `__cause__` is the original exception (its traceback is shown with COUNTBOT_DEBUG=1)."""

    exit_code = EXIT_ERROR

    @classmethod
    def wrap(cls, exc: BaseException) -> UnexpectedError:
        detail = " ".join(str(exc).split())
        if len(detail) > 200:
            detail = detail[:199] + "…"
        err = cls(
            f"unexpected error: {type(exc).__name__}" + (f": {detail}" if detail else ""),
            hint="set COUNTBOT_DEBUG=1 to see the traceback, and please report it",
        )
        err.__cause__ = exc
        return err


class OutputClosed(BrokenPipeError):
    """stdout's reader went away mid-answer (see the module docstring)."""


class Interrupted(CountbotError):
    exit_code = EXIT_INTERRUPTED

    def __init__(self, message: str = "interrupted") -> None:
        super().__init__(message)

    @classmethod
    def by(cls, exc: BaseException) -> Interrupted:
        """The error of a turn `exc` stopped: "interrupted by the user" for Ctrl-C, else what
        it was ("interrupted: countbot was terminated (SIGTERM)")."""
        if isinstance(exc, (Terminated, OutputClosed)):
            return cls(f"interrupted: {stop_cause(exc)}")
        return cls("interrupted by the user")


class Terminated(KeyboardInterrupt):
    """SIGTERM or SIGHUP: countbot stops as on Ctrl-C (the turn in progress is saved, marked
    interrupted) but, unlike Ctrl-C in the chat, never goes on running. `signal_name` says
    which (interrupts.py raises it)."""

    def __init__(self, signal_name: str = "SIGTERM") -> None:
        super().__init__(signal_name)
        self.signal_name = signal_name


def stop_cause(exc: BaseException) -> str:
    """What stopped a turn, in the words the model and the session are told (a tool round's
    `tool` messages, the turn's error): Ctrl-C, a termination by its signal, or a closed output."""
    if isinstance(exc, OutputClosed):
        return "the output was closed"
    if isinstance(exc, Terminated):
        if exc.signal_name == "SIGHUP":
            return "the terminal was closed (SIGHUP)"
        return f"countbot was terminated ({exc.signal_name})"
    return "the user interrupted the turn"
