"""`countbot config trust|untrust [PATH]` and the trust lines of `config show|path`.

`config trust` reads the file once, validates those bytes as a whole config (no command runs),
prints what they set that matters for safety, and records them (`trust.trust`). Each function
writes to the stream it is given and returns an exit code; a problem is raised as a
CountbotError.
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from pathlib import Path
from typing import TextIO

from countbot_cli.config.file import Section, read_config
from countbot_cli.config.instructions import NAMES as INSTRUCTION_FILES
from countbot_cli.config.mcp import McpServer
from countbot_cli.config.settings import Settings, check_file, default_home
from countbot_cli.errors import EXIT_OK, UsageError
from countbot_cli.textsafe import sanitize_line


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
) -> int:
    """Validate PATH, show what it sets, then record its path and SHA-256."""
    from countbot_cli.config import trust

    env = os.environ if env is None else env
    cwd = Path(os.path.abspath(Path.cwd() if cwd is None else cwd))
    target = _target(path, cwd)
    if not target.is_file():
        what = "is not a file" if target.exists() else "does not exist"
        raise UsageError(f"{target} {what}", hint="usage: countbot config trust [PATH]")
    if target.name in INSTRUCTION_FILES:
        return _trust_instructions(target, out, env)
    data = read_config(target)
    settings, root = check_file(target, data, env=env, cwd=target.parent)
    out.write(f"{sanitize_line(str(target))} sets:\n")
    for label, value in summary(settings, root):
        out.write(f"  {label:<9} {sanitize_line(value)}\n")
    record = trust.trust(target, data, default_home(env))
    out.write(
        f"trusted {sanitize_line(record.path)} (sha256 {record.sha256[:16]}…): countbot applies "
        "it when started in its folder, until the file changes; "
        "`countbot config untrust` forgets it\n"
    )
    return EXIT_OK


def _trust_instructions(target: Path, out: TextIO, env: Mapping[str, str]) -> int:
    """An instructions file (config/instructions.py): its size and first lines, then trusted."""
    from countbot_cli.config import trust

    data = target.read_bytes()
    lines = data.decode("utf-8", "replace").splitlines()
    out.write(f"{sanitize_line(str(target))}: {len(data):,} bytes, {len(lines)} lines, sent ")
    out.write("in the system prompt of every request started in its folder; it begins:\n")
    for line in lines[:5]:
        out.write(f"  {sanitize_line(line)}\n")
    record = trust.trust(target, data, default_home(env))
    out.write(
        f"trusted {sanitize_line(record.path)} (sha256 {record.sha256[:16]}…) until the file "
        "changes; `countbot config untrust` forgets it\n"
    )
    return EXIT_OK


def config_untrust(
    path: Path | None,
    *,
    out: TextIO,
    env: Mapping[str, str] | None = None,
    cwd: Path | None = None,
) -> int:
    from countbot_cli.config import trust

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
    from countbot_cli.config import trust

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
