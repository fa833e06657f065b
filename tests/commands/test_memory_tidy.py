"""`countbot memory tidy`: proposals as a diff with their sources, applied
only on a yes, the lines taken out kept in MEMORY.archive.jsonl with their sources, nothing
changed without a terminal, nothing lost to a concurrent writer; the model's proposals."""

from __future__ import annotations

import io
import json
from pathlib import Path

import fakeserver as fs
import pytest
from cbenv import make_cb

from countbot_cli.commands.memory_tidy import QUESTION, memory_tidy
from countbot_cli.memory import archive, sources
from countbot_cli.memory.store import DEFAULT_HEADER, MemoryStore
from countbot_cli.memory.tidy import ask_model, find

OLD_PORT = "Production redis listens on port 6380"
NEW_PORT = "Production redis listens on port 6390"
DARK = "The user prefers dark mode in every editor"
DEPLOY, DEPLOY_FULL = "Deploys run on Fridays", "Deploys run on Fridays with Ansible 9"
PLAIN = "The cat is called Miso"


@pytest.fixture
def store(tmp_path: Path) -> MemoryStore:
    s = MemoryStore(tmp_path / "MEMORY.md")
    s.add(
        OLD_PORT, "auto-overflow", date="2026-01-01", origin={"session": "s1", "messages": ["m1"]}
    )
    s.add(DARK, "user", date="2026-01-02")
    s.add(PLAIN, "user", date="2026-01-03")
    s.add(NEW_PORT, "user", date="2026-02-01")
    s.add(DARK.lower() + ".", "auto-memory", date="2026-02-02")
    s.add(DEPLOY, "user", date="2026-02-03")
    s.add(DEPLOY_FULL, "user", date="2026-02-04")
    return s


def tidy(store: MemoryStore, *said: str, edit: str | None = None) -> str:
    out = io.StringIO()
    it = iter(said)
    code = memory_tidy(store, out, ask=lambda q: next(it, "q"), edit=lambda text: edit)
    assert code == 0
    return out.getvalue()


def contents(store: MemoryStore) -> list[str]:
    return [e.content for e in store.entries()]


def test_the_rules_find_duplicates_supersessions_and_merges(store: MemoryStore) -> None:
    found, _groups = find(store)
    got = {(p.kind, p.keep.content, tuple(e.content for e in p.remove)) for p in found}
    assert got == {
        ("drop", DARK.lower() + ".", (DARK,)),
        ("supersede", NEW_PORT, (OLD_PORT,)),
        ("merge", DEPLOY_FULL, (DEPLOY,)),
    }


def test_y_applies_one_proposal_with_archive_and_sources(store: MemoryStore) -> None:
    text = tidy(store, "n", "y", "n")  # the proposals come best first: drop, supersede, merge
    assert "[2/3] supersede" in text and "applied" in text
    assert f"  - 1  2026-01-01  auto-overflow  {OLD_PORT}" in text
    assert "entry 1: session s1, 1 message (memory why 1)" in text
    assert OLD_PORT not in contents(store) and NEW_PORT in contents(store)
    assert DEPLOY in contents(store) and DARK in contents(store)  # the others: no
    (rec,) = archive.load(store.path)
    assert rec["line"] == f"2026-01-01|auto-overflow|{OLD_PORT}"
    assert rec["reason"] == "supersede" and rec["by"] == f"2026-02-01|user|{NEW_PORT}"
    assert rec["sources"]["session"] == "s1" and rec["sources"]["messages"] == ["m1"]
    assert rec["entries_after"] == len(store.entries()) == 6
    assert archive.entries_after_last_tidy(store.path) == 6
    assert "Applied 1 of 3" in text and str(archive.archive_path(store.path)) in text


def test_n_leaves_everything(store: MemoryStore) -> None:
    before = store.path.read_bytes()
    text = tidy(store, "n", "n", "n")
    assert store.path.read_bytes() == before and not archive.archive_path(store.path).exists()
    assert text.endswith("Nothing changed.\n")


def test_e_edits_the_line_that_stays_and_a_applies_the_rest(store: MemoryStore) -> None:
    text = tidy(store, "e", "a", edit="The user prefers dark mode, in every editor and terminal")
    assert text.count("applied") == 3
    assert contents(store) == [
        PLAIN,
        NEW_PORT,
        "The user prefers dark mode, in every editor and terminal",
        DEPLOY_FULL,
    ]
    assert [r["reason"] for r in archive.load(store.path)] == ["drop", "supersede", "merge"]
    assert store.path.read_text().startswith(DEFAULT_HEADER)


def test_a_merge_keeps_the_pin_and_the_model_never_removes_a_pinned_line(
    store: MemoryStore,
) -> None:
    from countbot_cli.memory import marks

    numbers = {e.content: n for n, e in store.numbered()}
    marks.set_mark(store, numbers[DARK.lower() + "."], "pinned", True)
    tidy(store, "e", "q", edit="The user prefers dark mode everywhere")
    assert [e.content for e in marks.pinned_entries(store)] == [
        "The user prefers dark mode everywhere"
    ]
    pinned = marks.pinned_entries(store)[0]
    store.add("the user prefers dark mode everywhere!", "tool")  # a copy of the pinned line
    (p,) = [p for p in find(store)[0] if p.kind == "drop"]
    assert p.keep == pinned and [e.content for e in p.remove] == [
        "the user prefers dark mode everywhere!"
    ]  # the pinned one stays, older or not
    plain = next(e for e in store.entries() if e.content == PLAIN)
    now = {e.content: n for n, e in store.numbered()}  # the lines were renumbered by the edit
    ok = {"kind": "drop", "keep": now[pinned.content], "remove": [now[PLAIN]]}
    bad = {"kind": "drop", "keep": now[PLAIN], "remove": [now[pinned.content]]}
    for proposal, removed in ((ok, [plain]), (bad, [])):  # the model proposes; a pin stays
        reply = json.dumps(proposal)
        found = ask_model(store, [[pinned, plain]], lambda _p, _w, r=reply: r, "en")
        assert [e for p in found for e in p.remove] == removed


def test_without_a_terminal_it_only_prints(tmp_path: Path) -> None:
    cb = make_cb(tmp_path, "http://127.0.0.1:9")
    related = ("The user lives in Berlin, Germany", "The user no longer lives in Berlin: Lisbon")
    for text in (OLD_PORT, PLAIN, NEW_PORT, *related):  # the last two are for the model
        assert cb.invoke("memory", "add", text).returncode == 0
    before = cb.memory_file.read_bytes()
    proc = cb.invoke("memory", "tidy")  # stdin is not a terminal; the model is unreachable
    assert proc.returncode == 0, proc.stderr
    assert "1 proposal for" in proc.stdout and "+ 3  " in proc.stdout
    assert "Nothing changed: run `countbot memory tidy` on a terminal" in proc.stdout
    assert "model's proposals are left out" in proc.stdout  # said, and the rules' still shown
    assert cb.memory_file.read_bytes() == before
    assert not archive.archive_path(cb.memory_file).exists()


def test_a_concurrent_writer_during_tidy_loses_nothing(store: MemoryStore) -> None:
    other = MemoryStore(store.path)  # another process's store

    def ask(question: str) -> str:
        assert question == QUESTION
        other.add("Written while tidy waited for an answer", "tool")
        return "a"

    memory_tidy(store, io.StringIO(), ask=ask)
    got = contents(store)
    assert "Written while tidy waited for an answer" in got
    assert OLD_PORT not in got and DEPLOY not in got and DARK not in got
    assert len(archive.load(store.path)) == 3


def test_a_proposal_whose_lines_changed_is_not_applied(store: MemoryStore) -> None:
    asked: list[str] = []

    def ask(question: str) -> str:
        asked.append(question)
        if len(asked) == 2:  # before the supersession is answered, its old line is deleted
            MemoryStore(store.path).delete_entries([1])
            return "y"
        return "n" if len(asked) == 1 else "q"

    out = io.StringIO()
    memory_tidy(store, out, ask=ask)
    assert "not applied: these lines changed since" in out.getvalue()
    assert NEW_PORT in contents(store) and not archive.archive_path(store.path).exists()


def test_the_models_proposals_are_read_and_checked(store: MemoryStore) -> None:
    extra = MemoryStore(store.path)
    extra.add("The user lives in Berlin", "user", date="2026-01-05")
    extra.add("The user moved to Lisbon last spring", "user", date="2026-03-01")
    numbers = {e.content: n for n, e in store.numbered()}
    berlin, lisbon = (
        numbers["The user lives in Berlin"],
        numbers["The user moved to Lisbon last spring"],
    )
    group = [e for e in store.entries() if "Berlin" in e.content or "Lisbon" in e.content]
    prompts: list[str] = []

    def summarise(prompt: str, what: str) -> str:
        prompts.append(prompt)
        good = {"kind": "supersede", "keep": lisbon, "remove": [berlin], "why": "moved"}
        outside = {"kind": "drop", "keep": lisbon, "remove": [1]}  # entry 1 is not in the group
        return f'{json.dumps(good)} {json.dumps(outside)} {{not json}} {{"kind": "x"}}'

    (p,) = ask_model(store, [group], summarise, "en")
    assert (p.kind, p.keep.content, [e.content for e in p.remove], p.why) == (
        "supersede",
        "The user moved to Lisbon last spring",
        ["The user lives in Berlin"],
        "moved",
    )
    assert f"[{berlin}] 2026-01-05 The user lives in Berlin" in prompts[0]


def test_memory_tidy_with_the_model_through_the_provider(
    tmp_path: Path, server: fs.FakeServer
) -> None:
    cb = make_cb(tmp_path, server.base_url)
    for text in ("The user lives in Berlin, Germany", "The user no longer lives in Berlin: Lisbon"):
        assert cb.invoke("memory", "add", text).returncode == 0
    server.add(fs.text('{"kind": "supersede", "keep": 2, "remove": [1], "why": "moved away"}'))
    proc = cb.invoke("memory", "tidy")
    assert proc.returncode == 0, proc.stderr
    assert "[1/1] supersede: moved away" in proc.stdout
    assert "  - 1  " in proc.stdout and "  + 2  " in proc.stdout
    (body,) = server.chat_bodies()
    assert "Group 1:" in body["messages"][0]["content"]
    assert sources.load(cb.memory_file) == {}  # nothing changed: no terminal
