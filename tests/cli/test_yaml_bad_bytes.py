"""Every YAML file countbot reads, with a byte PyYAML refuses or a value it cannot build, run as
the user runs countbot: the user's own files are a configuration error (exit 2, one line naming
the file and the line where the problem is), an untrusted project config.yaml and a SKILL.md
are left out with their one-line notice, and nothing ends as an unexpected error (exit 1)."""

from __future__ import annotations

from pathlib import Path

import fakeserver as fs
import pytest
import yaml
from cbenv import CB, clean_env, provider_config

CONTROL = "\x01"


def _user(tmp_path: Path, server: fs.FakeServer, extra: str = "", *, tools: bool = False) -> CB:
    """A user whose own config (in $XDG_CONFIG_HOME) points at `server`; `extra`: YAML lines
    after it. The work folder has no config.yaml."""
    work = tmp_path / "work"
    work.mkdir()
    cb = CB(root=tmp_path, work=work, env=clean_env(tmp_path))
    cfg = {**provider_config(server.base_url), "tools": {"enabled": tools}}
    cb.user_home.mkdir(parents=True)
    (cb.user_home / "config.yaml").write_text(yaml.safe_dump(cfg) + extra, encoding="utf-8")
    return cb


def _one_error(proc: object, where: str) -> str:
    """The one line a configuration error prints, naming `where` (FILE:LINE)."""
    lines = proc.stderr.splitlines()  # type: ignore[attr-defined]
    assert proc.returncode == 2, proc.stderr  # type: ignore[attr-defined]
    assert len(lines) == 1, lines
    assert lines[0].startswith(f"countbot: error: {where}: "), lines[0]
    assert "unexpected" not in lines[0] and CONTROL not in lines[0]
    return str(lines[0])


@pytest.mark.parametrize("command", [["sessions", "list"], ["memory", "show"], ["ask", "hi"]])
def test_an_untrusted_project_config_with_a_control_byte_is_ignored_with_its_notice(
    tmp_path: Path, server: fs.FakeServer, command: list[str]
) -> None:
    cb = _user(tmp_path, server)
    cb.config_file.write_text(f'persona: {{name: "a{CONTROL}b"}}\n', encoding="utf-8")
    server.add(fs.text("fine"))
    proc = cb.run(*command)
    assert proc.returncode == 0, proc.stderr
    assert proc.stderr.splitlines() == [
        "countbot: ignored ./config.yaml: a project's config is not applied until you trust it "
        "(it could redirect your prompts and keys or run commands); to use it, run: countbot "
        "config trust"
    ]


def test_trusting_a_project_config_with_a_control_byte_names_its_line(
    tmp_path: Path, server: fs.FakeServer
) -> None:
    cb = _user(tmp_path, server)
    cb.config_file.write_text(f'persona:\n  ai_name: "a{CONTROL}b"\n', encoding="utf-8")
    proc = cb.run("config", "trust", "--yes")
    line = _one_error(proc, f"{cb.config_file}:2")
    assert "a control character (U+0001) is not allowed in YAML" in line
    assert not (cb.user_home / "trusted.json").exists()


@pytest.mark.parametrize(
    ("value", "words"),
    [
        (f'"a{CONTROL}b"', "a control character (U+0001)"),
        ("2001-13-45", "not a valid timestamp: month must be in 1..12"),
        ('"\\ud800"', "\\ud800 is half of a surrogate pair"),
    ],
    ids=["control byte", "impossible date", "lone surrogate"],
)
def test_the_users_config_is_a_configuration_error_at_its_line(
    tmp_path: Path, server: fs.FakeServer, value: str, words: str
) -> None:
    cb = _user(tmp_path, server, f"persona:\n  ai_name: {value}\n")
    file = cb.user_home / "config.yaml"
    line_no = file.read_text(encoding="utf-8").splitlines().index(f"  ai_name: {value}") + 1
    line = _one_error(cb.run("ask", "hi"), f"{file}:{line_no}")
    assert words in line
    assert server.chat_bodies() == []


def test_bytes_that_are_not_utf8_are_named_at_their_line(
    tmp_path: Path, server: fs.FakeServer
) -> None:
    cb = _user(tmp_path, server)
    file = cb.user_home / "config.yaml"
    lines = file.read_bytes().count(b"\n")
    file.write_bytes(file.read_bytes() + b"persona:\n  ai_name: \xff\n")
    line = _one_error(cb.run("ask", "hi"), f"{file}:{lines + 2}")
    assert "not UTF-8 text" in line


def test_a_broken_indentation_is_named_where_it_breaks(
    tmp_path: Path, server: fs.FakeServer
) -> None:
    cb = _user(tmp_path, server)
    file = cb.user_home / "config.yaml"
    file.write_text("providers:\n  x:\n    type: openai\n   model: y\n", encoding="utf-8")
    line = _one_error(cb.run("ask", "hi"), f"{file}:4")
    assert "expected <block end>" in line


@pytest.mark.parametrize("kind", ["roles", "templates"])
def test_a_role_or_template_front_matter_with_a_control_byte(
    tmp_path: Path, server: fs.FakeServer, kind: str
) -> None:
    cb = _user(tmp_path, server)
    file = cb.user_home / kind / "terse.md"
    file.parent.mkdir()
    file.write_text(f'---\ndescription: "a{CONTROL}b"\n---\nBe terse.\n', encoding="utf-8")
    flag = "-r" if kind == "roles" else "-t"
    line = _one_error(cb.run("ask", flag, "terse", "hi"), f"{file}:2")
    assert "a control character (U+0001)" in line
    assert server.chat_bodies() == []


def test_a_skill_with_a_control_byte_is_left_out_with_one_line(
    tmp_path: Path, server: fs.FakeServer
) -> None:
    cb = _user(tmp_path, server, tools=True)
    skill = cb.user_home / "skills" / "notes" / "SKILL.md"
    skill.parent.mkdir(parents=True)
    skill.write_text(f'---\nname: notes\ndescription: "a{CONTROL}b"\n---\nbody\n', encoding="utf-8")
    server.add(fs.text("fine"))
    proc = cb.run("ask", "hi")
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout == "fine\n"
    assert proc.stderr.splitlines() == [
        f"countbot: ignored {skill}: line 3: invalid YAML: a control character (U+0001) is "
        'not allowed in YAML (write it as an escape in double quotes ("\\x01") or remove it)'
    ]
    assert "notes" not in str(server.chat_bodies()[0]["messages"][0]["content"])
