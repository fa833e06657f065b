"""A turn into its session file: the question before anything runs for it, then the turn's record.

`TurnSaver.question` (the engine's `started` callback) saves the question marked interrupted,
creating a new conversation's file; `turn` puts the record's messages, tool records, usage,
model and cache fingerprint in its place; `replaces` names a failed attempt the turn takes the
place of. The invariant: a question, once asked, survives a SIGKILL at any later moment, and
both writes hold Ctrl-C, SIGTERM and SIGHUP until complete. A session file deleted or damaged
elsewhere goes on in a new file. docs/design/turn.md says more.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import replace
from typing import TYPE_CHECKING, Any

from countbot_cli.conversation.context import without_failed
from countbot_cli.conversation.sessions.session import Session, new_session, title_from
from countbot_cli.errors import StorageError
from countbot_cli.interrupts import sigint_deferred
from countbot_cli.messages import STATUS_INTERRUPTED, Message, Usage, utc_now

if TYPE_CHECKING:
    from countbot_cli.conversation.sessions.store import SessionStore
    from countbot_cli.conversation.turn_record import TurnRecord


class TurnSaver:
    """Saves one attempt at a turn into `session` (changed in memory as its file is)."""

    def __init__(
        self,
        store: SessionStore,
        session: Session,
        *,
        is_new: bool,
        replaces: str | None,
        model: str,
    ) -> None:
        self.store = store
        self.session = session
        self.model = model  # the model asked, for the session until the answer names its own
        self.is_new = is_new  # until the first write creates the file
        self.replaces = replaces
        self.notices: list[str] = []  # for after the answer

    def question(self, user: Message) -> None:
        """The question alone, marked interrupted until the answer replaces it; a signal held
        meanwhile is raised with `is_new` settled, so the turn's last save updates this file."""
        pending = replace(user, status=STATUS_INTERRUPTED)
        with sigint_deferred():
            self._write([pending], [], Usage(), model=self.model, last_request=None)

    def turn(self, record: TurnRecord) -> None:
        """The turn as the session keeps it, in place of its question saved first."""
        new = record.messages()
        answer_id = new[-1].id if len(new) > 1 else None
        tools = [t.stored(answer_id) for t in record.tools]
        with sigint_deferred():
            self._write(new, tools, record.usage, record.model, record.cache.stored)

    def _write(
        self,
        new: Sequence[Message],
        tools: list[dict[str, Any]],
        usage: Usage,
        model: str | None,
        last_request: dict[str, Any] | None,
    ) -> None:
        replaces = self.replaces

        def apply(s: Session) -> None:
            if replaces:
                s.messages = without_failed(s.messages, replaces)
            _put(s.messages, new)
            s.tool_conversations.extend(tools)
            s.usage.add(usage)
            s.model = model or s.model
            if last_request and "prompt_tokens" in last_request:  # answered: the next compares
                s.last_request = last_request
            s.updated_at = utc_now()
            if not s.title:
                s.title = title_from(new[0].content)

        if self.is_new:
            apply(self.session)
            self.store.create(self.session)
            self.is_new = False
            return
        try:
            self.store.update(self.session.id, apply)
        except StorageError as exc:
            self._continue_elsewhere(apply, exc)
            return
        apply(self.session)

    def _continue_elsewhere(self, apply: Callable[[Session], None], exc: StorageError) -> None:
        """The file was deleted, damaged or stays locked elsewhere: what this process knows of
        the conversation goes on in a new session file."""
        s = self.session
        old = s.id
        s.id = new_session(provider=s.provider, model=s.model).id
        apply(s)
        self.store.create(s)
        self.notices.append(
            f"could not save to session {old} ({exc.message}); "
            f"this conversation continues as session {s.id}"
        )


def _put(messages: list[Message], new: Sequence[Message]) -> None:
    """Append a turn's messages, in place of its question saved before the model started."""
    for i in range(len(messages) - 1, -1, -1):
        if messages[i].id == new[0].id:
            messages[i : i + 1] = new
            return
    messages.extend(new)
