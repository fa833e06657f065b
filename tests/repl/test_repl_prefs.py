"""The chat's prompt settings: `chat: editing_mode: vi` (shown in the
toolbar), `enter: newline` (Esc Enter sends), `notify: bell|desktop` when a long answer ends or
an approval waits; each also `/set KEY VALUE`; bad values refused like the config's."""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

import fakeserver as fs
import pytest
from cbenv import make_cb
from repl_harness import Harness, approval_answers, write_call
from waits import file_text, wait_until

QUIET = {"memory": {"auto_memory": False, "overflow_summary": False}}


def test_enter_newline_makes_esc_enter_send(harness: Any, server: fs.FakeServer) -> None:
    h = harness(chat={"enter": "newline"}, **QUIET)
    server.add(fs.text("one"), fs.text("two"))
    h.run(["line one\rline two\x1b\r", "/set enter send\r", "plain\r"])
    assert [b["messages"][-1]["content"] for b in server.chat_bodies()] == [
        "line one\nline two",
        "plain",
    ]
    assert "enter = send for the rest of this chat." in h.text()


def test_vi_mode_is_shown_in_the_toolbar_and_set_switches_it(harness: Any) -> None:
    h = harness(chat={"editing_mode": "vi"}, **QUIET)
    bars: list[str] = []

    def toolbar(h: Harness) -> None:
        assert h.repl is not None
        bars.append(h.repl.toolbar())

    h.run(
        [
            "",  # the first prompt is up
            toolbar,
            lambda h: h.send("\x1b"),  # Esc: vi's normal mode
            lambda h: wait_until(  # past the wait that tells Esc from an Alt-key
                lambda: h.repl is not None and h.repl.toolbar().startswith(" vi:normal"),
                "vi's normal mode in the toolbar",
            ),
            toolbar,
            lambda h: h.send("i/set editing_mode emacs\r"),
            lambda h: h.wait_for("editing_mode = emacs"),
            toolbar,
            "/set editing_mode vim\r",
        ]
    )
    assert bars[0].startswith(" vi:insert ·") and bars[1].startswith(" vi:normal ·")
    assert "vi:" not in bars[2]
    assert "editing_mode takes one of emacs, vi, not 'vim'" in h.text()


def test_bell_when_a_long_answer_ends_and_when_an_approval_waits(
    harness: Any, server: fs.FakeServer
) -> None:
    h = harness(tools=True, chat={"notify": "bell", "notify_after": 0}, **QUIET)
    confirmer, _ = approval_answers("n\n")
    server.add(fs.text("quick"), write_call("a.txt", "x"), fs.text("not written"))
    h.run(["hi\r", lambda h: h.wait_for("\a", stream="err"), "write a\r"], confirmer=confirmer)
    assert h.err.getvalue().count("\a") == 3  # after "hi", at the question, after the answer


def test_no_bell_by_default(harness: Any, server: fs.FakeServer) -> None:
    h = harness(chat={"notify_after": 0}, **QUIET)
    server.add(fs.text("quick"))
    h.run(["hi\r"])
    assert "\a" not in h.err.getvalue()


def test_desktop_uses_notify_send_where_present(
    tmp_path: Path, server: fs.FakeServer, monkeypatch: pytest.MonkeyPatch
) -> None:
    bin_dir, said = tmp_path / "bin", tmp_path / "said.txt"
    bin_dir.mkdir()
    fake = bin_dir / "notify-send"
    fake.write_text(f'#!/bin/sh\nprintf "%s|%s" "$1" "$2" > {said}\n', encoding="utf-8")
    fake.chmod(0o755)
    monkeypatch.setenv("PATH", f"{bin_dir}{os.pathsep}{os.environ['PATH']}")
    h = Harness(tmp_path, server, chat={"notify": "desktop", "notify_after": 0}, **QUIET)
    server.add(fs.text("quick"))
    h.run(["hi\r"])
    assert file_text(said) == "countbot|the answer is ready"
    assert "\a" not in h.err.getvalue()


def test_chat_keys_are_checked_like_the_rest_of_the_config(
    tmp_path: Path, server: fs.FakeServer
) -> None:
    cb = make_cb(tmp_path, server.base_url, chat={"editing_mod": "vi"})
    proc = cb.invoke("ask", "hi")
    assert proc.returncode == 2 and "did you mean 'editing_mode'?" in proc.stderr
    cb = make_cb(tmp_path / "b", server.base_url, chat={"notify": "loud"})
    proc = cb.invoke("ask", "hi")
    assert proc.returncode == 2 and "'loud' is not one of off | bell | desktop" in proc.stderr
