"""Ctrl-C during a turn's set-up, before the question's first save (here while memory is
recalled for it: the `recall` extra may load its models then): the question is kept, marked
interrupted, as when Ctrl-C comes while waiting for the first token. `ask` exits 130; the chat
says nothing arrived and goes on, and /retry asks the question. Once, the question was lost:
`ask` left no session, and the chat's question vanished (/retry had nothing to ask).

The Ctrl-C is a real SIGINT, raised in the main thread from inside the recall (so it lands
there, not by a timer), and countbot runs in this process (`cb.invoke`, the REPL harness).
"""

from __future__ import annotations

import signal
from collections.abc import Callable
from pathlib import Path
from typing import Any

import fakeserver as fs
import pytest
from cbenv import make_cb

from countbot_cli.memory.keeper import MemoryKeeper

QUESTION = "what was my cat's name?"


def ctrl_c_in_recall(monkeypatch: pytest.MonkeyPatch) -> list[str]:
    """The first recall for QUESTION presses Ctrl-C; later ones recall as usual (and so do
    those of the chat's context meter, for an empty message). Returns the questions each
    recall for a question was asked for."""
    real: Callable[[MemoryKeeper, str], list[str]] = MemoryKeeper.recall
    asked: list[str] = []

    def recall(keeper: MemoryKeeper, text: str) -> list[str]:
        if text:
            asked.append(text)
        if asked == [QUESTION] and text:
            signal.raise_signal(signal.SIGINT)  # its handler runs before the next line
        return real(keeper, text)

    monkeypatch.setattr(MemoryKeeper, "recall", recall)
    return asked


def turns(messages: list[dict[str, Any]]) -> list[tuple[str, str, str | None]]:
    return [(m["role"], m["content"], m.get("status")) for m in messages]


def test_ctrl_c_during_recall_ends_ask_with_130_and_keeps_the_question(
    tmp_path: Path, server: fs.FakeServer, monkeypatch: pytest.MonkeyPatch
) -> None:
    cb = make_cb(tmp_path, server.base_url)
    cb.memory_file.write_text("2024-01-01|user|my cat is called Tom\n", encoding="utf-8")
    asked = ctrl_c_in_recall(monkeypatch)
    server.default = fs.text("Tom.")
    proc = cb.invoke("ask", QUESTION)
    assert asked == [QUESTION]  # the Ctrl-C came during this turn's recall
    assert proc.returncode == 130, proc.stderr
    assert server.chat_bodies() == []
    assert turns(cb.only_session()["messages"]) == [("user", QUESTION, "interrupted")]


def test_ctrl_c_during_recall_in_the_chat_keeps_the_question_for_retry(
    harness: Any, server: fs.FakeServer, monkeypatch: pytest.MonkeyPatch
) -> None:
    h = harness()
    asked = ctrl_c_in_recall(monkeypatch)
    server.add(fs.text("Tom."))
    h.run([QUESTION + "\r", "/retry\r"])
    assert asked == [QUESTION, QUESTION]
    assert "nothing arrived; /retry asks again" in h.err.getvalue()
    assert h.sent_users() == [QUESTION]  # asked once: by /retry
    assert turns(h.session_data()["messages"]) == [
        ("user", QUESTION, None),
        ("assistant", "Tom.", None),
    ]
