"""A session continued on two machines while apart, merged message by message.

A file-sync tool keeps one version of `<id>.json` and writes the other beside it as a conflict
copy (conflicts.py names them); git writes both into the file between marks. Every message has
an id, so the two histories are put together (`merged`): the messages both have once (the
answered version of a question saved before its answer), and between them the turns only one
side has, each turn whole (a question with what answered it), in the order they were asked.
When the histories cannot be put in one order (the messages they share come in another order,
or they share none), nothing is merged: the other version is kept as a new session (a fork).
`reconcile` does it for every copy in the sessions folder, through the store (a merge is an
`update`, under the session's lock), says so in one line each and moves the copy aside.

Invariant: every message of either version is in the merged session, once, and the copy is
moved aside only after the session holding it is written.
"""

from __future__ import annotations

import contextlib
import json
from collections.abc import Callable, Iterable
from dataclasses import fields, replace
from pathlib import Path
from typing import Any, Protocol

from countbot_cli import conflicts, fileio
from countbot_cli.conversation.sessions.listing import is_session_file
from countbot_cli.conversation.sessions.session import Session, new_session_id, plural
from countbot_cli.errors import StorageError
from countbot_cli.jsonsafe import loads_bounded
from countbot_cli.messages import Message, Usage

FORK_TITLE = "{title} (from another machine)"


class Store(Protocol):
    """The sessions folder as a merge uses it (the store; not imported: it calls us)."""

    root: Path

    def path(self, sid: str) -> Path: ...

    def update(self, sid: str, fn: Callable[[Session], Any], *, touch: bool = True) -> Any: ...

    def create(self, session: Session) -> None: ...

    def notice(self, message: str) -> None: ...


def merged(main: Session, other: Session) -> Session | None:
    """`main` with `other`'s messages put in (see the module docstring); None when the two
    histories cannot be ordered."""
    a, b = main.all_messages(), other.all_messages()
    in_a, in_b = {m.id: m for m in a}, {m.id: m for m in b}
    shared = [m.id for m in a if m.id in in_b]
    if shared != [m.id for m in b if m.id in in_a] or (a and b and not shared):
        return None
    out: list[Message] = []
    i = j = 0
    for sid in [*shared, None]:
        i_end = len(a) if sid is None else _index(a, sid, i)
        j_end = len(b) if sid is None else _index(b, sid, j)
        out += _interleave(a[i:i_end], b[j:j_end])
        if sid is not None:
            out.append(_answered(in_a[sid], in_b[sid]))
        i, j = i_end + 1, j_end + 1
    archived = {m.id for m in (*main.archived, *other.archived)}
    k = 0
    while k < len(out) and out[k].id in archived:
        k += 1
    return replace(
        main,
        title=main.title or other.title,
        created_at=min(main.created_at, other.created_at),
        updated_at=max(main.updated_at, other.updated_at),
        summary=main.summary or other.summary,
        rolling_summary=main.rolling_summary or other.rolling_summary,
        system=main.system or other.system,
        workspace=main.workspace or other.workspace,
        archived=out[:k],
        messages=out[k:],
        tool_conversations=_union(main.tool_conversations, other.tool_conversations),
        usage=_most(main.usage, other.usage),
    )


def _index(messages: list[Message], mid: str, start: int) -> int:
    return next(n for n in range(start, len(messages)) if messages[n].id == mid)


def _turns(run: list[Message]) -> list[list[Message]]:
    """A run of messages cut into turns: each user message with what follows it."""
    out: list[list[Message]] = []
    for m in run:
        if m.role == "user" or not out:
            out.append([m])
        else:
            out[-1].append(m)
    return out


def _interleave(a: list[Message], b: list[Message]) -> list[Message]:
    """Two runs of turns in the order they were asked (each run's own order kept; on the same
    second, `a`'s first)."""
    ta, tb, out = _turns(a), _turns(b), []
    while ta or tb:
        if not tb or (ta and ta[0][0].created_at <= tb[0][0].created_at):
            out += ta.pop(0)
        else:
            out += tb.pop(0)
    return out


def _answered(a: Message, b: Message) -> Message:
    """The version of a message both have to keep: the one not left failed or interrupted
    (a question saved before its answer, then answered), else main's."""
    return b if a.status is not None and b.status is None else a


def _union(a: list[dict[str, Any]], b: list[dict[str, Any]]) -> list[dict[str, Any]]:
    seen = {json.dumps(r, sort_keys=True) for r in a}
    extra = [r for r in b if json.dumps(r, sort_keys=True) not in seen]
    return [*a, *extra]


def _most(a: Usage, b: Usage) -> Usage:
    """Usage totals of two versions with a common past: the larger of each (never summed twice)."""

    def big(x: Any, y: Any) -> Any:
        return y if x is None else x if y is None else max(x, y)

    return Usage(**{f.name: big(getattr(a, f.name), getattr(b, f.name)) for f in fields(Usage)})


# ---- the files ----


def reconcile(store: Store, names: Iterable[str]) -> None:
    """Merge every conflict copy among `names` (the sessions folder's) into its session."""
    for name in sorted(names):
        c = conflicts.original_name(name) if conflicts.maybe_copy(name) else None
        if c is not None and is_session_file(c.original):
            with contextlib.suppress(StorageError):  # busy or gone: the next look tries again
                _merge_copy(store, c)


def _merge_copy(store: Store, c: conflicts.Copy) -> None:
    sid = c.original[: -len(".json")]
    copy = store.root / c.name
    try:
        other = load_doc(copy.read_bytes(), sid)
    except OSError:
        return
    except ValueError as e:
        aside = fileio.move_aside(copy)
        store.notice(
            f"the {c.tool} conflict copy {c.name} is damaged ({e}); moved it to {aside.name}"
        )
        return
    if not store.path(sid).exists():
        store.create(replace(other, id=sid))
        said = f"session {sid} came back from its {c.tool} conflict copy"
    else:
        said = _into(store, sid, other, c.tool)
    aside = fileio.move_aside(copy, conflicts.MERGED_TAG)
    store.notice(f"{said}; the copy {c.name} is now {aside.name}")


def _into(store: Store, sid: str, other: Session, tool: str) -> str:
    """Merge `other` into the session `sid` (or fork it); what to say."""
    counts: list[int] = []

    def apply(s: Session) -> None:
        before = len(s.archived) + len(s.messages)
        m = merged(s, other)
        if m is None:
            raise _Unordered
        for f in fields(Session):
            setattr(s, f.name, getattr(m, f.name))
        counts.append(len(s.archived) + len(s.messages) - before)

    try:
        store.update(sid, apply, touch=False)
    except _Unordered:
        fork = replace(other, id=new_session_id(), title=FORK_TITLE.format(title=other.title))
        store.create(fork)
        return (
            f"session {sid} was changed on two machines in ways that cannot be put in one "
            f"order: the {tool} conflict copy is kept as session {fork.id}"
        )
    return f"merged {plural(counts[0], 'message')} from a {tool} conflict copy into session {sid}"


class _Unordered(Exception):
    """The two histories cannot be put in one order."""


def load_doc(data: bytes, sid: str) -> Session:
    """A session file's bytes as a Session named `sid` (ValueError when it does not parse)."""
    session = Session.from_dict(loads_bounded(data))
    session.id = sid
    return session


def git_versions(data: bytes, sid: str) -> tuple[Session, Session] | None:
    """(ours, theirs) of a session file git left with conflict marks; None when it has none
    or a side does not parse."""
    if not data.startswith(b"<<<<<<< "):
        return None
    sides = conflicts.git_sides(data.decode("utf-8", "surrogateescape"))
    if sides is None:
        return None
    try:
        return load_doc(sides[0].encode("utf-8", "surrogateescape"), sid), load_doc(
            sides[1].encode("utf-8", "surrogateescape"), sid
        )
    except ValueError:
        return None
