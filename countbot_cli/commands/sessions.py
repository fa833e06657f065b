"""The bodies of `countbot sessions list|show|delete|rename|fork|export|summary` (also
`/sessions` and `/export` in the chat).

Every function writes to an injected stream, returns an exit code and raises errors from
errors.py for bad input; the drawing is ui/'s (ui/listing.py, ui/transcript.py). Everything that
came from a model or a tool goes through textsafe before it is printed.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from datetime import datetime, timezone
from pathlib import Path
from typing import Any, TextIO

from countbot_cli.conversation.sessions.fork import fork_session
from countbot_cli.conversation.sessions.session import plural, short_ids
from countbot_cli.conversation.sessions.store import SessionStore
from countbot_cli.errors import EXIT_OK, StorageError, UsageError
from countbot_cli.textsafe import json_text, sanitize, sanitize_line
from countbot_cli.ui import listing
from countbot_cli.ui.transcript import (
    UNTITLED,
    first_line,
    render_plain,
    render_rich,
    to_markdown,
    transcript,
)

TITLE_WIDTH = 48


# ---- list ----


def sessions_list(
    store: SessionStore,
    out: TextIO,
    *,
    json_out: bool = False,
    limit: int | None = None,
    now: datetime | None = None,
) -> int:
    if limit is not None and limit < 1:
        raise UsageError("-n must be at least 1")
    every = store.list()
    headers = every[:limit] if limit is not None else every
    if json_out:
        out.write(json_text(headers) + "\n")
        return EXIT_OK
    if not headers:
        out.write("No saved sessions yet.\n")
        return EXIT_OK
    shorts = short_ids([h["id"] for h in every])
    now = now or datetime.now(timezone.utc)
    rows = [
        [
            shorts[h["id"]],
            listing.fit(sanitize_line(h["title"]) or UNTITLED, TITLE_WIDTH),
            str(h["message_count"]),
            listing.relative_time(h["updated_at"], now),
            sanitize_line(h["model"]),
        ]
        for h in headers
    ]
    table = listing.table(["ID", "TITLE", "MSGS", "UPDATED", "MODEL"], rows).splitlines()
    lines = table[:1]
    for h, row in zip(headers, table[1:], strict=True):
        lines.append(row)
        if h.get("gist"):  # the one-line gist of its summary (yours or the rolling one)
            lines.append(f"{' ' * (len(shorts[h['id']]) + 2)}↳ {sanitize_line(h['gist'])}")
    out.write("\n".join(lines) + "\n")
    return EXIT_OK


# ---- show ----


def sessions_show(
    store: SessionStore,
    ref: str,
    out: TextIO,
    *,
    json_out: bool = False,
    tty: bool = False,
    console_factory: Callable[[TextIO], Any] | None = None,
) -> int:
    """The transcript. On a TTY (or with a console_factory) markdown is rendered with rich."""
    session = store.load(store.resolve(ref))
    if json_out:
        out.write(json_text(session.to_dict()) + "\n")
    elif tty or console_factory is not None:
        render_rich(transcript(session), out, console_factory)
    else:
        out.write(render_plain(transcript(session)))
    return EXIT_OK


# ---- delete, rename, summary ----


def sessions_delete(
    store: SessionStore,
    refs: Sequence[str],
    *,
    yes: bool,
    confirm: Callable[[str], bool] | None,
    out: TextIO,
) -> int:
    """Delete sessions after one confirmation (unless `yes`); declining deletes nothing, and
    with no one to ask (`confirm` None: no terminal) nothing is deleted either (UsageError)."""
    if not refs:
        raise UsageError("name at least one session to delete")
    ids = list(dict.fromkeys(store.resolve(r) for r in refs))  # every ref checked before any delete
    titles = {h["id"]: h for h in store.list()}
    described = [_describe(sid, titles.get(sid)) for sid in ids]
    if not yes:
        if confirm is None:
            raise UsageError("not deleting: there is no terminal to confirm on", hint="pass --yes")
        question = (
            f"Delete session {described[0]}?"
            if len(ids) == 1
            else f"Delete {len(ids)} sessions?\n  " + "\n  ".join(described) + "\n"
        )
        if not confirm(question):
            out.write("Nothing deleted.\n")
            return EXIT_OK
    for sid, text in zip(ids, described, strict=True):
        store.delete(sid)
        out.write(f"Deleted {text}\n")
    return EXIT_OK


def _describe(sid: str, head: dict[str, Any] | None) -> str:
    if head is None:
        return sid
    title = first_line(sanitize_line(head["title"]), 60) or UNTITLED
    return f"{sid} “{title}” ({plural(head['message_count'], 'message')})"


def sessions_rename(store: SessionStore, ref: str, title: str, out: TextIO) -> int:
    sid = store.resolve(ref)
    store.rename(sid, title)
    out.write(f"Renamed {sid} to “{sanitize_line(title)}”\n")
    return EXIT_OK


def sessions_fork(
    store: SessionStore, ref: str, out: TextIO, *, at: int | None = None, title: str = ""
) -> int:
    """Copy session `ref` up to its message `at` (the first `at` messages of its history; all
    by default) into a new session; the original is left as it was."""
    src = store.load(store.resolve(ref))
    fork = fork_session(store, src, at, title)
    shown = sanitize_line(fork.title) or UNTITLED
    kept = plural(len(fork.messages), "message")
    out.write(f"Forked {src.id} into {fork.id} “{shown}” ({kept})\n")
    out.write(f"continue it with: countbot -s {fork.id}\n")
    return EXIT_OK


def sessions_summary(
    store: SessionStore,
    ref: str,
    text: str | None = None,
    clear: bool = False,
    *,
    out: TextIO,
) -> int:
    """Show (no text), set (text) or clear the session summary injected into the system prompt;
    with none of the user's, `show` prints the rolling one (memory/rolling.py), marked."""
    if clear and text is not None:
        raise UsageError("give a summary text or --clear, not both")
    if text is not None and not text.strip():
        raise UsageError("the summary text is empty", hint="use --clear to remove the summary")
    sid = store.resolve(ref)
    if clear:
        store.set_summary(sid, "")
        out.write(f"Summary of {sid} cleared.\n")
    elif text is not None:
        store.set_summary(sid, text)
        out.write(f"Summary of {sid} saved.\n")
    else:
        session = store.load(sid)
        if session.summary:
            out.write(sanitize(session.summary) + "\n")
        elif session.rolling_summary:  # what the requests carry while the user set none
            out.write(f"(rolling) {sanitize(session.rolling_summary)}\n")
        else:
            out.write(f"Session {sid} has no summary.\n")
    return EXIT_OK


# ---- export ----


EXPORT_SUFFIXES = {".md": "md", ".markdown": "md", ".json": "json"}


def export_format(output: Path | None, fmt: str | None) -> str:
    """The one export rule (`sessions export` and `/export`): `--format` when given, else the
    file's extension (.md/.markdown: markdown, .json: JSON; none, or stdout: markdown); any
    other extension is a UsageError."""
    if fmt is not None:
        if fmt not in ("md", "json"):
            raise UsageError(f"unknown export format '{fmt}'", hint="use md or json")
        return fmt
    suffix = output.suffix.lower() if output is not None else ""
    if not suffix:
        return "md"
    if suffix not in EXPORT_SUFFIXES:
        raise UsageError(
            f"cannot tell the export format from '{suffix}'",
            hint="name the file .md or .json, or say --format md|json",
        )
    return EXPORT_SUFFIXES[suffix]


def sessions_export(
    store: SessionStore,
    ref: str,
    fmt: str | None = None,
    output: Path | None = None,
    *,
    out: TextIO,
    force: bool = False,
    confirm: Callable[[str], bool] | None = None,
    overwrite_hint: str = "choose another file name",
) -> int:
    """Markdown (a title heading, then a role heading a message) or JSON (the stored dict), as
    `export_format` decides from `fmt` and `output`'s extension.

    JSON is lossless; markdown drops terminal control characters from the text. An existing
    `output` is replaced only with `force` or when `confirm` (a person at a terminal) says so;
    with neither it is a UsageError and the file is left as it was.
    """
    fmt = export_format(output, fmt)
    session = store.load(store.resolve(ref))
    text = json_text(session.to_dict()) + "\n" if fmt == "json" else to_markdown(session)
    if output is None:
        out.write(text)
        return EXIT_OK
    if not force and (output.is_symlink() or (output.exists() and not output.is_dir())):
        if confirm is None:
            raise UsageError(f"{output} already exists; not overwriting it", hint=overwrite_hint)
        if not confirm(f"{output} already exists. Overwrite it?"):
            out.write(f"Not exported: {output} is left as it was.\n")
            return EXIT_OK
    _write_file(output, text)
    out.write(f"Exported {session.id} to {output}\n")
    return EXIT_OK


def _write_file(path: Path, text: str) -> None:
    try:
        with open(path, "w", encoding="utf-8", newline="\n") as f:
            f.write(text)
    except (FileNotFoundError, IsADirectoryError, NotADirectoryError) as e:
        raise UsageError(f"cannot write {path}: {e.strerror or e}") from e
    except OSError as e:
        raise StorageError(f"cannot write {path}: {e.strerror or e}") from e
