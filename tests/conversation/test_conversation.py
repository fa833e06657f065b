"""`Conversation` in-process: its operations against a real SessionStore in tmp_path, the real
engine, and a scripted provider (provider/fake.py); the memory keeper is a recording stand-in,
so the after-turn upkeep runner is seen from both sides."""

from __future__ import annotations

import json
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any

import pytest
from cbenv import make_cb

from countbot_cli.config.own_files import COSTS_FILE
from countbot_cli.config.settings import Settings, load_settings
from countbot_cli.conversation.chat import Conversation, ModelPair, open_session
from countbot_cli.conversation.engine import Engine
from countbot_cli.conversation.sessions.store import SessionStore
from countbot_cli.conversation.turn_record import TurnResult
from countbot_cli.conversation.upkeep import UPKEEP_INTERRUPTED
from countbot_cli.conversation.view import SilentView
from countbot_cli.errors import CountbotError, ProviderError, Terminated, UsageError
from countbot_cli.messages import STATUS_INTERRUPTED, Usage
from countbot_cli.provider.fake import Reply, ScriptedProvider, tool_call
from countbot_cli.tools.approval import ApprovalPolicy
from countbot_cli.tools.registry import ToolContext, ToolRegistry


class Keeper:
    """A memory keeper that records what the conversation asks of it."""

    def __init__(self, *hooks: Callable[[str], str | None]) -> None:
        self.hooks = list(hooks)
        self.compacted: list[str] = []

    def upkeep_hooks(self) -> list[Callable[[str], str | None]]:
        return self.hooks

    def upkeep_due(self, session_id: str) -> bool:
        return bool(self.hooks)

    def preempt(self, on: bool = True) -> None:
        pass

    def compact(self, session_id: str) -> list[str]:
        self.compacted.append(session_id)
        return ["a line"]


class View(SilentView):
    """Records the end of each turn, the upkeep's start, notes and end, in order."""

    def __init__(self) -> None:
        self.events: list[str] = []

    def turn_ended(self, result: TurnResult) -> None:
        self.events.append(f"turn {result.status}")

    def upkeep_started(self) -> None:
        self.events.append("upkeep")

    def upkeep_note(self, text: str, *, failed: bool) -> None:
        self.events.append(f"{'failed' if failed else 'note'}: {text}")

    def upkeep_ended(self) -> None:
        self.events.append("upkeep done")


class Rig:
    """A conversation on scripted providers (one per model), its store and its keeper."""

    def __init__(self, tmp_path: Path, *, keeper: Keeper | None = None, **kw: Any) -> None:
        cb = make_cb(tmp_path, "http://127.0.0.1:9/v1", **kw.pop("config", {}))
        self.settings: Settings = load_settings(
            config_path=cb.config_file, env=cb.env, cwd=cb.work, system=kw.pop("system", None)
        )
        self.store = SessionStore(self.settings.sessions_dir)
        self.keeper = keeper or Keeper()
        self.tools: ToolRegistry | None = kw.pop("tools", None)
        self.providers: dict[str | None, ScriptedProvider] = {}
        self.conversation = Conversation(
            settings=self.settings, store=self.store, pairs=self.pair, **kw
        )

    def pair(
        self, model: str | None, policy: ApprovalPolicy, options: Mapping[str, Any]
    ) -> ModelPair:
        provider = ScriptedProvider(model=model or "fake-model")
        self.providers[model] = provider
        engine = Engine(settings=self.settings, provider=provider, tools=self.tools, policy=policy)
        return ModelPair(engine, self.keeper)

    @property
    def provider(self) -> ScriptedProvider:
        return self.providers[None]

    def send(self, text: str, *replies: Reply | str, view: View | None = None) -> TurnResult:
        self.provider.enqueue(*(replies or (f"answer to {text}",)))
        return self.conversation.send(text, view or View())

    def saved(self) -> dict[str, Any]:
        path = self.store.path(self.conversation.session.id)
        data: dict[str, Any] = json.loads(path.read_text("utf-8"))
        return data

    def sent(self, n: int = -1) -> list[tuple[str, str]]:
        """(role, content) of request `n`, system prompt left out."""
        msgs = self.provider.requests[n].messages
        return [(m["role"], m["content"]) for m in msgs if m["role"] != "system"]


def contents(data: dict[str, Any]) -> list[str]:
    return [m["content"] for m in data["messages"]]


# ---- send ----


def test_a_new_conversation_is_saved_by_its_first_turn_and_continues_there(
    tmp_path: Path,
) -> None:
    rig = Rig(tmp_path)
    c = rig.conversation
    assert c.is_new and rig.store.list() == []
    first = rig.send("hello")
    assert first.status == "ok" and first.answer == "answer to hello"
    assert not c.is_new and first.session_id == c.session.id
    rig.send("and then?")
    assert [h["id"] for h in rig.store.list()] == [c.session.id]  # one session, not two
    assert contents(rig.saved()) == ["hello", "answer to hello", "and then?", "answer to and then?"]
    assert rig.sent() == [
        ("user", "hello"),
        ("assistant", "answer to hello"),
        ("user", "and then?"),
    ]


def test_an_unsaved_conversation_writes_nothing_and_runs_no_upkeep(tmp_path: Path) -> None:
    ran: list[str] = []
    rig = Rig(tmp_path, keeper=Keeper(ran.append), save=False)
    view = View()
    result = rig.send("hello", view=view)
    assert result.status == "ok" and result.session_id is None
    assert rig.store.list() == [] and ran == []
    assert view.events == ["turn ok"]


# ---- the after-turn upkeep runner ----


def test_upkeep_runs_after_the_turn_is_settled_on_screen(tmp_path: Path) -> None:
    ran: list[str] = []
    rig = Rig(tmp_path, keeper=Keeper(ran.append))
    view = View()
    result = rig.send("hello", view=view)
    assert ran == [result.session_id]
    assert view.events == ["turn ok", "upkeep", "upkeep done"]


def test_upkeep_failures_are_notices_and_ctrl_c_skips_the_rest(tmp_path: Path) -> None:
    calls: list[str] = []

    def failing(sid: str) -> None:
        calls.append("failing")
        raise CountbotError("the summary call failed", hint="tried again later")

    def buggy(sid: str) -> None:
        calls.append("buggy")
        raise KeyError("x")

    def interrupted(sid: str) -> None:
        calls.append("interrupted")
        raise KeyboardInterrupt

    def never(sid: str) -> None:
        calls.append("never")

    rig = Rig(tmp_path, keeper=Keeper(failing, buggy, interrupted, never))
    view = View()
    result = rig.send("hello", view=view)
    assert result.status == "ok"  # upkeep never breaks the turn
    assert calls == ["failing", "buggy", "interrupted"]  # a failure goes on, Ctrl-C stops
    assert view.events == [
        "turn ok",
        "upkeep",
        "failed: memory upkeep failed: the summary call failed (tried again later)",
        "failed: memory upkeep failed: KeyError: 'x'",
        f"note: {UPKEEP_INTERRUPTED}",
        "upkeep done",
    ]


def test_upkeep_changes_to_the_file_are_read_back(tmp_path: Path) -> None:
    rig = Rig(tmp_path)
    store = rig.store
    rig.keeper.hooks = [lambda sid: store.set_summary(sid, "written by upkeep")]
    rig.send("hello")
    assert rig.conversation.session.summary == "written by upkeep"


def test_ctrl_c_held_during_the_save_leaves_a_saved_conversation(tmp_path: Path) -> None:
    rig = Rig(tmp_path)
    c = rig.conversation

    def interrupting(result: TurnResult) -> None:
        raise KeyboardInterrupt  # as a Ctrl-C held back during the save arrives after it

    view = View()
    view.turn_ended = interrupting  # type: ignore[method-assign]
    rig.provider.enqueue("hi")
    with pytest.raises(KeyboardInterrupt):
        c.send("hello", view)
    assert not c.is_new and contents(rig.saved()) == ["hello", "hi"]


# ---- saving and charging (the engine does neither) ----


def statuses(data: dict[str, Any]) -> list[tuple[str, str | None]]:
    return [(m["content"], m.get("status")) for m in data["messages"]]


def test_the_question_is_in_the_file_before_the_model_answers(tmp_path: Path) -> None:
    rig = Rig(tmp_path)
    on_disk: list[list[tuple[str, str | None]]] = []

    class Peek(View):
        def text(self, delta: str) -> None:  # while the answer streams
            on_disk.append(statuses(rig.saved()))

    rig.send("hello", Reply(text=["hi", " there"]), view=Peek())
    assert on_disk[0] == [("hello", STATUS_INTERRUPTED)]  # until the answer replaces it
    assert statuses(rig.saved()) == [("hello", None), ("hi there", None)]


def test_the_question_saved_first_records_the_model_in_use_after_a_switch(
    tmp_path: Path,
) -> None:
    rig = Rig(tmp_path)
    rig.send("hello")
    rig.conversation.switch_model("other-model")
    models_on_disk: list[str] = []

    class Peek(View):
        def text(self, delta: str) -> None:  # a crash now keeps what the file says
            models_on_disk.append(rig.saved()["model"])

    rig.providers["other-model"].enqueue(Reply(text=["hi"]))
    rig.conversation.send("again", Peek())
    assert models_on_disk == ["other-model"]


def test_sigterm_mid_answer_saves_what_arrived_then_stops(tmp_path: Path) -> None:
    rig = Rig(tmp_path)
    c = rig.conversation

    class Terminating(View):
        def text(self, delta: str) -> None:
            raise Terminated

    with pytest.raises(Terminated):
        rig.send("hello", Reply(text=["Half an ", "answer"]), view=Terminating())
    assert not c.is_new
    assert statuses(rig.saved()) == [("hello", None), ("Half an ", STATUS_INTERRUPTED)]


def test_prices_charge_every_call_of_the_turn_to_the_days_tally(tmp_path: Path) -> None:
    prices = {"fake-model": {"input": 2.0, "output": 10.0}}  # per million tokens
    no_tools = ToolRegistry([], ToolContext(workspace=tmp_path))  # a call is answered anyway
    rig = Rig(tmp_path, config={"prices": prices}, tools=no_tools, save=False)  # saved or not
    calls = [
        Reply(tool_calls=[tool_call("no_such_tool", {})], usage=Usage(1000, 100, 1100)),
        Reply(text="done", usage=Usage(2000, 300, 2300)),
    ]
    result = rig.send("hello", *calls)
    cost = (3000 * 2.0 + 400 * 10.0) / 1_000_000
    assert result.usage.cost == pytest.approx(cost)
    assert [c.usage.cost for c in result.calls if c.usage] == pytest.approx(
        [(1000 * 2.0 + 100 * 10.0) / 1e6, (2000 * 2.0 + 300 * 10.0) / 1e6]
    )
    assert result.cost_today == pytest.approx(cost)
    tally = json.loads((rig.settings.data_dir / COSTS_FILE).read_text("utf-8"))
    assert list(tally.values()) == [pytest.approx(cost)]
    assert rig.store.list() == []


# ---- undo and retry ----


def test_undo_removes_the_last_exchange(tmp_path: Path) -> None:
    rig = Rig(tmp_path)
    c = rig.conversation
    assert c.undo() == []  # nothing saved yet
    rig.send("one")
    rig.send("two")
    removed = c.undo()
    assert [m.content for m in removed] == ["two", "answer to two"]
    assert contents(rig.saved()) == ["one", "answer to one"]
    assert [m.content for m in c.session.messages] == ["one", "answer to one"]


def test_retry_replaces_a_good_answer(tmp_path: Path) -> None:
    rig = Rig(tmp_path)
    c = rig.conversation
    assert c.last_question() is None and c.retry(View()) is None
    rig.send("the question", "first answer")
    last = c.last_question()
    assert last is not None and last[0].content == "the question" and last[1] is False
    rig.provider.enqueue("second answer")
    result = c.retry(View())
    assert result is not None and result.answer == "second answer"
    assert contents(rig.saved()) == ["the question", "second answer"]
    assert rig.sent() == [("user", "the question")]  # the removed answer is not sent


def test_retry_replaces_a_failed_attempt_without_sending_it(tmp_path: Path) -> None:
    rig = Rig(tmp_path)
    c = rig.conversation
    rig.send("fine", "ok")
    failed = rig.send("broken", Reply(text="half", error=ProviderError("server error 500")))
    assert failed.status == "failed"
    last = c.last_question()
    assert last is not None and last[1] is True
    rig.provider.enqueue("now it works")
    assert c.retry(View()) is not None
    assert contents(rig.saved()) == ["fine", "ok", "broken", "now it works"]
    assert rig.sent() == [("user", "fine"), ("assistant", "ok"), ("user", "broken")]


# ---- what the session says ----


def test_rename_waits_for_the_first_turn_then_writes_the_file(tmp_path: Path) -> None:
    rig = Rig(tmp_path)
    c = rig.conversation
    assert c.rename("  Tea   notes ") == "Tea notes"
    assert rig.store.list() == []  # a new conversation is saved by its first turn
    rig.send("hello")
    assert rig.saved()["title"] == "Tea notes"  # not replaced by the first message
    c.rename("Later name")
    assert rig.saved()["title"] == "Later name" and c.session.title == "Later name"


def test_set_system_wins_over_system_and_clear_drops_both(tmp_path: Path) -> None:
    rig = Rig(tmp_path, system="Answer in French.")
    c = rig.conversation
    assert c.system == "Answer in French."
    rig.send("one")
    assert "Answer in French." in rig.provider.requests[-1].messages[0]["content"]
    c.set_system("Answer in haiku.")
    assert rig.saved()["system"] == "Answer in haiku." and c.system == "Answer in haiku."
    rig.send("two")
    system = rig.provider.requests[-1].messages[0]["content"]
    assert "Answer in haiku." in system and "French" not in system
    c.set_system("")
    assert rig.saved()["system"] == "" and c.system is None
    rig.send("three")
    system = rig.provider.requests[-1].messages[0]["content"]
    assert "haiku" not in system and "French" not in system
    c.new()
    assert c.system == "Answer in French."  # --system is back for a new conversation


def test_set_summary_is_saved_and_sent(tmp_path: Path) -> None:
    rig = Rig(tmp_path)
    c = rig.conversation
    c.set_summary("We talk about tea.")
    assert c.session.summary == "We talk about tea." and rig.store.list() == []
    rig.send("hello")
    assert rig.saved()["summary"] == "We talk about tea."
    assert "We talk about tea." in rig.provider.requests[-1].messages[0]["content"]
    c.set_summary("")
    assert rig.saved()["summary"] == ""


# ---- which session ----


def test_new_and_resume_switch_sessions_and_revoke_the_grants(tmp_path: Path) -> None:
    rig = Rig(tmp_path)
    c = rig.conversation
    rig.send("first talk")
    first = c.session.id
    c.policy.session_allowed.add("write_file")
    assert c.new("Second") == ["write_file"]
    assert c.is_new and c.session.title == "Second" and c.policy.session_allowed == set()
    rig.send("second talk")
    assert c.session.id != first
    c.policy.session_allowed.add("edit_file")
    assert c.resume(first[:6]) == ["edit_file"]
    assert c.session.id == first and not c.is_new
    rig.send("back again")
    assert rig.sent()[0] == ("user", "first talk")  # the resumed history is sent
    with pytest.raises(CountbotError):
        c.resume("zzzz")


def test_fork_copies_the_conversation_up_to_a_message_and_goes_on_there(
    tmp_path: Path,
) -> None:
    rig = Rig(tmp_path)
    c = rig.conversation
    rig.send("one")
    rig.send("two")
    original = c.session.id
    with pytest.raises(UsageError):
        c.fork(5)
    fork = c.fork(2, "Branch")
    assert fork.id != original and c.session.id == fork.id and not c.is_new
    assert contents(rig.saved()) == ["one", "answer to one"]
    assert rig.saved()["title"] == "Branch"
    rig.send("three")
    assert contents(rig.saved()) == ["one", "answer to one", "three", "answer to three"]
    assert contents(json.loads(rig.store.path(original).read_text("utf-8"))) == [
        "one",
        "answer to one",
        "two",
        "answer to two",
    ]  # the original is left as it was


def test_delete_of_the_current_session_starts_a_new_one(tmp_path: Path) -> None:
    rig = Rig(tmp_path)
    c = rig.conversation
    rig.send("keep me")
    kept = c.session.id
    c.new()
    rig.send("delete me")
    assert c.delete(kept) is False and c.session.id != kept
    assert c.delete(c.session.id) is True and c.is_new
    assert rig.store.list() == []


def test_open_session_new_continued_or_named(tmp_path: Path) -> None:
    rig = Rig(tmp_path)
    s = rig.settings
    session, is_new = open_session(rig.store, s, ref=None, cont=True)
    assert is_new  # -c with nothing saved yet starts a new conversation
    rig.send("hello")
    sid = rig.conversation.session.id
    assert open_session(rig.store, s, ref=None, cont=True)[0].id == sid
    assert open_session(rig.store, s, ref=sid[:5], cont=False) == (rig.store.load(sid), False)
    assert open_session(rig.store, s, ref=None, cont=False)[1] is True


# ---- model, tools, compact ----


def test_switch_model_keeps_the_session_the_policy_and_the_system_override(
    tmp_path: Path,
) -> None:
    rig = Rig(tmp_path, system="Be brief.")
    c = rig.conversation
    rig.send("hello")
    old = rig.provider
    c.policy.session_allowed.add("write_file")
    c.switch_model("other-model")
    assert old.closed and c.provider.model == "other-model"
    assert c.engine.policy is c.policy and c.policy.session_allowed == {"write_file"}
    rig.providers["other-model"].enqueue("from the other model")
    c.send("again", View())
    req = rig.providers["other-model"].requests[0]
    assert req.model == "other-model" and "Be brief." in req.messages[0]["content"]
    assert contents(rig.saved())[-1] == "from the other model"


def test_tool_mode_revokes_grants_except_auto(tmp_path: Path) -> None:
    c = Rig(tmp_path).conversation
    c.policy.session_allowed.add("write_file")
    assert c.set_tool_mode("AUTO") == ("auto", [])
    assert c.policy.mode == "auto" and c.policy.session_allowed == {"write_file"}
    assert c.set_tool_mode("ask") == ("ask", ["write_file"])
    with pytest.raises(UsageError, match="unknown tool mode 'sometimes'"):
        c.set_tool_mode("sometimes")
    assert c.policy.mode == "ask"


def test_compact_asks_the_keeper_once_the_conversation_is_saved(tmp_path: Path) -> None:
    rig = Rig(tmp_path)
    c = rig.conversation
    assert c.compact() is None  # nothing saved yet
    rig.send("hello")
    assert c.compact() == ["a line"] and rig.keeper.compacted == [c.session.id]
