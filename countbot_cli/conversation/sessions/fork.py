"""A fork of a session: a new saved session holding an earlier one up to a message (`/fork`,
`sessions fork`)."""

from __future__ import annotations

from dataclasses import replace

from countbot_cli.conversation.sessions.session import Session, new_session, plural
from countbot_cli.conversation.sessions.store import SessionStore
from countbot_cli.errors import UsageError
from countbot_cli.messages import Usage


def fork_session(store: SessionStore, src: Session, upto: int | None, title: str = "") -> Session:
    """A new saved session holding `src` up to its message `upto` (the first `upto` live
    messages; all when None), earlier archived ones, the summary, the cursors and the system
    text included. The messages keep their ids, so memory lines written from them trace to
    them in either session. Tool records of the messages left out are not copied; `src` is
    left as it was."""
    total = len(src.messages)
    upto = total if upto is None else upto
    if not 0 <= upto <= total:
        raise UsageError(
            f"no message {upto} to fork at (this conversation has {plural(total, 'message')})"
        )
    kept = src.messages[:upto]
    ids = {m.id for m in kept}
    fresh = new_session(provider=src.provider, model=src.model)
    fork = replace(
        src,
        id=fresh.id,
        created_at=fresh.created_at,
        updated_at=fresh.updated_at,
        title=" ".join(title.split()) or (f"{src.title} (fork)" if src.title else ""),
        messages=list(kept),
        archived=list(src.archived),
        tool_conversations=[r for r in src.tool_conversations if r.get("message_id") in ids],
        cursors=dict(src.cursors),
        usage=Usage(),
    )
    store.create(fork)
    return fork
