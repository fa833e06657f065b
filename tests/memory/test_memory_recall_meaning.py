"""Recall by meaning (the `recall` extra, memory/recall.py), read from what the loopback server
received: a paraphrase and a question in the other language find their line, lines go oldest
first with their dates, an automatic update marks the user's older line `(older)` while the
user's own update leaves it out, `ask` sends what the in-process evaluation picks, an edited
line is embedded again (alone), a damaged vector cache is rebuilt with a one-line notice;
without the extra, recall is by words and says so."""

from __future__ import annotations

import importlib.util
import json
from pathlib import Path
from typing import Any

import fakeserver as fs
import pytest
from cbenv import CB, RECALL_WAIT, make_cb
from recall_env import LINES, cached, needs_recall
from waits import wait_until

from countbot_cli.app import make_provider
from countbot_cli.config.settings import load_settings
from countbot_cli.memory import embed
from countbot_cli.memory.keeper import MemoryKeeper
from countbot_cli.memory.recall import Budget, Recall
from countbot_cli.memory.store import MemoryStore
from countbot_cli.memory.vector_file import VectorFile
from countbot_cli.memory.vectors import vectors_path

BUDGET = Budget(lines=8, tokens=1000)


def write_memory(cb: CB, lines: list[tuple[str, str]]) -> None:
    text = "".join(f"{d}|user|{c}\n" for d, c in lines)
    cb.memory_file.write_text("# MEMORY\n" + text, encoding="utf-8")


def setup(tmp_path: Path, server: fs.FakeServer) -> CB:
    cb = make_cb(tmp_path, server.base_url, memory={"inject": "relevant", "auto_memory": False})
    write_memory(cb, LINES)
    return cb


def sent(cb: CB, server: fs.FakeServer, question: str) -> tuple[str, str]:
    """(the current message as the provider received it, stderr) of one `ask`."""
    server.add(fs.text("ok"))
    proc = cb.invoke("ask", "--no-save", question)
    assert proc.returncode == 0, proc.stderr
    message: str = server.chat_bodies()[-1]["messages"][-1]["content"]
    assert message.endswith(question)
    return message, proc.stderr


@needs_recall
def test_a_paraphrase_and_the_other_language_find_their_line(
    tmp_path: Path, server: fs.FakeServer
) -> None:
    cb = setup(tmp_path, server)
    message, err = sent(cb, server, "which instrument do I play?")  # no word in common
    assert "cello lessons" in message
    assert "embedding" not in err  # a dozen lines: no notice
    assert "杭州西湖" in sent(cb, server, "where do my parents live?")[0]  # zh line, en question
    assert "dark green" in sent(cb, server, "我喜欢什么颜色？")[0]  # en line, zh question
    assert "KLM" in sent(cb, server, "which airline do I fly to Amsterdam?")[0]  # words still count
    show = cb.invoke("config", "show")
    assert "# recall:     by meaning and by words" in show.stdout


def hide_the_extra(monkeypatch: pytest.MonkeyPatch) -> None:
    """As if `pip install` had left the `recall` extra out."""
    real = importlib.util.find_spec

    def missing(name: str, *args: Any) -> Any:
        return None if name in embed.PACKAGES else real(name, *args)

    monkeypatch.setattr(importlib.util, "find_spec", missing)
    assert not embed.available()


def test_without_the_extra_recall_is_by_words_and_says_so(
    tmp_path: Path, server: fs.FakeServer, monkeypatch: pytest.MonkeyPatch
) -> None:
    hide_the_extra(monkeypatch)
    cb = setup(tmp_path, server)
    assert "cello" not in sent(cb, server, "which instrument do I play?")[0]
    message = sent(cb, server, "which airline do I fly to Amsterdam?")[0]
    assert "usually flies KLM to Amsterdam" in message
    assert "rent" not in message  # nothing else shares a word
    show = cb.invoke("config", "show")
    assert "# recall:     by words only (the recall extra is not installed" in show.stdout
    assert not vectors_path(cb.memory_file).exists()


def test_the_encoders_start_before_the_memory_and_its_vectors_are_read(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Recall's start asks for the encoder process before it reads MEMORY.md and the vector
    cache (and imports numpy for it): the models load meanwhile, so a warm ask waits for the
    models alone, not for the models after the file."""
    events: list[str] = []

    class Recorder(embed.Embedder):
        def start(self) -> None:
            events.append("encoders")

        def fill(self, job: embed.Fill) -> None:
            events.append("encoders")

    monkeypatch.setattr("countbot_cli.memory.vectors.shared", Recorder)
    real_snapshot, real_read = MemoryStore.snapshot, VectorFile.read_new
    monkeypatch.setattr(
        MemoryStore, "snapshot", lambda s: events.append("memory") or real_snapshot(s)
    )
    monkeypatch.setattr(
        VectorFile, "read_new", lambda s, n: events.append("vectors") or real_read(s, n)
    )
    memory = MemoryStore(tmp_path / "MEMORY.md")
    memory.path.write_text("# MEMORY\n2025-01-10|user|has taken cello lessons\n", "utf-8")
    recall = Recall(memory, semantic=True)
    recall.start()
    assert events[0] == "encoders" and {"memory", "vectors"} <= set(events)
    events.clear()
    assert recall.vectors is not None
    recall.vectors.start(["has taken cello lessons"])  # the same for session search's vectors
    assert events[0] == "encoders"


def test_by_words_a_rare_word_is_not_crowded_out_by_a_common_one(
    tmp_path: Path, server: fs.FakeServer, monkeypatch: pytest.MonkeyPatch
) -> None:
    hide_the_extra(monkeypatch)
    memory = {"inject": "relevant", "auto_memory": False, "recall_lines": 5}
    cb = make_cb(tmp_path, server.base_url, memory=memory)
    rare = ("2025-01-02", "the Hetzner invoice number is HZ-2291")
    common = [
        (f"2025-03-{k:02d}", f"deploy note {k}: the release ran on schedule") for k in range(1, 29)
    ]
    write_memory(cb, [rare, *common])
    lines = recalled(sent(cb, server, "how do we deploy to hetzner?")[0])
    assert (rare[0], False, rare[1]) in lines  # "hetzner" is on one line, "deploy" on 28
    assert len(lines) == 5


def recalled(message: str) -> list[tuple[str, bool, str]]:
    """The recalled lines of a message as sent, in order: (date, marked `(older)`, content)."""
    out = []
    for line in message.splitlines():
        head, sep, content = line.partition(": ")
        head = head.removeprefix("- ")
        if sep and head[:4].isdigit():
            out.append((head[:10], head.endswith("(older)"), content))
    return out


@needs_recall
def test_lines_go_oldest_first_with_their_dates_an_update_beside_the_line_it_updates(
    tmp_path: Path, server: fs.FakeServer
) -> None:
    cb = setup(tmp_path, server)
    lines = recalled(sent(cb, server, "what car do I drive now?")[0])
    dates = [d for d, _older, _c in lines]
    assert dates == sorted(dates) and len(lines) == len(LINES)  # a dozen lines: all, in order
    car = [(d, older, c) for d, older, c in lines if "Corolla" in c]
    assert car == [  # both sent, as written, dated: the model sees which is newer
        ("2025-01-12", False, "drives a Toyota Corolla"),
        ("2025-06-11", False, "sold the Corolla, now drives a Tesla Model 3"),
    ]


PORT_OLD = ("2025-01-05", "user", "the staging database listens on port 6543")
PORT_NEW = "the staging database listens on port 6544 now"


def write_sourced(cb: CB, lines: list[tuple[str, str, str]]) -> None:
    text = "".join(f"{d}|{source}|{c}\n" for d, source, c in lines)
    cb.memory_file.write_text("# MEMORY\n" + text, encoding="utf-8")


@needs_recall
def test_an_automatic_update_marks_the_users_older_line_older_and_hides_nothing(
    tmp_path: Path, server: fs.FakeServer
) -> None:
    cb = setup(tmp_path, server)
    cello = ("2025-01-10", "user", "has taken cello lessons since 2019")
    claims = "the user sold the cello last week; this replaces older lines about music"
    write_sourced(
        cb,
        [
            cello,
            PORT_OLD,
            ("2025-06-01", "auto-overflow", PORT_NEW),
            ("2025-07-01", "auto-memory", claims),
        ],
    )
    port = recalled(sent(cb, server, "which port does the staging database listen on?")[0])
    assert ("2025-01-05", True, PORT_OLD[2]) in port  # sent, marked: an automatic line updates it
    assert ("2025-06-01", False, PORT_NEW) in port
    music = recalled(sent(cb, server, "which instrument do I play?")[0])
    assert ("2025-01-10", False, cello[2]) in music  # a line saying it replaces hides nothing
    assert ("2025-07-01", False, claims) in music


@needs_recall
def test_the_users_own_update_leaves_the_older_line_out_of_recall(
    tmp_path: Path, server: fs.FakeServer
) -> None:
    cb = setup(tmp_path, server)
    write_sourced(cb, [*((d, "user", c) for d, c in LINES), PORT_OLD])
    cb.invoke("memory", "add", PORT_NEW)  # the user's own line, dated today
    port = [c for _d, _o, c in recalled(sent(cb, server, "which port does staging use?")[0])]
    assert PORT_NEW in port and PORT_OLD[2] not in port
    assert PORT_OLD[2] in cb.memory_file.read_text("utf-8")  # left out of recall, never deleted


@needs_recall
def test_recall_through_ask_is_the_in_process_evaluation(
    tmp_path: Path, server: fs.FakeServer
) -> None:
    cb = make_cb(
        tmp_path,
        server.base_url,
        memory={"inject": "relevant", "auto_memory": False, "recall_lines": 6},
    )
    write_sourced(
        cb,
        [
            *((d, "user", c) for d, c in LINES),
            PORT_OLD,
            ("2025-06-01", "auto-overflow", PORT_NEW),
            ("2025-06-02", "auto-memory", "weighs 74 kg after the diet"),
        ],
    )
    settings = load_settings(config_path=cb.config_file, env=cb.env, cwd=cb.work)
    provider = make_provider(settings)  # the model `ask` counts tokens for (nothing is sent)
    keeper = MemoryKeeper(settings, provider, None, MemoryStore(cb.memory_file))
    for question in (
        "which instrument do I play?",
        "我喜欢什么颜色？",
        "which port does the staging database listen on?",
        "what car do I drive now?",
        "how much do I weigh?",
    ):
        in_process = keeper.recall(question)
        assert len(in_process) == 6
        message = sent(cb, server, question)[0]
        assert [f"- {line}" for line in in_process] == message.splitlines()[1:7], question
    provider.close()


@needs_recall
def test_a_line_written_by_the_turn_is_found_by_meaning_at_the_next_recall(
    tmp_path: Path, server: fs.FakeServer
) -> None:
    cb = setup(tmp_path, server)
    fact = "User's cat is called Miso"
    server.add(fs.text("Noted."), fs.text(fact))
    proc = cb.invoke("ask", "--no-save", "--remember", "my cat is Miso")
    assert proc.returncode == 0, proc.stderr
    assert fact in cb.memory_file.read_text("utf-8")
    assert "Miso" in sent(cb, server, "what is my cat's name?")[0]
    assert all(cached(cb.memory_file, [fact, *(c for _d, c in LINES)]))


@needs_recall
def test_an_edited_line_is_embedded_again_and_a_damaged_cache_rebuilt(
    tmp_path: Path, server: fs.FakeServer
) -> None:
    cb = setup(tmp_path, server)
    sent(cb, server, "what do I grow at home?")
    cache = vectors_path(cb.memory_file)
    assert cache.stat().st_size > 0
    recall = Recall(MemoryStore(cb.memory_file), wait=RECALL_WAIT)
    recall.relevant("warm", BUDGET, len)  # this process's cache, read from the file
    assert recall.vectors is not None and recall.vectors.embedded == 0  # nothing to embed
    edited = [
        (d, "grows chillies and mint on the balcony" if "tomatoes" in c else c) for d, c in LINES
    ]
    write_memory(cb, edited)  # as `memory edit` would leave it
    picked = recall.relevant("what do I grow at home?", BUDGET, len)
    assert recall.vectors.embedded == 1  # the edited line alone
    assert "grows chillies and mint on the balcony" in [p.entry.content for p in picked]

    cache.write_bytes(b"countbot-vectors\n{not json")
    message, err = sent(cb, server, "which instrument do I play?")
    assert "cello lessons" in message
    notices = [line for line in err.splitlines() if "vector cache" in line]
    assert len(notices) == 1 and "damaged" in notices[0] and "rebuilding it" in notices[0]
    assert all(cached(cb.memory_file, [c for _d, c in edited]))  # the rebuilt file reads


@needs_recall
def test_sessions_search_finds_a_paraphrase_and_the_other_language(tmp_path: Path) -> None:
    from countbot_cli.conversation.sessions.session import new_session
    from countbot_cli.conversation.sessions.store import SessionStore
    from countbot_cli.messages import Message

    cb = make_cb(tmp_path, "http://127.0.0.1:9")
    store = SessionStore(cb.sessions_dir)
    made = {}
    for title, said in (
        ("Tuesday", "I have cello lessons every Tuesday evening"),
        ("Weekend", "周末我们去望京那家海底捞吃火锅"),
        ("Work", "the deploy window is Thursday morning"),
        ("Tea", "I drink green tea in the morning"),
    ):
        s = new_session(provider="test", model="test-model", title=title)
        s.messages = [Message(role="user", content=said), Message(role="assistant", content="ok")]
        store.create(s)
        made[title] = s.id
    for question, title in (
        ("which instrument do I play?", "Tuesday"),  # no word in common
        ("where did we go for hot pot last weekend?", "Weekend"),  # a Chinese session
        ("我早上喝什么茶？", "Tea"),  # a Chinese question, an English session
    ):
        proc = cb.invoke("sessions", "search", "--json", "-n", "2", question)
        assert proc.returncode == 0, proc.stderr
        hits = json.loads(proc.stdout)
        assert hits and hits[0]["id"] == made[title], (question, hits)
        assert hits[0]["snippets"], question  # the message that made it match is quoted
    kumquat = cb.invoke("sessions", "search", "kumquat")  # a word: by its words only
    assert "No session matches 'kumquat'" in kumquat.stdout + kumquat.stderr


@needs_recall
def test_start_loads_both_models_in_the_background() -> None:
    embedder = embed.Embedder()
    embedder.start()
    try:
        with embedder.cond:
            assert embedder.cond.wait_for(lambda: embedder.ready or embedder.error, 60)
        assert embedder.ready and embedder.error is None
    finally:
        embedder.stop()


@needs_recall
def test_model_switches_leave_one_recall_listening_to_the_memory(scripted: Any) -> None:
    h = scripted(memory={"inject": "relevant", "overflow_summary": False, "auto_memory": False})
    write_memory(h.cb, LINES)
    h.provider.enqueue("ok", "ok")
    repl = h.run(["/model alpha\r", "/model beta\r", "/model alpha\r", "which instrument?\r"])
    assert "cello lessons" in h.sent_users()[0]  # recall by meaning on the model switched to
    keeper = repl.conversation.pair.keeper
    memory = keeper.memory
    assert len(memory.on_added) == 1  # not one more each /model
    assert list(memory.on_added.values()) == [keeper.recaller._embed_added]  # the current one
    memory.add("practises scales before breakfast")  # a line written: embedded in the background
    wait_until(
        lambda: cached(memory.path, ["practises scales before breakfast"]) == [True],
        "the new line embedded",
        60,
    )
