"""`countbot sessions search` as a user runs it: JSON shape, text snippets, notices, bad input."""

from __future__ import annotations

import json
from pathlib import Path

from cbenv import CB, make_cb

from countbot_cli.config.own_files import SEARCH_INDEX_FILE
from countbot_cli.conversation.sessions import search_saves
from countbot_cli.conversation.sessions.session import new_session
from countbot_cli.conversation.sessions.store import SessionStore
from countbot_cli.messages import Message


def saved_sessions(cb: CB, chats: dict[str, list[str]]) -> dict[str, str]:
    """One saved session a title (a question and its answer); returns each title's session id."""
    store = SessionStore(cb.sessions_dir)
    made = {}
    for title, texts in chats.items():
        s = new_session(provider="test", model="test-model", title=title)
        s.messages = [
            Message(role=r, content=t) for r, t in zip(("user", "assistant"), texts, strict=True)
        ]
        store.create(s)
        made[title] = s.id
    search_saves.release(cb.sessions_dir)  # as when the process that saved them has ended
    return made


def setup(tmp_path: Path) -> tuple[CB, list[str]]:
    cb = make_cb(tmp_path, "http://127.0.0.1:9")
    chats = {
        "Redis setup": ["how do I make redis durable?", "Turn on appendonly in redis.conf"],
        "\x1b]0;pwned\x07Evil title": ["redis \x1b[2J wipes the screen", "no it does not"],
        "数据库": ["Redis配置放在哪里？", "在 /etc/redis 下面"],
        "Unrelated": ["the weather today", "sunny"],
    }
    return cb, list(saved_sessions(cb, chats).values())


def test_json_gives_one_object_per_session_with_snippets(tmp_path: Path) -> None:
    cb, made = setup(tmp_path)
    proc = cb.invoke("sessions", "search", "--json", "redis")
    assert proc.returncode == 0, proc.stderr
    assert proc.stderr == ""  # the saves put the sessions in the index: nothing to build
    hits = json.loads(proc.stdout)
    assert {h["id"] for h in hits} == set(made[:3])
    assert hits[0]["id"] == made[0]  # title and both messages match
    for h in hits:
        assert set(h) == {"id", "title", "created", "updated", "score", "snippets"}
        assert h["snippets"] and all("redis" in s["text"].lower() for s in h["snippets"])
    evil = next(h for h in hits if h["id"] == made[1])
    assert "\x1b" not in json.dumps(evil["snippets"], ensure_ascii=False)
    one = json.loads(cb.invoke("sessions", "search", "--json", "-n", "1", "redis").stdout)
    assert [h["id"] for h in one] == [made[0]]
    cjk = json.loads(cb.invoke("sessions", "search", "--json", "配置").stdout)
    assert [h["id"] for h in cjk] == [made[2]]
    assert cjk[0]["snippets"][0]["text"] == "Redis配置放在哪里？"


def test_text_output_is_sanitised_and_notices_are_one_line(tmp_path: Path) -> None:
    cb, made = setup(tmp_path)
    proc = cb.invoke("sessions", "search", "redis", "durable")
    assert proc.returncode == 0
    assert made[0][:8] in proc.stdout and "Redis setup" in proc.stdout
    assert "You: how do I make redis durable?" in proc.stdout
    proc = cb.invoke("sessions", "search", "redis")
    assert "\x1b" not in proc.stdout and "\x07" not in proc.stdout
    assert proc.stderr == ""  # warm: nothing to say
    cb.derived(cb.sessions_dir, SEARCH_INDEX_FILE).write_bytes(b"\0garbage" * 512)
    proc = cb.invoke("sessions", "search", "appendonly")
    assert proc.returncode == 0
    (line,) = proc.stderr.splitlines()
    assert "search index" in line and "damaged" in line and "rebuilding it" in line
    assert "Redis setup" in proc.stdout
    nothing = cb.invoke("sessions", "search", "platypus")
    assert nothing.returncode == 0 and "No session matches 'platypus'" in nothing.stdout
    bad = cb.invoke("sessions", "search", "!!!")
    assert bad.returncode == 2 and "nothing to search for" in bad.stderr


def test_a_question_typed_as_a_sentence_finds_its_session_in_any_script(tmp_path: Path) -> None:
    cb = make_cb(tmp_path, "http://127.0.0.1:9")
    chats = {
        "晚饭": ["周末我们去望京那家海底捞吃火锅吧", "好的，周六晚上六点"],
        "Travel": ["I always fly KLM when I go to Amsterdam", "Noted: KLM."],
        "闲聊": ["今天天气很好", "是的"],
    }
    made = saved_sessions(cb, chats)
    for question, title in (
        ("我上次说的那家火锅店在哪里？", "晚饭"),  # a sentence, no spaces: its words, not a phrase
        ("which airline do I fly to Amsterdam?", "Travel"),  # "do I" does not have to match
    ):
        proc = cb.invoke("sessions", "search", "--json", question)
        assert proc.returncode == 0, proc.stderr
        hits = json.loads(proc.stdout)
        assert hits and hits[0]["id"] == made[title], question


def test_damaged_data_the_user_can_act_on_exits_2_not_1(tmp_path: Path) -> None:
    """Exit 1 is a bug's; damaged or misplaced data is the user's to fix: exit 2, one line
    saying what and where, nothing lost (a damaged session file is moved aside)."""
    cb, made = setup(tmp_path)
    for sid, args in ((made[3], ("sessions", "show")), (made[1], ("ask", "-s"))):
        (cb.sessions_dir / f"{sid}.json").write_text('{"id": "x", "messages": [', "utf-8")
        proc = cb.invoke(*args, sid, *(["and now?"] if args[0] == "ask" else []))
        assert proc.returncode == 2, (args, proc.stderr)
        (line,) = proc.stderr.splitlines()
        assert "is damaged" in line and "moved it to" in line, line
        (aside,) = cb.sessions_dir.glob(f"{sid}.json.corrupt-*")
        assert aside.read_text(encoding="utf-8") == '{"id": "x", "messages": ['
    folder = cb.sessions_dir / f"{made[2]}.json"
    folder.unlink()
    folder.mkdir()  # a folder where a session file belongs
    proc = cb.invoke("sessions", "show", made[2])
    assert proc.returncode == 2, proc.stderr
    assert "is a folder, not a session file" in proc.stderr
