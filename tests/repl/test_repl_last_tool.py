"""`/last-tool` shows the whole output of the last tool call, not the capped text the model got:
kept in a private file (0600, in a private folder) for the REPL's lifetime, removed at exit."""

from __future__ import annotations

import stat
from dataclasses import replace
from pathlib import Path

import fakeserver as fs
from repl_harness import Harness, approval_answers
from waits import wait_until

from countbot_cli.repl.loop import Repl


def test_last_tool_shows_the_elided_middle_from_a_private_file_removed_at_exit(
    tmp_path: Path, server: fs.FakeServer
) -> None:
    h = Harness(tmp_path, server, tools=True)
    h.settings = replace(h.settings, tools=h.settings.tools._replace(max_output_chars=400))
    (tmp_path / "work").mkdir(exist_ok=True)
    confirmer, _ = approval_answers("y\n")
    command = "for i in $(seq 1 300); do echo output line $i; done"
    server.add(fs.tool_calls([("exec", {"command": command})]), fs.text("Ran it."))
    seen: dict[str, object] = {}

    def look(h: Harness) -> None:  # while the REPL runs: the kept file and its folder
        assert isinstance(h.repl, Repl)
        outputs = h.repl.tool_outputs  # steps that are functions run at once: wait for the call
        folder = wait_until(lambda: outputs.folder, "the tool's output kept", 15)
        files = wait_until(lambda: list(folder.iterdir()), "the kept output's file", 15)
        seen["folder"] = folder
        seen["modes"] = (stat.S_IMODE(folder.stat().st_mode), stat.S_IMODE(files[0].stat().st_mode))

    h.run(["run it\r", look, "/last-tool\r"], confirmer=confirmer)
    sent = server.chat_bodies()[1]["messages"][-1]["content"]
    assert "output line 150\n" not in sent and "lines /" in sent  # the model got the cut text
    out = h.text()
    after = out.split("Ran it.", 1)[1]
    assert all(f"output line {i}\n" in after for i in range(1, 301))  # the middle too
    assert "elided" not in after
    assert seen["modes"] == (0o700, 0o600)
    folder = seen["folder"]
    assert isinstance(folder, Path) and not folder.exists()  # removed when the REPL ended


def test_last_tool_prints_untrusted_output_literally_never_as_markup(
    tmp_path: Path, server: fs.FakeServer
) -> None:
    """Tool output is the outside world's text: `[/x]` (a stray closing tag, MarkupError for
    rich), `[bold]`, `[link=…]` reach the screen as typed, through the REPL's `write`."""
    h = Harness(tmp_path, server, tools=True)
    (tmp_path / "work").mkdir(exist_ok=True)
    confirmer, _ = approval_answers("y\n")
    shown = "[/x] [bold]not bold[/bold] [link=http://evil.example]click[/link] [/]"
    command = f"printf '%s\\n' '{shown}'"
    server.add(fs.tool_calls([("exec", {"command": command})]), fs.text("Ran it."))
    h.run(["run it\r", "/last-tool\r"], confirmer=confirmer)
    after = h.text().split("Ran it.", 1)[1]
    assert shown in after, after
    assert "unexpected error" not in after and "MarkupError" not in after
