"""The rig the memory tests share (no tests here): the real conversation from
`app.build_conversation` (engine, memory keeper, and the after-turn upkeep runner the REPL and
`ask` use), a real SessionStore and MEMORY.md, real HTTP to the scriptable loopback server, whose
responder answers chat turns with `answer K` and records and answers summary requests."""

from __future__ import annotations

import json
import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import fakeserver as fs
from cbenv import make_cb

from countbot_cli import app
from countbot_cli.config.settings import Settings, load_settings
from countbot_cli.conversation.chat import Conversation
from countbot_cli.conversation.engine import Engine
from countbot_cli.conversation.sessions.session import Session
from countbot_cli.conversation.sessions.store import SessionStore
from countbot_cli.conversation.turn_record import TurnResult
from countbot_cli.conversation.view import SilentView
from countbot_cli.memory.keeper import MemoryKeeper
from countbot_cli.memory.summary_prompts import (
    MEMORY_MARK,
    SUMMARY_MARK,
    conversation_memory_prompt,
)
from countbot_cli.prompts import RECALL_END

AUTO_MARKS = tuple(conversation_memory_prompt("", lang).split("\n")[0] for lang in ("en", "zh"))
LEAVING = "Messages leaving the window:"  # the block's header in the rolling prompt (English)
ROLLING_ASKED = SUMMARY_MARK + " …"  # the label line of the rolling summary prompt
ENTRY_RE = re.compile(r"^\d{4}-\d{2}-\d{2}\|(auto-overflow|auto-memory)\|.+$")


def q(k: int) -> str:
    return f"question {k}"


def a(k: int) -> str:
    return f"answer {k}"


def messages_of(turns: range) -> list[tuple[str, str]]:
    out: list[tuple[str, str]] = []
    for k in turns:
        out += [("user", q(k)), ("assistant", a(k))]
    return out


def dialogue_lines(prompt: str) -> list[str]:
    """The messages a summary prompt carries (of a rolling one: the block leaving the window,
    not the backlog of older messages its summary missed, see `backlog_lines`)."""
    block = prompt.rsplit(LEAVING, 1)[-1]
    return [ln for ln in block.split("\n") if ln.startswith(("USER: ", "ASSISTANT: "))]


def backlog_lines(prompt: str) -> list[str]:
    """The older messages a rolling summary prompt shows because its summary missed them."""
    if LEAVING not in prompt:
        return []
    return dialogue_lines(prompt.rsplit(LEAVING, 1)[0])


def summary_of(n: int) -> str:
    """The rolling summary the rig's n-th summary call answers (`summary c` for the third: a
    letter, as a summary names no number the messages did not say)."""
    return f"summary {chr(ord('a') + n - 1)}"


def grounded_fact(prompt: str) -> str:
    """A memory line naming only what the prompt's messages say: `user asked question 3 and
    question 4` (the first two words of at most four user lines of the block leaving the
    window, or of the whole prompt)."""
    asked = [ln.removeprefix("USER: ") for ln in dialogue_lines(prompt) if ln.startswith("USER: ")]
    return "user asked " + " and ".join([" ".join(a.split()[:2]) for a in asked][:4] or ["nothing"])


@dataclass
class Summariser:
    """Answers chat turns with `answer K` and records/answers summary requests."""

    replies: list[fs.Reply] = field(default_factory=list)
    calls: list[tuple[str, str, dict[str, Any]]] = field(default_factory=list)

    def __call__(self, body: dict[str, Any]) -> fs.Reply:
        msgs = body["messages"]
        if msgs[0]["role"] == "system":
            words = msgs[-1]["content"].rsplit(RECALL_END, 1)[-1].split()  # after recalled lines
            return fs.text(f"answer {words[1] if len(words) > 1 else '?'}", chunk_size=50)
        prompt = msgs[0]["content"]
        kind = "auto" if prompt.startswith(AUTO_MARKS) else "overflow"
        self.calls.append((kind, prompt, body))
        if self.replies:
            return self.replies.pop(0)
        fact = grounded_fact(prompt)
        if kind == "overflow" and ROLLING_ASKED in prompt:  # the rolling summary asked too
            memory = f"{MEMORY_MARK} {fact}\n" if MEMORY_MARK + " …" in prompt else ""
            return fs.text(f"{memory}{SUMMARY_MARK} {summary_of(len(self.calls))}")
        return fs.text(fact)

    def of(self, kind: str) -> list[str]:
        return [p for k, p, _ in self.calls if k == kind]


class View(SilentView):
    """Records notices: the turn's and the memory upkeep's."""

    def __init__(self) -> None:
        self.notices: list[str] = []
        self.failures: list[str] = []  # upkeep notes shown as failures (yellow in the REPL)

    def notice(self, text: str) -> None:
        self.notices.append(text)

    def upkeep_note(self, text: str, *, failed: bool) -> None:
        self.notices.append(text)
        if failed:
            self.failures.append(text)


@dataclass
class Rig:
    settings: Settings
    conversation: Conversation
    server: fs.FakeServer
    summariser: Summariser
    memory_file: Path
    view: View = field(default_factory=View)

    def turn(self, text: str, *, ok: bool = True, replaces: str | None = None) -> TurnResult:
        """One turn as the REPL and `ask` run it: saved, then the memory upkeep."""
        self.conversation.reload()  # a test may have changed the file
        result = self.conversation.send(text, self.view, replaces=replaces)
        if ok:
            assert result.status == "ok", result.error
        return result

    @property
    def engine(self) -> Engine:
        return self.conversation.engine

    @property
    def store(self) -> SessionStore:
        return self.conversation.store

    @property
    def session(self) -> Session | None:
        """The conversation's session once it is saved (None before the first turn)."""
        c = self.conversation
        return None if c.is_new else c.session

    @session.setter
    def session(self, session: Session) -> None:
        """Go on in `session`, a saved one (tests prepare long sessions in the store)."""
        self.conversation.resume(session.id)

    @property
    def keeper(self) -> MemoryKeeper:
        keeper = self.conversation.pair.keeper
        assert isinstance(keeper, MemoryKeeper)
        return keeper

    @property
    def sid(self) -> str:
        assert self.session is not None
        return self.session.id

    def saved(self) -> dict[str, Any]:
        data: dict[str, Any] = json.loads(self.store.path(self.sid).read_text("utf-8"))
        return data

    def entries(self) -> list[str]:
        if not self.memory_file.exists():
            return []
        text = self.memory_file.read_text("utf-8")
        return [ln for ln in text.splitlines() if ln and not ln.startswith("#")]

    def chat_bodies(self) -> list[dict[str, Any]]:
        return [b for b in self.server.chat_bodies() if b["messages"][0]["role"] == "system"]


class RigFactory:
    """`make(provider=..., **config)` builds a Rig; `close()` stops every server it started."""

    def __init__(self, tmp_path: Path) -> None:
        self.tmp_path = tmp_path
        self.made: list[tuple[fs.FakeServer, Any]] = []

    def __call__(self, provider: dict[str, Any] | None = None, **config: Any) -> Rig:
        summariser = Summariser()
        server = fs.FakeServer(responder=summariser).start()
        root = self.tmp_path / f"rig{len(self.made)}"
        extra = {"max_retries": 0, **(provider or {})}
        cb = make_cb(root, server.base_url, provider=extra, **config)
        settings = load_settings(config_path=cb.config_file, env=cb.env, cwd=cb.work)
        provider_obj = app.make_provider(settings)
        self.made.append((server, provider_obj))
        conversation = app.build_conversation(
            settings,
            app.make_store(settings),
            provider_for=lambda _settings: provider_obj,
            tools_enabled=False,
            yes=False,
        )
        return Rig(settings, conversation, server, summariser, cb.memory_file)

    def close(self) -> None:
        for server, provider in self.made:
            provider.close()
            server.stop()
