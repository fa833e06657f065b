"""Roles: `<config folder>/roles/NAME.md` added to the system prompt with `-r NAME`, its front
matter setting the model and options; `countbot roles` lists them."""

from __future__ import annotations

import sys
from pathlib import Path

import fakeserver as fs
import pexpect
import pytest
from cbenv import CB, make_cb
from terminal import TOOLBAR_END, expect, spawn

REVIEWER = """---
model: role-model
temperature: 0.2
seed: 7
---
You are a terse reviewer of shell scripts.

Point at the line, then say why.
"""


def _role(cb: CB, name: str, text: str) -> Path:
    folder = cb.user_home / "roles"
    folder.mkdir(parents=True, exist_ok=True)
    path = folder / f"{name}.md"
    path.write_text(text, encoding="utf-8")
    return path


def test_a_role_adds_its_text_model_and_options_to_the_request(
    tmp_path: Path, server: fs.FakeServer
) -> None:
    cb = make_cb(tmp_path, server.base_url)
    _role(cb, "reviewer", REVIEWER)
    server.default = fs.text("line 3: unquoted $1")
    proc = cb.invoke("ask", "-r", "reviewer", "review: rm $1")
    assert (proc.returncode, proc.stdout) == (0, "line 3: unquoted $1\n"), proc.stderr
    body = server.chat_bodies()[-1]
    system = body["messages"][0]
    assert system["role"] == "system"
    assert "You are a terse reviewer of shell scripts.\n\nPoint at the line" in system["content"]
    assert "model: role-model" not in system["content"]  # the front matter is not text
    assert (body["model"], body["temperature"], body["seed"]) == ("role-model", 0.2, 7)
    # -m, -o and --system on the command line win over (or join) the role's
    proc = cb.invoke(
        "--role", "reviewer", "-m", "cli-model", "-o", "temperature", "0.9", "--system", "Be kind.",
        "again",
    )  # fmt: skip
    assert proc.returncode == 0, proc.stderr
    body = server.chat_bodies()[-1]
    assert (body["model"], body["temperature"], body["seed"]) == ("cli-model", 0.9, 7)
    content = body["messages"][0]["content"]
    assert content.index("terse reviewer") < content.index("Be kind.")


def test_unknown_role_is_a_usage_error_naming_the_roles_folder(
    tmp_path: Path, server: fs.FakeServer
) -> None:
    cb = make_cb(tmp_path, server.base_url)
    folder = cb.user_home / "roles"
    proc = cb.invoke("ask", "-r", "poet", "hi")
    assert proc.returncode == 2
    assert f"no role 'poet' in {folder} (there are none yet)" in proc.stderr
    _role(cb, "reviewer", REVIEWER)
    # a project folder's roles are never used: only the user's own config folder
    (cb.work / "roles").mkdir()
    (cb.work / "roles" / "poet.md").write_text("Answer in verse.\n", encoding="utf-8")
    proc = cb.invoke("-r", "poet", "hi")
    assert proc.returncode == 2
    assert f"no role 'poet' in {folder} (the roles are: reviewer)" in proc.stderr
    assert cb.invoke("-r", "../config", "hi").returncode == 2  # a name, never a path
    assert server.chat_bodies() == []


def test_bad_front_matter_names_file_line_and_key(tmp_path: Path, server: fs.FakeServer) -> None:
    cb = make_cb(tmp_path, server.base_url)
    path = _role(cb, "hot", "---\nmodel: m\ntemperature: hot\n---\nBe hot.\n")
    proc = cb.invoke("ask", "-r", "hot", "hi")
    assert proc.returncode == 2
    assert f"{path}:3" in proc.stderr and "temperature takes a number from 0 to 2" in proc.stderr
    _role(cb, "deep", "---\n" + "a: " * 100 + "x\n---\nBe deep.\n")
    proc = cb.invoke("ask", "-r", "deep", "hi")
    assert proc.returncode == 2 and "deep.md" in proc.stderr
    _role(cb, "quoted", "---\nmodel: [1, 2]\n---\ntext\n")
    proc = cb.invoke("ask", "-r", "quoted", "hi")
    assert proc.returncode == 2 and "model must be a model name" in proc.stderr
    assert server.chat_bodies() == []


def test_roles_lists_names_and_first_lines(tmp_path: Path) -> None:
    cb = make_cb(tmp_path, None)
    empty = cb.invoke("roles")
    assert empty.returncode == 0 and empty.stdout == ""
    assert f"no roles yet: write markdown files into {cb.user_home / 'roles'}" in empty.stderr
    _role(cb, "reviewer", REVIEWER)
    _role(cb, "poet", "\n\nAnswer   in verse.\x1b[31m\nAlways.\n")
    (cb.user_home / "roles" / "notes.txt").write_text("not a role", encoding="utf-8")
    proc = cb.invoke("roles")
    assert proc.returncode == 0, proc.stderr
    # the first non-empty line of the text (after any front matter), escapes removed
    assert proc.stdout.splitlines() == [
        "poet      Answer in verse.",
        "reviewer  You are a terse reviewer of shell scripts.",
    ]


def test_bash_completes_role_names(tmp_path: Path) -> None:
    cb = make_cb(tmp_path, None)
    _role(cb, "reviewer", REVIEWER)
    _role(cb, "poet", "Verse.\n")
    _role(cb, "pirate", "Arr.\n")
    assert sorted(cb.bash_complete(["ask", "-r", "p"])[0]) == ["pirate", "poet"]
    assert cb.bash_complete(["--role", "rev"])[0] == ["reviewer"]
    assert "temperature" in cb.bash_complete(["ask", "-o", ""])[0]
    (cb.user_home / "templates").mkdir()
    (cb.user_home / "templates" / "review.md").write_text("Review $1.\n", encoding="utf-8")
    assert cb.bash_complete(["ask", "-t", "re"])[0] == ["review"]


@pytest.mark.skipif(sys.platform == "win32", reason="needs a POSIX pty")
def test_the_chat_starts_with_a_role(tmp_path: Path, server: fs.FakeServer) -> None:
    cb = make_cb(tmp_path, server.base_url)
    _role(cb, "reviewer", REVIEWER)
    server.default = fs.text("role answer")
    child = spawn(cb, "-r", "reviewer", "-o", "top_p", "0.5")
    try:
        expect(child, TOOLBAR_END)
        child.send("hello\r")
        expect(child, "role answer")
        expect(child, TOOLBAR_END)
        child.sendcontrol("d")
        child.expect(pexpect.EOF)
    finally:
        child.close(force=True)
    body = server.chat_bodies()[-1]
    assert "terse reviewer" in body["messages"][0]["content"]
    assert (body["model"], body["temperature"], body["top_p"]) == ("role-model", 0.2, 0.5)


def test_a_template_is_asked_with_its_arguments(tmp_path: Path, server: fs.FakeServer) -> None:
    cb = make_cb(tmp_path, server.base_url)
    folder = cb.user_home / "templates"
    folder.mkdir(parents=True)
    (folder / "review.md").write_text(
        "---\ndescription: review a file\ntemperature: 0.1\n---\nReview $1 for $2 (costs $$0).\n",
        encoding="utf-8",
    )
    server.add(fs.text("looks fine"), fs.text("fine too"))
    proc = cb.invoke("-t", "review", "main.py", "bugs")  # the bare prompt takes -t too
    assert proc.returncode == 0, proc.stderr
    body = server.chat_bodies()[-1]
    assert body["messages"][-1]["content"] == "Review main.py for bugs (costs $0)."
    assert body["temperature"] == 0.1  # the template's front matter
    assert cb.invoke("ask", "--template", "review", "a.py", "style").returncode == 0
    assert (
        server.chat_bodies()[-1]["messages"][-1]["content"] == "Review a.py for style (costs $0)."
    )
    missing = cb.invoke("ask", "-t", "review", "main.py")
    assert missing.returncode == 2 and "template 'review' needs 2 arguments ($1 $2), got 1" in (
        missing.stderr
    )
    unknown = cb.invoke("ask", "-t", "nope", "x")
    assert unknown.returncode == 2 and "no template 'nope'" in unknown.stderr
    assert len(server.chat_bodies()) == 2


def test_a_roles_placeholders_take_the_first_prompt_words(
    tmp_path: Path, server: fs.FakeServer
) -> None:
    cb = make_cb(tmp_path, server.base_url)
    _role(cb, "translate", "Translate everything into $1.\n")
    server.add(fs.text("Bonjour"))
    assert cb.invoke("-r", "translate", "French", "good morning").returncode == 0
    body = server.chat_bodies()[-1]
    assert "Translate everything into French." in body["messages"][0]["content"]
    assert body["messages"][-1]["content"] == "good morning"
