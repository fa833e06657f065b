"""`/set` and `/role` in the REPL, against the loopback FakeServer: what the next request
carries, what the screen says, and that a bad value sends nothing."""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

import fakeserver as fs
import pytest
from repl_harness import Harness


def test_set_reaches_the_request_and_a_bad_value_sends_nothing(
    harness: Any, server: fs.FakeServer
) -> None:
    h = harness()
    server.add(fs.text("one"), fs.text("two"))
    h.run(
        [
            "/set temperature 0.2\r",
            "/set seed 7\r",
            "/set temperature 9\r",  # out of range: nothing changes, nothing is sent
            "/set\r",
            "first\r",
            "/set seed\r",
            "second\r",
        ]
    )
    bodies = server.chat_bodies()
    assert len(bodies) == 2
    assert bodies[0]["temperature"] == 0.2 and bodies[0]["seed"] == 7
    assert bodies[1]["temperature"] == 0.2 and "seed" not in bodies[1]
    out = h.text()
    bad = [line for line in out.splitlines() if "temperature takes" in line]
    assert len(bad) == 1 and "from 0 to 2, not 9.0" in bad[0]
    assert "  seed = 7\n  temperature = 0.2\n" in out
    assert "seed removed." in out


def test_role_puts_its_text_in_the_system_message_and_lists_roles(
    tmp_path: Path, server: fs.FakeServer, monkeypatch: pytest.MonkeyPatch
) -> None:
    h = Harness(tmp_path, server)
    xdg = tmp_path / "xdg"
    roles = xdg / "countbot" / "roles"
    roles.mkdir(parents=True)
    (roles / "pirate.md").write_text(
        "---\ntemperature: 0.5\n---\nAnswer like a pirate, arr.\n", "utf-8"
    )
    (roles / "terse.md").write_text("Answer in five words.\n", "utf-8")
    monkeypatch.setenv("XDG_CONFIG_HOME", str(xdg))
    server.add(fs.text("arr"), fs.text("plain"))
    h.run(["/role\r", "/role pirate\r", "/role\r", "hi\r", "/role nobody\r", "/role none\r", "x\r"])
    bodies = server.chat_bodies()
    assert len(bodies) == 2
    system = bodies[0]["messages"][0]
    assert system["role"] == "system" and "Answer like a pirate, arr." in system["content"]
    assert bodies[0]["temperature"] == 0.5  # the role's front matter
    assert "pirate" not in bodies[1]["messages"][0]["content"]
    out = h.text()
    assert "current: none" in out and "* pirate  Answer like a pirate, arr." in out
    assert "  terse  Answer in five words." in out
    unknown = [line for line in out.splitlines() if "no role 'nobody'" in line]
    assert len(unknown) == 1 and str(roles) in unknown[0] and "pirate, terse" in unknown[0]


def test_templates_and_roles_are_slash_commands_with_arguments(
    tmp_path: Path, server: fs.FakeServer, monkeypatch: pytest.MonkeyPatch
) -> None:
    from prompt_toolkit.completion import CompleteEvent
    from prompt_toolkit.document import Document

    from countbot_cli.repl.prompt import SlashCompleter

    xdg = tmp_path / "xdg"
    (xdg / "countbot" / "templates").mkdir(parents=True)
    (xdg / "countbot" / "roles").mkdir(parents=True)
    (xdg / "countbot" / "templates" / "review.md").write_text(
        "---\ndescription: review a file for a concern\n---\nReview $1 for $2.\n", "utf-8"
    )
    (xdg / "countbot" / "templates" / "ask-all.md").write_text("Q: $ARGUMENTS\n", "utf-8")
    (xdg / "countbot" / "roles" / "translate.md").write_text("Translate into $1.\n", "utf-8")
    monkeypatch.setenv("XDG_CONFIG_HOME", str(xdg))
    h = Harness(tmp_path, server)
    server.add(fs.text("one"), fs.text("two"), fs.text("three"))
    h.run(
        [
            '/review main.py "off-by-one errors"\r',
            "/review main.py\r",  # too few: said, nothing sent
            "/ask-all why   is it so?\r",
            "/translate French\r",
            "good morning\r",
            "/help\r",
        ]
    )
    bodies = server.chat_bodies()
    assert len(bodies) == 3
    assert bodies[0]["messages"][-1]["content"] == "Review main.py for off-by-one errors."
    assert bodies[1]["messages"][-1]["content"] == "Q: why   is it so?"
    assert "Translate into French." in bodies[2]["messages"][0]["content"]
    assert bodies[2]["messages"][-1]["content"] == "good morning"
    out = h.text()
    assert "template 'review' needs 2 arguments ($1 $2), got 1" in out
    assert "Role: translate." in out
    comp = SlashCompleter(h.make())
    found = {
        c.text: c.display_meta_text for c in comp.get_completions(Document("/re"), CompleteEvent())
    }
    assert found["/review "] == "template: review a file for a concern"  # Tab completes it
    assert "/resume " in found
    assert re.search(r"/review +template: review a file for a concern", h.text())  # /help


def test_slash_skills_lists_them_and_the_left_out(harness: Any) -> None:
    h = harness(tools=True)
    cb = h.cb
    _skill_file(cb.user_home, "release-notes")
    _skill_file(cb.work, "deploy", "Deploy the site.")
    h.run(["/skills\r"])
    out = h.text()
    assert "release-notes  Write release notes.  (yours)" in out
    assert "deploy" in out and "not trusted" in out and "Deploy the site." not in out


def _skill_file(folder: Path, name: str, description: str = "Write release notes.") -> Path:
    path = folder / "skills" / name / "SKILL.md"
    path.parent.mkdir(parents=True)
    path.write_text(f"---\nname: {name}\ndescription: {description}\n---\nSteps.\n", "utf-8")
    return path
