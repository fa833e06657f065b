"""The README is the user's manual: it starts with the two commands that work on a fresh machine,
documents every slash command and key, and nothing in README.md or docs/ points outside the
repository."""

from __future__ import annotations

import re
from pathlib import Path

from countbot_cli.repl.slash import COMMANDS, KEYS_HELP

ROOT = Path(__file__).resolve().parents[1]
README = (ROOT / "README.md").read_text(encoding="utf-8")


def test_the_first_lines_set_up_and_run_then_test() -> None:
    first, second = README.splitlines()[:2]
    assert first.split()[:2] == ["make", "run"]
    assert second.split()[:2] == ["make", "test"]


def test_every_slash_command_and_key_is_documented() -> None:
    for command in COMMANDS:
        for name in (command.name, *command.aliases):
            assert f"`/{name}" in README, name
    for key in re.findall(r"(Ctrl-[A-Z](?: Ctrl-[A-Z])?|Alt-Enter|Esc Enter|//text)", KEYS_HELP):
        assert key in README, key


def test_install_line_roles_completion_and_bare_prompt_are_documented() -> None:
    assert "pipx install '.[local]'" in README
    assert "uv tool install --from . 'countbot-cli[local]'" in README
    assert "10–15 minutes on two cores" in README
    for needle in ("roles/NAME.md", "countbot completion bash", "countbot -- sessions", "-o KEY"):
        assert needle in README, needle


def test_no_link_leaves_the_repository() -> None:
    for path in [ROOT / "README.md", *sorted((ROOT / "docs").rglob("*.md"))]:
        text = path.read_text(encoding="utf-8")
        for target in re.findall(r"\]\(([^)]+)\)", text) + re.findall(r"`(\.\./[^`]*)`", text):
            if re.match(r"[a-z]+://", target):
                continue  # a web address is not a file of the repository
            resolved = (path.parent / target.split("#")[0]).resolve()
            assert resolved.is_relative_to(ROOT) and resolved.exists(), (path.name, target)
