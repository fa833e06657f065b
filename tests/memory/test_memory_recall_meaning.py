"""Recall by meaning (the `recall` extra, memory/recall.py), read from what the loopback server
received: a paraphrase and a question in the other language find their line, a superseded line
is not sent next to its update, an edited line is embedded again (alone), a damaged vector
cache is rebuilt with a one-line notice; without the extra, recall is by words and says so."""

from __future__ import annotations

import importlib.util
import json
from pathlib import Path
from typing import Any

import fakeserver as fs
import pytest
from cbenv import CB, make_cb

from countbot_cli.memory import embed
from countbot_cli.memory.recall import Recall
from countbot_cli.memory.store import MemoryStore
from countbot_cli.memory.vectors import VectorCache, vectors_path

LINES = [
    ("2025-01-10", "has taken cello lessons since 2019"),
    ("2025-01-12", "drives a Toyota Corolla"),
    ("2025-02-03", "usually flies KLM to Amsterdam"),
    ("2025-02-20", "favourite colour is dark green"),
    ("2025-03-01", "the production database is PostgreSQL 15"),
    ("2025-03-09", "grows tomatoes and basil on the balcony"),
    ("2025-04-02", "父母住在杭州西湖边"),
    ("2025-04-15", "the book club is reading Middlemarch"),
    ("2025-05-05", "prefers dark mode in every app"),
    ("2025-05-30", "每周一早上开周会"),
    ("2025-06-11", "sold the Corolla, now drives a Tesla Model 3"),
    ("2025-07-01", "the espresso machine needs descaling every two months"),
]


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


def test_without_the_extra_recall_is_by_words_and_says_so(
    tmp_path: Path, server: fs.FakeServer, monkeypatch: pytest.MonkeyPatch
) -> None:
    real = importlib.util.find_spec

    def missing(name: str, *args: Any) -> Any:  # as if `pip install` had left the extra out
        return None if name in embed.PACKAGES else real(name, *args)

    monkeypatch.setattr(importlib.util, "find_spec", missing)
    assert not embed.available()
    cb = setup(tmp_path, server)
    assert "cello" not in sent(cb, server, "which instrument do I play?")[0]
    message = sent(cb, server, "which airline do I fly to Amsterdam?")[0]
    assert "usually flies KLM to Amsterdam" in message
    assert "rent" not in message  # nothing else shares a word
    show = cb.invoke("config", "show")
    assert "# recall:     by words only (the recall extra is not installed" in show.stdout
    assert not vectors_path(cb.memory_file).exists()


def test_the_superseded_line_is_not_sent_next_to_its_update(
    tmp_path: Path, server: fs.FakeServer
) -> None:
    cb = setup(tmp_path, server)
    message, _ = sent(cb, server, "what car do I drive now?")
    assert "now drives a Tesla Model 3" in message
    assert "drives a Toyota Corolla" not in message
    assert "drives a Toyota Corolla" in cb.memory_file.read_text("utf-8")  # never deleted


def recalled(message: str) -> dict[str, bool]:
    """Each recalled line of a message as sent -> whether it was marked `(older)`."""
    out = {}
    for line in message.splitlines():
        head, sep, content = line.partition(": ")
        if sep and head.lstrip("- ")[:4].isdigit():
            out[content] = head.endswith("(older)")
    return out


def test_an_update_without_now_wins_and_an_unrelated_newer_line_marks_nothing(
    tmp_path: Path, server: fs.FakeServer
) -> None:
    cb = make_cb(tmp_path, server.base_url, memory={"inject": "relevant", "auto_memory": False})
    write_memory(
        cb,
        [
            *LINES,
            ("2025-01-05", "weighs 82 kg"),
            ("2025-02-01", "phone number is +31 6 1234 5678"),
            ("2025-03-01", "email changed to mara@fastmail.com"),
            ("2025-04-01", "now runs with Tom from the club"),
            ("2025-05-01", "now runs in Hoka Clifton 9"),
            ("2025-06-01", "weighs 74 kg after the diet"),
        ],
    )
    weight = recalled(sent(cb, server, "what is my current weight?")[0])
    assert weight.get("weighs 74 kg after the diet") is False  # sent, as the current one
    assert weight.get("weighs 82 kg", True)  # left out, or sent marked (older)
    phone = recalled(sent(cb, server, "what's my phone number?")[0])
    assert phone.get("phone number is +31 6 1234 5678") is False  # the email line is no update
    partner = recalled(sent(cb, server, "who is my running partner now?")[0])
    assert partner.get("now runs with Tom from the club") is False  # the shoes are no update


def test_lines_only_of_the_same_field_as_the_question_are_not_sent(
    tmp_path: Path, server: fs.FakeServer
) -> None:
    cb = make_cb(tmp_path, server.base_url, memory={"inject": "relevant", "auto_memory": False})
    ops = [
        "Production Redis 7.2 listens on port 6380",
        "The staging database is PostgreSQL 16 on db-stage-2",
        "Deploys run ops/deploy.sh with Ansible 9",
        "Logs are kept 30 days and rotated at 03:00",
        "The test suite runs with pytest -n 4 in CI",
        "nginx terminates TLS and proxies to port 8000",
        "Kafka topics are partitioned by customer id",
        "Dashboards live in Grafana folder ops/prod",
    ]
    write_memory(cb, [("2025-02-01", line) for line in ops])
    lines = recalled(
        sent(cb, server, "We moved the staging database last week. What about redis?")[0]
    )
    assert set(lines) == {ops[0], ops[1]}  # not the six other ops lines, each far weaker


def test_a_fact_written_again_is_sent_once_the_newest(
    tmp_path: Path, server: fs.FakeServer
) -> None:
    cb = make_cb(tmp_path, server.base_url, memory={"inject": "relevant", "auto_memory": False})
    again = [
        ("2025-01-03", "deploys to staging with Ansible 9"),
        ("2025-03-08", "User deploys staging with Ansible 9"),
        ("2025-05-21", "the staging deploy uses Ansible 9"),
    ]
    write_memory(
        cb, [*LINES, *again, ("2025-06-01", "deploys to staging with Ansible 9 on Fridays")]
    )
    lines = recalled(sent(cb, server, "how do I deploy to staging?")[0])
    assert [c for _d, c in again if c in lines] == ["the staging deploy uses Ansible 9"]
    assert "deploys to staging with Ansible 9 on Fridays" in lines  # it says more: not the same


def test_a_line_written_by_the_turn_is_embedded_then_not_at_the_next_recall(
    tmp_path: Path, server: fs.FakeServer
) -> None:
    cb = setup(tmp_path, server)
    fact = "User's cat is called Miso"
    server.add(fs.text("Noted."), fs.text(fact))
    proc = cb.invoke("ask", "--no-save", "--remember", "my cat is Miso")
    assert proc.returncode == 0, proc.stderr
    assert fact in cb.memory_file.read_text("utf-8")
    cache = VectorCache(vectors_path(cb.memory_file), embed.Embedder(), lambda _m: None)
    assert cache.stored(fact) is not None  # in the file already, beside the others
    assert all(cache.stored(c) is not None for _d, c in LINES)
    assert "Miso" in sent(cb, server, "what is my cat's name?")[0]


def test_an_edited_line_is_embedded_again_and_a_damaged_cache_rebuilt(
    tmp_path: Path, server: fs.FakeServer
) -> None:
    cb = setup(tmp_path, server)
    sent(cb, server, "what do I grow at home?")
    cache = vectors_path(cb.memory_file)
    assert cache.stat().st_size > 0
    recall = Recall(MemoryStore(cb.memory_file))
    recall.relevant("warm", 8)  # this process's cache, read from the file: nothing to embed
    assert recall._cache is not None and recall._cache.embedded == 0
    edited = [
        (d, "grows chillies and mint on the balcony" if "tomatoes" in c else c) for d, c in LINES
    ]
    write_memory(cb, edited)  # as `memory edit` would leave it
    picked = recall.relevant("what do I grow at home?", 8)
    assert recall._cache.embedded == 1  # the edited line alone
    assert "grows chillies and mint on the balcony" in [e.content for e in picked]

    cache.write_bytes(b"countbot-memory-vectors\n{not json")
    message, err = sent(cb, server, "which instrument do I play?")
    assert "cello lessons" in message
    notices = [line for line in err.splitlines() if "vector cache" in line]
    assert len(notices) == 1 and "damaged" in notices[0] and "rebuilding it" in notices[0]
    assert Recall(MemoryStore(cb.memory_file)).relevant("cello", 8)  # the rebuilt file reads


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


def test_start_loads_both_models_in_the_background() -> None:
    embedder = embed.Embedder()
    embedder.start()
    assert embedder._thread is not None
    embedder._thread.join(60)
    assert embedder.ready and embedder.error is None


def test_model_switches_leave_one_recall_listening_to_the_memory(scripted: Any) -> None:
    h = scripted(memory={"inject": "relevant", "overflow_summary": False, "auto_memory": False})
    write_memory(h.cb, LINES)
    assert embed.shared().load()  # the REPL's background load, done before the chat starts
    h.provider.enqueue("ok", "ok")
    repl = h.run(["/model alpha\r", "/model beta\r", "/model alpha\r", "which instrument?\r"])
    assert "cello lessons" in h.sent_users()[0]  # recall by meaning on the model switched to
    keeper = repl.conversation.pair.keeper
    memory = keeper.memory
    assert len(memory.on_added) == 1  # not one more each /model
    assert list(memory.on_added.values()) == [keeper.recaller._embed_added]  # the current one
    memory.add("practises scales before breakfast")  # a line written: embedded once, as written
    cache = VectorCache(vectors_path(memory.path), embed.Embedder(), lambda _m: None)
    assert cache.stored("practises scales before breakfast") is not None
