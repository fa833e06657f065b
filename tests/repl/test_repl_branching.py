"""Branching and finding conversations, as a user does it: `sessions fork` and `/fork`, `/edit`,
`/undo` giving the title back, `/resume`'s picker, `/search`, memory lines traced through
/undo, /retry and a fork, and the memory upkeep running behind the next prompt."""

from __future__ import annotations

import json
import threading
from pathlib import Path
from typing import Any

import fakeserver as fs
from cbenv import make_cb
from repl_harness import Harness
from waits import wait_until

from countbot_cli.conversation.sessions.session import new_session
from countbot_cli.conversation.sessions.store import SessionStore
from countbot_cli.messages import Message, utc_now
from countbot_cli.prompts import RECALL_END


def saved(store: SessionStore, title: str, exchanges: int, word: str = "q") -> str:
    s = new_session(provider="test", model="test-model", title=title)
    for i in range(exchanges):
        s.messages += [
            Message(role="user", content=f"{title} {word}{i}"),
            Message(role="assistant", content=f"{title} a{i}"),
        ]
    store.create(s)
    return s.id


def contents(store: SessionStore, sid: str) -> list[str]:
    return [m.content for m in store.load(sid).messages]


def in_the_picker(keys: str) -> Any:
    """A step for the session picker (its own screen, not the main prompt): type `keys` once
    the prompt has taken the /resume line (the picker reads them when it is up)."""

    def step(h: Harness) -> None:
        h.wait_taken()
        h.send(keys)

    return step


# ---- fork ----


def test_sessions_fork_copies_up_to_message_n_and_leaves_the_original(tmp_path: Path) -> None:
    cb = make_cb(tmp_path, "http://127.0.0.1:9")
    store = SessionStore(cb.sessions_dir)
    sid = saved(store, "Trip plan", 3)
    before = cb.sessions_dir.joinpath(f"{sid}.json").read_bytes()
    proc = cb.invoke("sessions", "fork", sid[:6], "--at", "3")
    assert proc.returncode == 0, proc.stderr
    assert f"Forked {sid} into " in proc.stdout and "“Trip plan (fork)” (3 messages)" in proc.stdout
    new = next(h["id"] for h in store.list() if h["id"] != sid)
    assert f"countbot -s {new}" in proc.stdout
    assert contents(store, new) == ["Trip plan q0", "Trip plan a0", "Trip plan q1"]
    assert [m.id for m in store.load(new).messages] == [m.id for m in store.load(sid).messages][:3]
    assert cb.sessions_dir.joinpath(f"{sid}.json").read_bytes() == before  # untouched
    whole = cb.invoke("sessions", "fork", sid, "--title", "Copy")
    assert whole.returncode == 0 and "“Copy” (6 messages)" in whole.stdout
    bad = cb.invoke("sessions", "fork", sid, "--at", "7")
    assert bad.returncode == 2
    assert "no message 7 to fork at (this conversation has 6 messages)" in bad.stderr
    assert cb.invoke("sessions", "fork", "nosuch").returncode == 2
    assert len(store.list()) == 3  # the failed forks made nothing


def test_fork_in_the_repl_goes_on_in_the_copy(scripted: Any) -> None:
    h = scripted()
    sid = saved(h.store, "Menu", 3)
    h.provider.enqueue("in the fork")
    repl = h.run(
        ["/fork 2\r", "what next?\r", "/fork x\r"], session=h.store.load(sid), is_new=False
    )
    out = h.text()
    fork = repl.conversation.session.id
    assert fork != sid
    assert f"Forked into session {fork} “Menu (fork)” (2 messages)" in out
    assert f"The original is unchanged: /resume {sid}" in out
    assert "usage: /fork [N]" in out
    assert contents(h.store, fork) == ["Menu q0", "Menu a0", "what next?", "in the fork"]
    assert len(contents(h.store, sid)) == 6  # the original as it was
    # the request after the fork carried the fork's history only
    assert [m["content"] for m in h.sent()[0][1:]] == [
        "Menu q0",
        "Menu a0",
        "what next?",
    ]


# ---- /edit and /undo ----


def test_edit_asks_the_changed_question_in_place_of_the_last(scripted: Any) -> None:
    h = scripted()
    h.provider.enqueue("Paris.", "Rome.", "Madrid.")
    h.run(
        [
            "capital of France?\r",
            "/edit\r",
            # the prompt holds the old question: delete "France?" and type the new end
            lambda h: h.wait_line("capital of France?"),
            lambda h: h.send("\x08" * len("France?") + "Italy?\r"),
            "/edit capital of Spain?\r",
            "/edit\r",
            lambda h: h.wait_line("capital of Spain?"),
            lambda h: h.send("\x03\r"),  # Ctrl-C clears the line; an empty line cancels
        ]
    )
    msgs = h.session_data()["messages"]
    assert [m["content"] for m in msgs] == ["capital of Spain?", "Madrid."]
    assert h.sent_users() == ["capital of France?", "capital of Italy?", "capital of Spain?"]
    # the edited request does not carry the replaced exchange
    assert len(h.sent()[1]) == 2
    assert "Edit cancelled; the conversation is unchanged." in h.text()
    assert h.session_data()["title"] == "capital of Spain?"  # the title follows the question


def test_undo_of_the_first_exchange_gives_the_title_back(tmp_path: Path, scripted: Any) -> None:
    h = scripted()
    h.provider.enqueue("one", "two")
    repl = h.run(["first question\r", "/undo\r", "another start\r", "/undo\r"])
    # undone first exchange: untitled; the next question named it
    data = h.session_data()
    assert data["messages"] == [] and data["title"] == ""
    assert "(untitled)" in repl.toolbar()
    h2 = scripted(root=tmp_path / "b")
    h2.provider.enqueue("three")
    h2.run(["/rename Kept name\r", "a question\r", "/undo\r"])
    assert h2.session_data()["title"] == "Kept name"  # a title the user gave stays
    h3 = scripted(root=tmp_path / "c")
    h3.provider.enqueue("x", "y")
    h3.run(["opening line\r", "second line\r", "/undo\r"])
    assert h3.session_data()["title"] == "opening line"  # not the first exchange: kept


# ---- /resume picker and /search ----


def test_resume_picker_filters_as_you_type_and_resumes_the_choice(scripted: Any) -> None:
    h = scripted()
    tea = saved(h.store, "Tea notes", 1)
    saved(h.store, "Coffee beans", 1)
    deep = saved(h.store, "Misc", 1, word="zanzibar ")
    repl = h.run(
        [
            "/resume\r",
            in_the_picker("tea"),  # typed into the picker's line: only "Tea notes" is left
            in_the_picker("\r"),
            "/resume zanzib\r",  # words found in a message (full-text search)
            in_the_picker("\r"),
            "/resume nothing-like-it\r",
            in_the_picker("\r"),  # no row: Enter resumes nothing
        ]
    )
    out = h.text()
    assert "Resumed “Tea notes”" in out
    assert "Resumed “Misc”" in out
    assert out.count("Nothing resumed.") == 1
    assert repl.conversation.session.id == deep
    assert tea != deep


def test_picker_rows_follow_the_filter(tmp_path: Path) -> None:
    from countbot_cli.ui.session_picker import Picker

    cb = make_cb(tmp_path, "http://127.0.0.1:9")
    store = SessionStore(cb.sessions_dir)
    a = saved(store, "Green tea", 1)
    b = saved(store, "Black tea", 1, word="oolong ")
    c = saved(store, "Python tips", 1, word="asyncio ")
    p = Picker(store, current=c)
    assert {r.id for r in p.filter("")} == {a, b}  # the current session is left out
    assert [r.id for r in p.filter("green")] == [a]
    rows = p.filter("oolong")
    assert [r.id for r in rows] == [b] and "oolong" in rows[0].snippet
    assert p.filter("GREEN TEA")[0].id == a
    p.filter("tea")
    p.move(1)
    p.move(5)
    assert p.chosen() == p.rows[-1].id
    assert p.filter("nope") == [] and p.chosen() is None


def test_search_lists_matches_with_id_title_date_and_snippet(scripted: Any) -> None:
    h = scripted()
    sid = saved(h.store, "Garden", 2, word="tomato \x1b[2J")
    saved(h.store, "Other", 1)
    h.run(["/search tomato\r", "/search\r", "/search kumquat\r"])
    out = h.text()
    assert f"{sid[:8]}  Garden · just now" in out
    assert "You: Garden tomato" in out and "\x1b[2J" not in out
    assert "Other" not in out.split("/resume ID switches")[0].split("Garden")[1]
    assert "usage: /search WORDS" in out
    assert "No session matches 'kumquat'." in out


# ---- memory traced through /undo, /retry and a fork ----


WORDS = "one two three four five six seven eight nine ten"


def test_memory_lines_trace_to_their_messages_through_undo_retry_and_fork(
    harness: Any, server: fs.FakeServer
) -> None:
    h = harness(memory={"auto_messages": 2})
    facts = iter(f"User fact number {w}." for w in WORDS.split())  # no number the messages lack

    def respond(body: dict[str, Any]) -> fs.Reply:
        msgs = body["messages"]
        if msgs[0]["role"] == "system":  # answered to the user's words (after recalled lines)
            return fs.text("answer to " + msgs[-1]["content"].rsplit(RECALL_END, 1)[-1].strip())
        return fs.text(next(facts))

    server.responder = respond

    # automatic memory finds where it stopped after an /undo by the time of the messages
    # (to the second: memory/keeper.py auto_cursor), so each new turn starts in a later second
    # than every message made so far (the undone ones included)
    def later(h: Harness) -> None:
        h.wait_idle()
        now = utc_now()
        wait_until(lambda: utc_now() > now, "the next second", 5)

    def distilled(h: Harness) -> None:
        """The upkeep after "alpha" has written its line before /undo is typed (otherwise the
        order of the two depends on how fast the machine is)."""
        h.wait_for("answer to alpha")
        wait_until(lambda: len(server.requests) >= 2, "the upkeep's request", 20)
        worker = h.repl.conversation.worker if h.repl is not None else None
        assert worker is not None and worker.wait(20)

    steps = ["alpha\r", distilled, "/undo\r", later, "beta\r", later, "/retry\r"]
    h.run([*steps, "/fork 2\r", "gamma\r"])
    sessions = {x["title"]: x["id"] for x in h.store.list()}
    original, fork = sessions["beta"], sessions["beta (fork)"]

    def why(n: int) -> str:
        proc = h.cb.invoke("memory", "why", str(n))
        assert proc.returncode == 0, proc.stderr
        return proc.stdout

    shown = json.loads(h.cb.invoke("memory", "show", "--json").stdout)
    by_fact = {e["content"]: e for e in shown}
    # the line from "alpha": its messages were undone; why says so instead of inventing them
    first = by_fact["User fact number one."]
    assert first["sources"][0]["session"] == original
    assert why(first["number"]).count("no longer in the session (undone or retried)") == 2
    # "beta" was answered, then retried: the first answer's line names the replaced pair,
    # the retried answer's line the pair as it stands
    replaced = by_fact["User fact number two."]
    assert replaced["sources"][0]["session"] == original
    assert why(replaced["number"]).count("no longer in the session (undone or retried)") == 2
    again = by_fact["User fact number three."]
    live = [m.id for m in h.store.load(original).messages]
    assert again["sources"][0] == {"session": original, "messages": live}
    text = why(again["number"])
    assert f"From session {original}" in text and "beta" in text and "answer to beta" in text
    # in the fork, "gamma" made a line traced to the fork's own messages
    forked = by_fact["User fact number four."]
    assert forked["sources"][0]["session"] == fork
    text = why(forked["number"])
    assert f"From session {fork}" in text and "gamma" in text and "answer to gamma" in text


# ---- the upkeep behind the prompt ----


def test_memory_upkeep_does_not_hold_the_next_prompt_and_nothing_is_lost(
    harness: Any, server: fs.FakeServer
) -> None:
    """The first summary is held until the second question reached the server: the REPL gets
    there only if neither the prompt nor the next message waits for the upkeep."""
    h = harness(memory={"auto_messages": 2})
    second_sent = threading.Event()
    summaries: list[bool] = []  # per summary call: was the second question sent meanwhile
    chats: list[str] = []

    def respond(body: dict[str, Any]) -> fs.Reply:
        msgs = body["messages"]
        if msgs[0]["role"] == "system":
            chats.append(msgs[-1]["content"])
            if msgs[-1]["content"] == "second question":
                second_sent.set()
            return fs.text("answer to " + msgs[-1]["content"])
        if not summaries:  # the first summary: held (a generous bound, not a timing)
            summaries.append(second_sent.wait(30))
            return fs.text("User drinks green tea.")
        summaries.append(True)
        return fs.text("User walks to work.")

    server.responder = respond
    seen: dict[str, Any] = {}

    def prompt_is_back(h: Harness) -> None:
        assert h.repl is not None
        wait_until(lambda: h.prompts_shown >= 2, "the next prompt", 20)
        seen["running"] = h.repl.conversation.upkeep_running
        seen["toolbar"] = h.repl.toolbar()

    h.run(["first question\r", prompt_is_back, "second question\r"])
    assert summaries[:1] == [True] and chats == ["first question", "second question"]
    assert seen["running"] and "⟳ memory" in seen["toolbar"]  # the prompt came back meanwhile
    data = h.session_data()
    contents_ = [m["content"] for m in data["messages"] + data.get("archived", [])]
    assert contents_ == [
        "first question",
        "answer to first question",
        "second question",
        "answer to second question",
    ]
    memory = h.cb.memory_file.read_text(encoding="utf-8")
    assert "User drinks green tea." in memory  # the slow run's result was saved too
    assert data["cursors"].get("auto_memory") == 4  # and the later run covered the second exchange
    assert "User walks to work." in memory


def test_ask_c_prints_the_answer_before_its_memory_upkeep(
    tmp_path: Path, server: fs.FakeServer
) -> None:
    """`ask -c` keeps the upkeep in the foreground (a thread would be cut off at exit), but
    only after the answer is on stdout: the summary call is held until the test has read the
    answer. A one-off ask makes no upkeep call at all."""
    cb = make_cb(tmp_path, server.base_url, memory={"auto_messages": 2})
    answer_read = threading.Event()
    summaries: list[bool] = []  # per summary call: was the answer read before it was answered

    def respond(body: dict[str, Any]) -> fs.Reply:
        if body["messages"][0]["role"] == "system":
            return fs.text("the answer")
        summaries.append(answer_read.wait(30))  # a generous bound, not a timing
        return fs.text("User asked once.")

    server.responder = respond
    proc = cb.popen("ask", "-c", "--plain", "a question")
    assert proc.stdout is not None
    line = proc.stdout.readline()
    answer_read.set()
    assert line == "the answer\n"
    proc.communicate(timeout=40)
    assert proc.returncode == 0
    assert summaries == [True]
    assert "User asked once." in cb.memory_file.read_text(encoding="utf-8")
    one_off = cb.invoke("ask", "--plain", "another question")
    assert one_off.returncode == 0 and len(summaries) == 1  # no upkeep call for a one-off


# ---- what /undo and /edit took out is not found again ----


def found(h: Any, words: str) -> list[str]:
    """The snippets `countbot sessions search --json WORDS` shows, of every session found."""
    proc = h.cb.invoke("sessions", "search", "--json", words)
    assert proc.returncode == 0, proc.stderr
    return [s["text"] for hit in json.loads(proc.stdout) for s in hit["snippets"]]


def test_search_no_longer_finds_what_undo_or_edit_took_out(scripted: Any) -> None:
    h = scripted()
    earlier = [f"question {k} about lighthouses\r" for k in range(15)]
    h.provider.enqueue(*[f"answer {k}" for k in range(15)], "Okapis.", "Giraffes.", "Zebras?")
    h.run(
        [
            *earlier,
            "okapiword?\r",  # the 32nd message: the index's first piece is full
            "/search okapiword\r",
            "/edit giraffes?\r",  # that piece changes
            "zebraquux?\r",  # a piece of its own
            "/search zebraquux\r",
            "/undo\r",  # the piece goes
        ]
    )
    shown = h.text()
    assert "You: okapiword?" in shown and "You: zebraquux?" in shown  # found while there
    assert [m["content"] for m in h.session_data()["messages"][-2:]] == ["giraffes?", "Giraffes."]
    assert not any("okapiword" in s for s in found(h, "okapiword"))
    assert not any("zebraquux" in s for s in found(h, "zebraquux"))
    assert any("giraffes?" in s for s in found(h, "giraffes"))
    assert any("lighthouses" in s for s in found(h, "lighthouses"))
