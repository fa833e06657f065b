"""The README is a front page and docs/ is the manual: the README's first lines give the two
commands that work on a fresh machine; every page is linked from the README and the index;
every option `--help` shows, of every command, is on a page that names the command; every
command line the manual shows runs options that exist; every slash command and key is in
docs/chat.md; and no link leaves the repository or points at a heading that is not there."""

from __future__ import annotations

import re
import shlex
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import typer.main

from countbot_cli.cli.main import whole_app
from countbot_cli.repl.slash import COMMANDS, KEYS_HELP

ROOT = Path(__file__).resolve().parents[1]
DOCS = ROOT / "docs"
README = (ROOT / "README.md").read_text(encoding="utf-8")
README_MAX_LINES = 250
# the pages written for the people who develop countbot, not for its users
NOT_MANUAL = {"ARCHITECTURE.md", "DEVELOPING.md", "index.md"}
PAGES = sorted(DOCS.glob("*.md"))
MANUAL = {p.name: p.read_text(encoding="utf-8") for p in PAGES if p.name not in NOT_MANUAL}
ROOT_COMMAND: Any = typer.main.get_command(whole_app())


def test_the_first_lines_set_up_and_run_then_test() -> None:
    first, second = README.splitlines()[:2]
    assert first.split()[:2] == ["make", "run"]
    assert second.split()[:2] == ["make", "test"]
    targets = re.findall(r"^([a-z-]+):", (ROOT / "Makefile").read_text(), re.MULTILINE)
    assert "run" in targets and "test" in targets


def test_the_readme_is_a_front_page_that_links_every_page() -> None:
    assert len(README.splitlines()) <= README_MAX_LINES
    index = (DOCS / "index.md").read_text(encoding="utf-8")
    for page in PAGES:
        if page.name != "index.md":
            assert f"(docs/{page.name})" in README, page.name
            assert f"({page.name})" in index, page.name
    for page in sorted((DOCS / "design").glob("*.md")):
        assert f"(design/{page.name})" in index, page.name


def test_the_install_lines_are_in_the_readme() -> None:
    assert "pipx install '.[local]'" in README
    assert "uv tool install --from . 'countbot-cli[local]'" in README
    assert "10–15 minutes on two cores" in README


def _commands(command: Any, path: tuple[str, ...] = ()) -> Iterator[tuple[tuple[str, ...], Any]]:
    yield path, command
    for name, sub in sorted(getattr(command, "commands", {}).items()):
        if not sub.hidden:
            yield from _commands(sub, (*path, name))


def _flags(command: Any) -> list[str]:
    return [
        flag
        for p in command.params
        if p.param_type_name == "option" and not p.hidden
        for flag in (*p.opts, *p.secondary_opts)
    ]


def _mentions(text: str, flag: str) -> bool:
    return re.search(rf"(?<![\w-]){re.escape(flag)}(?![\w-])", text) is not None


COMMANDS_AND_FLAGS = [(path, flag) for path, c in _commands(ROOT_COMMAND) for flag in _flags(c)]


@pytest.mark.parametrize(
    ("path", "flag"), COMMANDS_AND_FLAGS, ids=[" ".join((*p, f)) for p, f in COMMANDS_AND_FLAGS]
)
def test_every_option_help_shows_is_on_a_page_naming_its_command(
    path: tuple[str, ...], flag: str
) -> None:
    """`countbot` with no command is the whole program: its options may be on any page."""
    named = " ".join(("countbot", *path))
    pages = [text for text in MANUAL.values() if not path or _mentions(text, named)]
    assert pages, f"no page of the manual names `{named}`"
    assert any(_mentions(text, flag) for text in pages), f"`{named}` {flag} is not in the manual"


def test_help_itself_is_in_the_manual() -> None:
    assert any(_mentions(t, "-h/--help") for t in MANUAL.values())


def _code(text: str) -> Iterator[str]:
    """Each line of a fenced block, and each inline code span."""
    fenced = re.compile(r"^```[^\n]*\n(.*?)^```", re.MULTILINE | re.DOTALL)
    for block in fenced.findall(text):
        yield from block.splitlines()
    yield from re.findall(r"(?<!`)`([^`\n]+)`(?!`)", fenced.sub("", text))


def _words(line: str) -> list[str]:
    try:
        return shlex.split(line, comments=True)
    except ValueError:  # an open quote in an example ("…)
        return line.split()


def _command_lines() -> Iterator[tuple[str, list[str]]]:
    for name, text in [("README.md", README), *MANUAL.items()]:
        for code in _code(text):
            for m in re.finditer(r"(?<![\w/.-])countbot(?=\s)(.*)", code):
                yield name, _words(m.group(1))


def _check_line(words: list[str]) -> None:
    """Walks `countbot WORDS`: the command each word names, the options each must have."""
    command, ask = ROOT_COMMAND, ROOT_COMMAND.commands["ask"]
    allowed = set(_flags(command)) | set(_flags(ask))  # options before a bare prompt go to ask
    depth = 0  # inside [ ]: a synopsis's optional part, where | means "or"
    for raw in words:
        if depth == 0 and raw in ("|", "||", "&&", ";", ">", ">>", "2>&1"):
            return
        depth += raw.count("[") - raw.count("]")
        word = raw.strip("[]")
        if word == "--":
            return
        if re.fullmatch(r"-[\w-]+(=.*)?", word):
            flag = word.split("=")[0]
            assert flag in allowed or flag in ("-h", "--help"), (" ".join(words), flag)
            continue
        subs = getattr(command, "commands", {})
        if word in subs:
            command = subs[word]
            allowed = set(_flags(command))
        elif command is ROOT_COMMAND and word:
            command, allowed = ask, set(_flags(ask))  # the bare prompt


def test_every_command_line_the_manual_shows_has_those_commands_and_options() -> None:
    lines = list(_command_lines())
    assert len(lines) > 50
    for name, words in lines:
        try:
            _check_line(words)
        except AssertionError as exc:
            raise AssertionError(f"{name}: {exc}") from None


def test_every_slash_command_and_key_is_in_the_chat_page() -> None:
    chat = MANUAL["chat.md"]
    for command in COMMANDS:
        for name in (command.name, *command.aliases):
            assert f"`/{name}" in chat, name
    for key in re.findall(r"(Ctrl-[A-Z](?: Ctrl-[A-Z])?|Alt-Enter|Esc Enter|//text)", KEYS_HELP):
        assert key in chat, key


def _slug(heading: str) -> str:
    """GitHub's anchor for a heading: lower case, punctuation dropped, spaces as hyphens."""
    text = re.sub(r"[^\w\- ]", "", heading.strip().lower().replace("`", ""))
    return text.replace(" ", "-")


def _anchors(path: Path) -> set[str]:
    text = re.sub(r"^```.*?^```", "", path.read_text(encoding="utf-8"), flags=re.M | re.S)
    return {_slug(h) for h in re.findall(r"^#+ (.+)$", text, re.MULTILINE)}


def test_no_link_leaves_the_repository_or_misses_its_heading() -> None:
    for path in [ROOT / "README.md", *sorted(DOCS.rglob("*.md"))]:
        text = path.read_text(encoding="utf-8")
        for target in re.findall(r"\]\(([^)]+)\)", text) + re.findall(r"`(\.\./[^`]*)`", text):
            if re.match(r"[a-z]+://", target):
                continue  # a web address is not a file of the repository
            file, _, anchor = target.partition("#")
            resolved = (path.parent / file).resolve() if file else path
            assert resolved.is_relative_to(ROOT) and resolved.exists(), (path.name, target)
            if anchor:
                assert anchor in _anchors(resolved), (path.name, target)
