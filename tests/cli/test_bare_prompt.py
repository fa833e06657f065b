"""`countbot "question"` is `countbot ask "question"`; command names keep their meaning."""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

import fakeserver as fs
import pytest
from cbenv import make_cb

from countbot_cli.cli.main import _app_for, command_names, whole_app
from countbot_cli.cli.routing import VALUE_OPTIONS, command_of, route


def _last_user(server: fs.FakeServer, i: int = -1) -> str:
    content: str = server.chat_bodies()[i]["messages"][-1]["content"]
    return content


def test_bare_prompt_answers_like_ask_and_continues_with_c(
    tmp_path: Path, server: fs.FakeServer
) -> None:
    cb = make_cb(tmp_path, server.base_url)
    server.add(fs.text("A monad is a monoid."), fs.text("Same in Haskell."))
    first = cb.invoke("what is a monad?")
    assert (first.returncode, first.stdout) == (0, "A monad is a monoid.\n"), first.stderr
    assert _last_user(server) == "what is a monad?"
    second = cb.invoke("-c", "and in Haskell?")
    assert (second.returncode, second.stdout) == (0, "Same in Haskell.\n"), second.stderr
    saved = cb.only_session()  # -c continued the one session
    assert [m["content"] for m in saved["messages"]] == [
        "what is a monad?",
        "A monad is a monoid.",
        "and in Haskell?",
        "Same in Haskell.",
    ]


def test_bare_prompt_takes_the_model_flag_several_words_and_piped_stdin(
    tmp_path: Path, server: fs.FakeServer
) -> None:
    cb = make_cb(tmp_path, server.base_url)
    server.default = fs.text("ok")
    proc = cb.invoke("-m", "other-model", "write", "a", "haiku")
    assert (proc.returncode, proc.stdout) == (0, "ok\n"), proc.stderr
    body = server.chat_bodies()[-1]
    assert body["model"] == "other-model"
    assert body["messages"][-1]["content"] == "write a haiku"
    # nothing but piped stdin: answered like `… | countbot ask`, not the chat's terminal error
    piped = cb.invoke(input="summarise: the sky is blue\n")
    assert (piped.returncode, piped.stdout) == (0, "ok\n"), piped.stderr
    assert "summarise: the sky is blue" in _last_user(server)


def test_a_command_name_is_the_command_and_anything_else_is_a_prompt(
    tmp_path: Path, server: fs.FakeServer
) -> None:
    cb = make_cb(tmp_path, server.base_url)
    server.default = fs.text("an answer")
    listing = cb.invoke("sessions")  # the command: lists (no session yet), asks nothing
    assert listing.returncode == 0, listing.stderr
    assert server.chat_bodies() == []
    words = cb.invoke("sessions are what?")  # one word that is no command's name: a prompt
    assert (words.returncode, words.stdout) == (0, "an answer\n"), words.stderr
    assert _last_user(server) == "sessions are what?"
    forced = cb.invoke("--", "sessions")  # after --, even a command's name is a prompt
    assert (forced.returncode, forced.stdout) == (0, "an answer\n"), forced.stderr
    assert _last_user(server) == "sessions"
    # a word naming no command, even one close to a command, is a prompt too
    assert cb.invoke("model").returncode == 0
    assert _last_user(server) == "model"
    assert len(server.chat_bodies()) == 3
    helped = cb.invoke("--help", input="piped text")
    assert helped.returncode == 0 and helped.stdout.startswith("Usage: countbot")
    assert len(server.chat_bodies()) == 3


def test_every_command_in_help_is_routed_as_the_command() -> None:
    from typer.testing import CliRunner

    shown = CliRunner().invoke(whole_app(), ["--help"]).output
    listed = re.findall(r"^  (\S+)\s", shown.split("Commands:")[1], re.M)
    assert {"ask", "chat", "sessions", "config"} <= set(listed)
    for name in listed:
        assert route([name, "x"], command_names(), stdin_tty=False) == [name, "x"]
        assert route(["-c", name], command_names(), stdin_tty=True) == ["-c", name]


@pytest.mark.parametrize(
    ("argv", "tty", "routed"),
    [
        ([], True, []),  # the chat
        (["-c"], True, ["-c"]),  # the chat, continued
        (["-c"], False, ["ask", "-c"]),  # piped: ask, continued
        (["-m", "sessions", "hi"], True, ["ask", "-m", "sessions", "hi"]),  # a value, not a word
        (["--model=x", "ask"], True, ["--model=x", "ask"]),
        (["-cm", "gpt", "q"], True, ["ask", "-cm", "gpt", "q"]),  # -m last in a cluster
        (["-mgpt", "config"], True, ["-mgpt", "config"]),  # -m's value attached
        (["-o", "seed", "1", "q"], True, ["ask", "-o", "seed", "1", "q"]),
        (["-V"], False, ["-V"]),
        (["-c", "--help"], False, ["-c", "--help"]),
    ],
)
def test_the_routing_rule(argv: list[str], tty: bool, routed: list[str]) -> None:
    assert route(argv, command_names(), stdin_tty=tty) == routed


def test_routing_knows_every_root_option_that_takes_a_value() -> None:
    import typer.main

    root = typer.main.get_command(whole_app())
    for param in root.params:
        takes = 0 if getattr(param, "is_flag", False) else param.nargs
        if "--option" in param.opts:  # -o KEY VALUE: two words, joined before typer
            takes = 2
        for name in param.opts + param.secondary_opts:
            assert VALUE_OPTIONS.get(name, 0) == takes, name


@pytest.mark.parametrize(
    ("argv", "command"),
    [
        ([], None),
        (["--help"], None),
        (["-c", "--help"], None),
        (["ask", "sessions"], "ask"),
        (["-m", "sessions", "ask", "hi"], "ask"),  # -m's value is no command
        (["-mgpt", "config", "show"], "config"),
        (["-o", "seed", "1", "sessions", "list"], "sessions"),
        (["--", "sessions"], None),
    ],
)
def test_the_command_a_line_runs(argv: list[str], command: str | None) -> None:
    assert command_of(argv, command_names()) == command


def test_each_command_is_built_alone_exactly_as_in_the_whole_app() -> None:
    """countbot builds only the command that runs (typer converts each command it holds at
    start-up): the root's options and the command itself are the same as in the whole app."""
    import typer.core
    import typer.main

    whole = typer.main.get_command(whole_app())
    assert isinstance(whole, typer.core.TyperGroup)
    for name in command_names():
        alone = typer.main.get_command(_app_for(name))
        assert isinstance(alone, typer.core.TyperGroup) and list(alone.commands) == [name]
        assert [p.name for p in alone.params] == [p.name for p in whole.params]
        one, full = alone.commands[name], whole.commands[name]
        assert [p.name for p in one.params] == [p.name for p in full.params]
        assert _help(alone, one, name) == _help(whole, full, name)


def _help(root: Any, command: Any, name: str) -> str:
    parent = root.context_class(root, info_name="countbot")
    return str(command.get_help(command.context_class(command, info_name=name, parent=parent)))
