"""The bare prompt: `countbot "question"` is `countbot ask "question"`.

Applied to the words after `countbot` before typer parses them: the first word that is not an
option (nor an option's value) decides. Exactly a command's name runs that command; anything
else runs the whole line as `countbot ask …`; `--` forces a prompt. No word at all: the chat on
a terminal (or with `--pick`), `ask` with stdin piped or `-t NAME`. `-h` and `-V` before any
word stay the root's. `join_option_pairs` makes `-o KEY VALUE` one word `KEY=VALUE` for the
root, `ask` and `chat` only (typer has no repeatable two-value option).

Imports nothing: it runs before typer builds the command line.
"""

from __future__ import annotations

from collections.abc import Collection

# the options that take values (the root's, see main_options, and ask's), and how many
VALUE_OPTIONS = {
    "--config": 1,
    "--session": 1,
    "-s": 1,
    "--model": 1,
    "-m": 1,
    "--provider": 1,
    "-p": 1,
    "--system": 1,
    "--role": 1,
    "-r": 1,
    "--attach": 1,
    "-a": 1,
    "--option": 2,
    "--schema": 1,
    "--template": 1,
    "-t": 1,
    "-o": 2,
}
ROOT_ONLY = frozenset({"-h", "--help", "-V", "--version"})


def route(argv: list[str], commands: Collection[str], *, stdin_tty: bool) -> list[str]:
    """`argv` as typer should see it: unchanged, or run as `ask` (see the module's rule)."""
    word = _deciding_word(argv)
    if word == "--":
        return ["ask", *argv]
    if word is None:  # `--pick` is the chat's alone: never an `ask`; a template is a question
        if any(w in ("-t", "--template") or w.startswith("--template=") for w in argv):
            return ["ask", *argv]
        return argv if stdin_tty or "--pick" in argv else ["ask", *argv]
    return argv if word in ROOT_ONLY or word in commands else ["ask", *argv]


def command_of(argv: list[str], commands: Collection[str]) -> str | None:
    """The command a routed `argv` runs (`ask`, `sessions`, …); None when the root itself
    answers (`--help`, the interactive chat)."""
    word = _deciding_word(argv)
    return word if word is not None and word in commands else None


def _deciding_word(argv: list[str]) -> str | None:
    """The first word that is not an option nor an option's value, or `--`, or a root-only
    option (`--help`) met before any word; None when there is none."""
    i = 0
    while i < len(argv):
        word = argv[i]
        if word == "--" or word in ROOT_ONLY:
            return word
        if word.startswith("-") and word != "-":
            i += 1 + _values_taken(word)
            continue
        return word
    return None


def _values_taken(word: str) -> int:
    """How many of the following words option `word` consumes (`--model=x` and `-mx`: none)."""
    if word.startswith("--"):
        return 0 if "=" in word else VALUE_OPTIONS.get(word, 0)
    # a cluster of short flags (`-cy`); a value option inside takes the rest as its value
    for pos, letter in enumerate(word[1:], start=1):
        takes = VALUE_OPTIONS.get("-" + letter, 0)
        if takes:
            return takes if pos == len(word) - 1 else takes - 1
    return 0


PAIR_COMMANDS = frozenset({"ask", "chat"})


def join_option_pairs(argv: list[str]) -> list[str]:
    """`-o KEY VALUE` as `-o KEY=VALUE` where `-o` is the per-call option: before any command,
    and in `ask` and `chat` (up to `--`)."""
    out: list[str] = []
    i, in_command = 0, False
    while i < len(argv):
        word = argv[i]
        if word == "--":
            return out + argv[i:]
        if word in ("-o", "--option") and i + 2 < len(argv) and "=" not in argv[i + 1]:
            out += [word, f"{argv[i + 1]}={argv[i + 2]}"]
            i += 3
            continue
        taken = 0 if in_command or not word.startswith("-") else _values_taken(word)
        if not in_command and not word.startswith("-"):
            if word not in PAIR_COMMANDS:
                return out + argv[i:]
            in_command = True
        out += argv[i : i + 1 + taken]
        i += 1 + taken
    return out
