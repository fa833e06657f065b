"""Skills: skills/NAME/SKILL.md listed by name, description and file in the
system prompt, the body only read with read_file (the user's own without asking); a project's
skill only once trusted, like AGENTS.md (/skills: tests/repl/test_repl_tuning.py)."""

from __future__ import annotations

from pathlib import Path

import fakeserver as fs
from cbenv import make_cb

BODY = "Step one: run git log. THE-SECRET-RECIPE."


def _skill(folder: Path, name: str, description: str | None = "Write release notes.") -> Path:
    path = folder / "skills" / name / "SKILL.md"
    path.parent.mkdir(parents=True)
    front = f"name: {name}\n" + (f"description: {description}\n" if description else "")
    path.write_text(f"---\n{front}---\n{BODY}\n", encoding="utf-8")
    return path


def _system(server: fs.FakeServer, n: int = 0) -> str:
    return str(server.chat_bodies()[n]["messages"][0]["content"])


def test_a_users_skill_is_listed_and_read_only_when_needed(
    tmp_path: Path, server: fs.FakeServer
) -> None:
    cb = make_cb(tmp_path, server.base_url, tools={"enabled": True})
    path = _skill(cb.user_home, "release-notes")
    server.add(fs.tool_calls([("read_file", {"path": str(path)})]), fs.text("Here are the notes."))
    proc = cb.invoke("ask", "write the release notes")  # no terminal: a call needing approval
    assert proc.returncode == 0, proc.stderr  # would be denied; this one is not
    system = _system(server)
    assert f"- release-notes: Write release notes. (file: {path})" in system
    assert "THE-SECRET-RECIPE" not in system  # the body is not in the prompt
    tool_reply = server.chat_bodies()[1]["messages"][-1]
    assert tool_reply["role"] == "tool" and "THE-SECRET-RECIPE" in tool_reply["content"]
    assert "denied" not in proc.stderr


def test_an_untrusted_project_skill_is_ignored_until_trusted(
    tmp_path: Path, server: fs.FakeServer
) -> None:
    cb = make_cb(tmp_path, server.base_url, tools={"enabled": True})
    _skill(cb.work, "deploy", "Deploy the site.")
    server.add(fs.text("ok"), fs.text("ok"))
    proc = cb.invoke("ask", "deploy it")
    assert proc.returncode == 0, proc.stderr
    assert "Deploy the site." not in _system(server)
    assert (
        "ignored" in proc.stderr and "countbot config trust skills/deploy/SKILL.md" in proc.stderr
    )
    trusted = cb.invoke("config", "trust", "--yes", "skills/deploy/SKILL.md")
    assert trusted.returncode == 0, trusted.stderr
    assert "a skill" in trusted.stdout and BODY in trusted.stdout  # shown whole first
    assert cb.invoke("ask", "deploy it").returncode == 0
    assert "- deploy: Deploy the site. (file: skills/deploy/SKILL.md)" in _system(server, 1)


def test_a_skill_without_a_description_is_left_out_and_said(
    tmp_path: Path, server: fs.FakeServer
) -> None:
    cb = make_cb(tmp_path, server.base_url, tools={"enabled": True})
    _skill(cb.user_home, "vague", description=None)
    server.add(fs.text("ok"))
    proc = cb.invoke("ask", "hi")
    assert "## Skills" not in _system(server)
    assert "has no description" in proc.stderr


def test_a_trusted_project_skill_never_shadows_the_users_own_of_that_name(
    tmp_path: Path, server: fs.FakeServer
) -> None:
    cb = make_cb(tmp_path, server.base_url, tools={"enabled": True})
    mine = _skill(cb.user_home, "deploy", "Deploy my way.")
    theirs = _skill(cb.work, "deploy", "Deploy the site.")
    trusted = cb.invoke("config", "trust", "--yes", "skills/deploy/SKILL.md")
    assert trusted.returncode == 0, trusted.stderr
    server.add(fs.text("ok"))
    proc = cb.invoke("ask", "deploy it")
    assert proc.returncode == 0, proc.stderr
    system = _system(server)
    assert f"- deploy: Deploy my way. (file: {mine})" in system
    assert "Deploy the site." not in system
    assert f"ignored {theirs}: a skill named deploy came first" in proc.stderr
