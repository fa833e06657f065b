"""The bodies of `countbot config trust|untrust [PATH]`, and the trust lines of `config show|path`.

`config trust` reads the file once (capped, stat'ed first), shows what would be trusted (a
config's safety-relevant settings and a `warning:` line for each that hands something over; an
instructions file's or a skill's whole text, paged), asks y/N (without a terminal, `--yes`),
and only then records those bytes (`trust.trust`). Each function writes to the stream it is
given and returns an exit code. docs/design/tools.md says more.
"""

from __future__ import annotations

import os
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import TextIO
from urllib.parse import urlsplit

from countbot_cli import keyguard
from countbot_cli.config import trust
from countbot_cli.config.file import Section, read_config
from countbot_cli.config.home import default_home
from countbot_cli.config.instructions import MAX_BYTES as INSTRUCTIONS_MAX_BYTES
from countbot_cli.config.instructions import NAMES as INSTRUCTION_FILES
from countbot_cli.config.instructions import read_sent
from countbot_cli.config.mcp_server import McpServer
from countbot_cli.config.presets import PRESETS
from countbot_cli.config.providers import ProviderConfig
from countbot_cli.config.settings import Settings, check_file
from countbot_cli.config.skills import SKILL_FILE
from countbot_cli.conversation.sessions.session import plural
from countbot_cli.errors import EXIT_OK, UsageError
from countbot_cli.textsafe import sanitize, sanitize_line
from countbot_cli.ui import questions
from countbot_cli.ui.terminal import isatty

_LOCAL_HOSTS = ("localhost", "127.0.0.1", "::1")


@dataclass
class Review:
    """How `config trust` shows a file and asks about it: `confirm` is the y/N question and
    `page` a pager (False when it could not run), each None when there is no terminal;
    `yes` (--yes) agrees unasked."""

    out: TextIO
    yes: bool = False
    confirm: Callable[[str], bool] | None = None
    page: Callable[[str], bool] | None = None

    def show_long(self, text: str) -> bool:
        """`text` through the pager on a terminal (True), else (no terminal, or a pager that
        did not run) written out (False)."""
        if self.page is not None and self.page(text):
            return True
        self.out.write(text if text.endswith("\n") else text + "\n")
        return False

    def agreed(self, what: str) -> bool:
        if self.yes:
            return True
        if self.confirm is None:
            raise UsageError(
                f"not trusting {what}: there is no terminal to ask on",
                hint="read what it holds above, then run again with --yes",
            )
        self.out.flush()
        return self.confirm(f"Trust {what} as shown?")


def terminal_review(out: TextIO, yes: bool, stdin: TextIO | None) -> Review:
    """The review where countbot runs: asked when stdin is a terminal, paged when stdout is
    one too; else only shown (and `--yes` needed)."""
    asks = isatty(stdin)
    pages = asks and isatty(out)
    return Review(out, yes, questions.yes_no if asks else None, page_on_terminal if pages else None)


def _target(path: Path | None, cwd: Path) -> Path:
    """PATH (default ./config.yaml) as an absolute, normalised path."""
    raw = os.path.expanduser(path) if path is not None else "config.yaml"
    return Path(os.path.normpath(cwd / raw))


def config_trust(
    path: Path | None,
    *,
    out: TextIO,
    env: Mapping[str, str] | None = None,
    cwd: Path | None = None,
    review: Review | None = None,
) -> int:
    """Validate PATH, show what it sets, ask, then record its path and SHA-256."""
    env = os.environ if env is None else env
    cwd = Path(os.path.abspath(Path.cwd() if cwd is None else cwd))
    review = review or Review(out)
    target = _target(path, cwd)
    if not target.is_file():
        what = "is not a file" if target.exists() else "does not exist"
        raise UsageError(f"{target} {what}", hint="usage: countbot config trust [PATH]")
    if target.name in INSTRUCTION_FILES or target.name == SKILL_FILE:  # shown whole, then asked
        return _trust_instructions(target, out, env, review)
    data = read_config(target)
    settings, root = check_file(target, data, env=env, cwd=target.parent)
    if env is os.environ:  # its keys, read to check it, go to no pager or child
        keyguard.forget(os.environ, settings.providers.values())
    out.write(f"{sanitize_line(str(target))} sets:\n")
    for label, value in summary(settings, root):
        out.write(f"  {label:<9} {sanitize_line(value)}\n")
    for line in warnings(settings, root, target.parent):
        out.write(f"warning: {sanitize_line(line)}\n")
    if not review.agreed(sanitize_line(str(target))):
        out.write("not trusted: nothing recorded\n")
        return EXIT_OK
    record = trust.trust(target, data, default_home(env))
    out.write(
        f"trusted {sanitize_line(record.path)} (sha256 {record.sha256[:16]}…): countbot applies "
        "it when started in its folder, until the file changes; "
        "`countbot config untrust` forgets it\n"
    )
    return EXIT_OK


def _trust_instructions(target: Path, out: TextIO, env: Mapping[str, str], review: Review) -> int:
    """An instructions file: the whole text that would be sent, then the question."""
    try:
        data, size = read_sent(target)
    except OSError as exc:
        raise UsageError(f"{target}: cannot read it ({exc.strerror or exc})") from None
    text = data.decode("utf-8", "replace")
    where = sanitize_line(str(target))
    head = (
        f"{where}: {size:,} bytes, sent in the system prompt of every request started in its folder"
        if target.name != SKILL_FILE
        else f"{where}: {size:,} bytes, a skill: its name and description in the system prompt, "
        "its text read by the model when a task matches"
    )
    if size > INSTRUCTIONS_MAX_BYTES:
        head += f"; only its first {INSTRUCTIONS_MAX_BYTES:,} bytes are sent: those are shown and trusted"
    if review.show_long(f"{head}:\n\n{sanitize(text)}"):
        out.write(f"{head} ({plural(len(text.splitlines()), 'line')} paged)\n")
    if not review.agreed(f"{where} ({len(data):,} bytes)"):
        out.write("not trusted: nothing recorded\n")
        return EXIT_OK
    record = trust.trust(target, data, default_home(env))
    out.write(
        f"trusted {sanitize_line(record.path)} (sha256 {record.sha256[:16]}…) until the file "
        "changes; `countbot config untrust` forgets it\n"
    )
    return EXIT_OK


def page_on_terminal(text: str) -> bool:
    """`text` through the user's pager (`$MANPAGER`, `$PAGER`, else less, as pydoc picks);
    False when the user's pager did not run (not found, or it failed), so the caller shows the
    text itself: the question is never about a text that was not shown."""
    import pydoc
    import subprocess

    cmd = os.environ.get("MANPAGER") or os.environ.get("PAGER")
    if not cmd:
        pydoc.pager(text)
        return True
    proc = subprocess.Popen(cmd, shell=True, stdin=subprocess.PIPE, errors="backslashreplace")
    try:
        with proc.stdin as pipe:  # type: ignore[union-attr]
            pipe.write(text)
    except OSError:  # the user quit the pager before the end
        pass
    return proc.wait() == 0


def config_untrust(
    path: Path | None,
    *,
    out: TextIO,
    env: Mapping[str, str] | None = None,
    cwd: Path | None = None,
) -> int:
    env = os.environ if env is None else env
    cwd = Path(os.path.abspath(Path.cwd() if cwd is None else cwd))
    target = _target(path, cwd)
    shown = sanitize_line(trust.file_key(target))
    if trust.untrust(target, default_home(env)):
        out.write(f"no longer trusted: {shown}\n")
    else:
        out.write(f"{shown} was not trusted; nothing to do\n")
    return EXIT_OK


def summary(settings: Settings, root: Section) -> list[tuple[str, str]]:
    """What a file sets that decides where prompts and keys go, what runs unasked and which
    files are written, as (label, value) rows."""
    rows = [("provider", _provider_row(settings, root, name)) for name in settings.providers]
    if not rows:
        rows.append(("provider", "(none in the file)"))
    t = settings.tools
    allow = ", ".join(t.allow) if t.allow else "(none)"
    outside = "allowed" if t.allow_outside_workspace else "no"
    rows += [
        ("tools", f"{'on' if t.enabled else 'off'} · approval {t.approval} · allow {allow}"),
        ("outside", f"access outside the workspace: {outside} · workspace {t.workspace}"),
        ("memory", str(settings.memory.file)),
        ("sessions", str(settings.sessions_dir)),
    ]
    rows += [("mcp", _mcp_row(m)) for m in settings.mcp.servers]
    return rows


def warnings(settings: Settings, root: Section, folder: Path) -> list[str]:
    """The settings of a file that hand something over: where the keys go, what runs
    without asking, what starts, what is written outside `folder` (the file's own)."""
    found: list[str] = []
    providers = root.section("providers")
    for name, p in settings.providers.items():
        found += _provider_warnings(name, p, providers.section(name).text("api_key_cmd"))
    t = settings.tools
    for rule in t.allow:
        every = " (every command)" if rule.strip() == "*" else ""
        found.append(f"tools.allow `{rule}`: commands it matches{every} run without asking")
    if t.approval == "auto":
        found.append("tools.approval: auto: file writes and edits run without asking")
    if t.allow_outside_workspace:
        found.append("tools.allow_outside_workspace: the tools may open files outside it")
    for m in settings.mcp.servers:
        how = f"connects to {m.url}" if m.url else f"runs `{m.describe()}`"
        found.append(f"MCP server '{m.name}' {how} when a turn offers tools")
    for label, place in (
        ("memory.file", settings.memory.file),
        ("sessions_dir", settings.sessions_dir),
    ):
        if not place.resolve().is_relative_to(folder.resolve()):
            found.append(f"{label} writes outside the project: {place}")
    return found


def _provider_warnings(name: str, p: ProviderConfig, key_cmd: str | None) -> list[str]:
    if p.type != "openai":
        return []
    found = []
    if key_cmd:
        found.append(f"provider '{name}' runs `{key_cmd}` at every start, for its key")
    origin = _key_origin(p, key_cmd)
    host = (urlsplit(p.api_base).hostname or "").lower()
    preset = next(
        (pr for pr in PRESETS.values() if pr.api_base and urlsplit(pr.api_base).hostname == host),
        None,
    )
    if origin and preset is None and host not in _LOCAL_HOSTS:
        found.append(
            f"provider '{name}' sends your API key ({origin}) to {p.api_base}, "
            "which is not a known provider's server"
        )
    elif p.api_key_env and preset is not None and p.api_key_env != preset.api_key_env:
        found.append(f"provider '{name}' sends the value of ${p.api_key_env} to {p.api_base}")
    return found


def _key_origin(p: ProviderConfig, key_cmd: str | None) -> str:
    """Where the key of `p` comes from ("" when it has none)."""
    if key_cmd:
        return "from its command"
    if p.api_key_source == "config file":
        return "written in the file"
    return f"${p.api_key_env}" if p.api_key_env else ""


def _mcp_row(m: McpServer) -> str:
    """What an MCP server entry would run or reach: the command line (and its folder), or the
    URL; the names of its env and headers (never their values); what runs without asking."""
    if m.url:
        how = f"{m.name}: connects to {m.url}"
        names = f" · headers {', '.join(m.headers)}" if m.headers else ""
    else:
        where = f" in {m.cwd}" if m.cwd else ""
        how = f"{m.name}: runs `{m.describe()}`{where}"
        names = f" · env {', '.join(m.env)}" if m.env else ""
    allow = ", ".join(m.allow) if m.allow else "(none)"
    return f"{how}{names} · tools run without asking: {allow}"


def _provider_row(settings: Settings, root: Section, name: str) -> str:
    p = settings.providers[name]
    cmd = root.section("providers").section(name).text("api_key_cmd")
    if cmd:
        key = f"key from the command `{cmd}`"
    elif p.api_key_source == "config file":
        key = "key written in the file"
    elif p.api_key_env:
        key = f"key from env {p.api_key_env}"
    else:
        key = "no key"
    where = p.model_path if p.type == "local" else p.api_base
    default = " (default)" if name == settings.default_provider else ""
    headers = f" · headers {', '.join(p.headers)}" if p.headers else ""
    return f"{name}{default}: {where} · {key}{headers}"


def trust_rows(settings: Settings, env: Mapping[str, str]) -> list[tuple[str, str]]:
    """`config path` / `config show` rows: the ./config.yaml left out, and the trusted files."""
    rows: list[tuple[str, str]] = []
    if settings.ignored_config is not None:
        why = "changed since trusted" if settings.ignored_why == "changed" else "not trusted"
        rows.append(
            ("ignored", f"{settings.ignored_config} ({why}: `countbot config trust` applies it)")
        )
    home = default_home(env)
    listed = sorted(trust.records(home))
    for i, path in enumerate(listed):
        rows.append(("trusted" if i == 0 else "", path))
    if not listed:
        rows.append(("trusted", "(no project config trusted)"))
    rows.append(("trust list", str(trust.store_path(home))))
    return rows
