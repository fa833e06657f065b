"""Shell completion: `countbot completion bash|zsh|fish` prints a small script; the script asks
`countbot __complete WORD… CURRENT` (hidden; answered in `main.run` before the bare-prompt rule)
for the candidates, one `word<TAB>description` a line.

typer's own completion stays off (`add_completion=False`): it adds options to every start-up
and imports its shell detection, which `--help` and `--version` would pay for. Here the cost is
only paid when the shell asks: commands, subcommands and options come from the typer app itself,
session ids from the session store, role and template names from their folders, option keys
for `-o` from config/options.py, each source imported only when its candidates are asked for
(completing a command's name reads no settings).
"""

from __future__ import annotations

import sys
from collections.abc import Iterator
from typing import Any, TextIO

from countbot_cli.errors import UsageError

SHELLS = ("bash", "zsh", "fish")

BASH = r"""# countbot completion for bash: eval "$(countbot completion bash)" in ~/.bashrc
_countbot_complete() {
    local IFS=$'\n' line
    COMPREPLY=()
    for line in $(countbot __complete "${COMP_WORDS[@]:1:COMP_CWORD}" 2>/dev/null); do
        COMPREPLY+=("${line%%$'\t'*}")
    done
}
complete -o default -F _countbot_complete countbot
"""

ZSH = r"""#compdef countbot
# countbot completion for zsh: eval "$(countbot completion zsh)" in ~/.zshrc (after compinit)
_countbot() {
    local -a found
    local line
    for line in "${(@f)$(countbot __complete "${(@)words[2,CURRENT]}" 2>/dev/null)}"; do
        [[ -n $line ]] && found+=("${${line%%$'\t'*}//:/\\:}:${line#*$'\t'}")
    done
    if (( ${#found} )); then
        _describe 'countbot' found
    else
        _files
    fi
}
compdef _countbot countbot
"""

FISH = r"""# countbot completion for fish: countbot completion fish > ~/.config/fish/completions/countbot.fish
function __countbot_complete
    countbot __complete (commandline -opc)[2..-1] (commandline -ct) 2>/dev/null
end
complete -c countbot -a '(__countbot_complete)'
"""

SESSION_COMMANDS = ("show", "delete", "rename", "export", "summary", "resume")


def script(shell: str) -> str:
    return {"bash": BASH, "zsh": ZSH, "fish": FISH}[shell]


def completion(shell: str, out: TextIO) -> int:
    """`countbot completion SHELL`: the script for it; another name is a usage error (exit 2)."""
    if shell not in SHELLS:
        raise UsageError(f"no completion for {shell!r}: use bash, zsh or fish")
    out.write(script(shell))
    return 0


def run_complete(root: Any, words: list[str], out: TextIO | None = None) -> int:
    """Print the candidates for the last of `words` (the word under the cursor, maybe empty),
    `root` being the click command typer builds from the app. Never fails loudly: a shell asking
    for completions gets nothing rather than a traceback."""
    out = out or sys.stdout
    try:
        for word, desc in candidates(root, words[:-1], words[-1] if words else ""):
            out.write(f"{word}\t{desc}\n" if desc else f"{word}\n")
    except Exception:  # a broken config or store: no candidates
        return 0
    return 0


def candidates(root: Any, before: list[str], current: str) -> list[tuple[str, str]]:
    cmd, path, positionals, pending = _walk(root, before)
    found = list(_for(cmd, path, positionals, pending, current, _config_named(before)))
    return [(w, d) for w, d in found if w.startswith(current)]


def _walk(cmd: Any, before: list[str]) -> tuple[Any, list[str], int, Any]:
    """The command the words lead to, its path, how many arguments it has so far, and the
    option still waiting for a value (or None)."""
    path: list[str] = []
    positionals, skip, pending = 0, 0, None
    for word in before:
        if skip:
            skip -= 1
            pending = pending if skip else None
            continue
        opt = _option(cmd, word)
        if opt is not None:
            skip = 0 if (opt.is_flag or "=" in word) else opt.nargs
            pending = opt if skip else None
        elif not word.startswith("-") and hasattr(cmd, "commands") and word in cmd.commands:
            cmd, positionals = cmd.commands[word], 0
            path.append(word)
        elif not word.startswith("-"):
            positionals += 1
    return cmd, path, positionals, (pending if skip else None)


def _config_named(words: list[str]) -> str | None:
    """The value of the last `--config` among the words (sessions live beside that file)."""
    found = None
    for i, word in enumerate(words):
        if word == "--config" and i + 1 < len(words):
            found = words[i + 1]
        elif word.startswith("--config="):
            found = word.split("=", 1)[1]
    return found


def _option(cmd: Any, word: str) -> Any:
    name = word.split("=", 1)[0]
    for param in cmd.params:
        if param.param_type_name == "option" and name in (*param.opts, *param.secondary_opts):
            return param
    return None


def _for(
    cmd: Any, path: list[str], positionals: int, pending: Any, current: str, config: str | None
) -> Iterator[tuple[str, str]]:
    if pending is not None:
        if "--session" in pending.opts:
            yield from _sessions(config)
        elif "--role" in pending.opts:
            yield from _roles()
        elif "--template" in pending.opts:
            yield from _templates()
        elif "--option" in pending.opts:
            from countbot_cli.config.options import KNOWN  # a TAB loads only what it completes

            yield from ((key, "") for key in KNOWN)
        return
    if current.startswith("-"):
        for param in cmd.params:
            if param.param_type_name == "option" and not getattr(param, "hidden", False):
                for name in (*param.opts, *param.secondary_opts):
                    yield name, (param.help or "").split(". ")[0]
        return
    if hasattr(cmd, "commands") and positionals == 0:
        for name, sub in cmd.commands.items():
            if not sub.hidden:
                yield name, (sub.help or sub.short_help or "").split("\n")[0]
    if path[-1:] and path[-1] in SESSION_COMMANDS and (positionals == 0 or path[-1] == "delete"):
        yield from _sessions(config)


def _sessions(config: str | None) -> Iterator[tuple[str, str]]:
    from countbot_cli.config.settings import load_settings  # a TAB: for --session only
    from countbot_cli.conversation.sessions.store import SessionStore  # likewise

    settings = load_settings(config_path=config, require_provider=False)
    for head in SessionStore(settings.sessions_dir).list():
        yield str(head["id"]), " ".join(str(head.get("title") or "").split())[:60]


def _roles() -> Iterator[tuple[str, str]]:
    from countbot_cli.config.roles import parse_role, role_names, roles_dir  # a TAB: --role

    for name in role_names():
        try:
            first = parse_role(name, roles_dir() / f"{name}.md").first_line[:60]
        except Exception:  # a broken role is still a name to complete
            first = ""
        yield name, first


def _templates() -> Iterator[tuple[str, str]]:
    from countbot_cli.config.templates import load_template, template_names  # a TAB: --template

    for name in template_names():
        try:
            first = load_template(name).first_line[:60]
        except Exception:  # a broken template is still a name to complete
            first = ""
        yield name, first
