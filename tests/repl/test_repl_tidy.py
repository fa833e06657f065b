"""`/memory tidy` in the chat, answered at the REPL's prompt, and the toolbar's hint when
MEMORY.md has grown enough to be worth tidying."""

from __future__ import annotations

from typing import Any

import fakeserver as fs
from repl_harness import Harness

from countbot_cli.memory import archive
from countbot_cli.memory.store import MemoryStore
from countbot_cli.memory.tidy import HINT_ENTRIES, HINT_GROWTH, worth_tidying
from countbot_cli.repl.toolbar import toolbar_text

OLD, NEW = "Production redis listens on port 6380", "Production redis listens on port 6390"


def test_memory_tidy_in_the_chat_asks_and_applies(harness: Any, server: fs.FakeServer) -> None:
    h = harness()
    store = MemoryStore(h.settings.memory.file)
    store.add(OLD, date="2026-01-01")
    store.add("The cat is called Miso", date="2026-01-02")
    store.add(NEW, date="2026-02-01")

    def answer(h: Harness) -> None:
        h.wait_for("[1/1] supersede")
        h.inp.send_text("y\r")

    server.add(fs.text("6390."))
    h.run(["/memory tidy\r", answer, "/memory\r", "which redis port listens?\r"])
    out = h.text()
    assert f"- 1  2026-01-01  user  {OLD}" in out and f"+ 3  2026-02-01  user  {NEW}" in out
    assert "applied" in out and "Applied 1 of 1" in out
    assert [e.content for e in store.entries()] == ["The cat is called Miso", NEW]
    assert [r["line"] for r in archive.load(store.path)] == [f"2026-01-01|user|{OLD}"]
    (body,) = server.chat_bodies()  # nothing the rules left for the model: no call for it
    sent = body["messages"][-1]["content"]
    assert NEW in sent and OLD not in sent  # an archived line is never recalled


def test_the_toolbar_hints_at_tidying_a_grown_memory(harness: Any) -> None:
    h = harness()
    store = MemoryStore(h.settings.memory.file)
    store.add_many([f"fact number {i}" for i in range(HINT_ENTRIES - 1)], "user")
    repl = h.make()
    assert "/memory tidy" not in toolbar_text(repl.conversation, repl.meter)
    store.add("one more fact", "user")
    assert worth_tidying(store.path)
    assert "memory: /memory tidy" in toolbar_text(repl.conversation, repl.meter)
    # after a tidy the hint waits until the file grew by HINT_GROWTH again
    archive.append(store.path, [{"line": "x", "entries_after": HINT_ENTRIES}])
    assert not worth_tidying(store.path)
    store.add_many([f"later fact {i}" for i in range(HINT_GROWTH)], "user")
    assert worth_tidying(store.path)
