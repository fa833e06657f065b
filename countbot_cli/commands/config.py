"""The bodies of `countbot config init|show|path` and `config allow list|remove` (`config
check` and `models`: config_check.py; `config trust|untrust`: trust.py).

Each function writes to the stream it is given and returns an exit code; a problem the user must
fix is raised as a CountbotError (the CLI prints it and exits with its code).
"""

from __future__ import annotations

import os
import shutil
from collections.abc import Mapping
from pathlib import Path
from typing import Any, TextIO

from countbot_cli.commands.trust import trust_rows
from countbot_cli.config import saved_allow
from countbot_cli.config.example import EXAMPLE_CONFIG
from countbot_cli.config.home import default_config_path, default_home, derived_dir
from countbot_cli.config.mcp_server import McpServer
from countbot_cli.config.providers import NO_PROVIDER_HINT, ProviderConfig
from countbot_cli.config.settings import Settings
from countbot_cli.errors import EXIT_OK, UsageError
from countbot_cli.memory.embed import describe as describe_recall
from countbot_cli.textsafe import sanitize_line, visible

# ---- config init ----


def config_init(
    path: Path | None, *, force: bool, out: TextIO, env: Mapping[str, str] | None = None
) -> int:
    """Write the starter config (mode 0600). An existing file is kept unless `force`."""
    target = Path(os.path.abspath(os.path.expanduser(path))) if path else default_config_path(env)
    if target.is_dir():
        raise UsageError(f"{target} is a folder", hint="give a file path, e.g. config.yaml")
    backup = None
    if target.exists():
        if not force:
            raise UsageError(
                f"{target} already exists", hint="pass --force to replace it; a .bak copy is kept"
            )
        backup = target.with_name(target.name + ".bak")
        shutil.copy2(target, backup)
    target.parent.mkdir(parents=True, exist_ok=True, mode=0o700)
    _write_private(target, EXAMPLE_CONFIG)
    out.write(f"wrote {target} (mode 0600)\n")
    if backup is not None:
        out.write(f"the previous file is in {backup}\n")
    if path and target not in (Path.cwd() / "config.yaml", default_config_path(env)):
        out.write(f"countbot finds it with --config {target} or COUNTBOT_CONFIG={target}\n")
    elif path and target != default_config_path(env):  # ./config.yaml: a project's file
        out.write(
            "countbot applies ./config.yaml once you trust it: edit it, "
            "then run `countbot config trust`\n"
        )
    out.write(
        "next: export OPENAI_API_KEY=… (or edit the providers section for another service), "
        "then run `countbot config check`\n"
    )
    return EXIT_OK


def _write_private(target: Path, text: str) -> None:
    """Atomic write: a 0600 temporary file beside the target, fsync, rename."""
    tmp = target.with_name(f".{target.name}.{os.getpid()}.tmp")
    fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
    try:
        with os.fdopen(fd, "w", encoding="utf-8") as f:
            f.write(text)
            f.flush()
            os.fsync(f.fileno())
        os.chmod(tmp, 0o600)
        os.replace(tmp, target)
    except BaseException:
        tmp.unlink(missing_ok=True)
        raise


# ---- config show / path ----


def provider_dict(p: ProviderConfig) -> dict[str, Any]:
    d: dict[str, Any] = {"type": p.type, "preset": p.preset}
    if p.type == "local":
        d["model_path"] = p.model_path
    else:
        d["api_base"] = p.api_base
        d["api_key"] = p.masked_api_key
        d["api_key_source"] = p.api_key_source
    d.update(model=p.model or None, context_window=p.context_window)
    if p.headers:
        d["headers"] = p.masked_headers
    if p.type != "local":
        d.update(
            stream_tools=p.stream_tools,
            include_usage=p.include_usage,
            prompt_cache_key=p.prompt_cache_key,
            connect_timeout=p.connect_timeout,
            read_timeout=p.read_timeout,
            max_retries=p.max_retries,
        )
    return d


def settings_dict(s: Settings) -> dict[str, Any]:
    """The effective settings as plain data, with every secret masked."""
    t, m, pe = s.tools, s.memory, s.persona
    return {
        "config_file": str(s.config_file) if s.config_file else None,
        "provider": s.provider.name if s.provider.type != "none" else None,
        "default_provider": s.default_provider,
        "providers": {name: provider_dict(p) for name, p in s.providers.items()},
        "temperature": s.temperature,
        "max_tokens": s.max_tokens,
        "max_iterations": s.max_iterations,
        "persona": {
            "ai_name": pe.ai_name,
            "user_name": pe.user_name,
            "personality": pe.personality,
            "language": pe.language,
            "max_history_messages": pe.max_history_messages,
        },
        "memory": {
            "file": str(m.file),
            "overflow_summary": m.overflow_summary,
            "auto_memory": m.auto_memory,
            "auto_messages": m.auto_messages,
            "auto_chars": m.auto_chars,
            "inject": m.inject,
            "recall_lines": m.recall_lines,
            "recall_tokens": m.recall_tokens,
            "recall_wait": m.recall_wait,
            "recall_keep": m.recall_keep,
        },
        "tools": {
            "enabled": t.enabled,
            "approval": t.approval,
            "workspace": str(t.workspace),
            "allow_outside_workspace": t.allow_outside_workspace,
            "search_all_sessions": t.search_all_sessions,
            "shell_timeout": t.shell_timeout,
            "max_output_chars": t.max_output_chars,
            "allow": list(t.allow),
            "deny": list(t.deny),
        },
        "sessions_dir": str(s.sessions_dir),
        "mcp": {"servers": {m.name: mcp_server_dict(m) for m in s.mcp.servers}},
        "fallback": list(s.fallback.names),
    }


def mcp_server_dict(m: McpServer) -> dict[str, Any]:
    """One MCP server as `config show` prints it: `env` and `headers` values masked."""
    if m.url:
        d: dict[str, Any] = {"url": m.url, "headers": m.masked_headers()}
    else:
        d = {"command": m.command, "args": list(m.args), "env": m.masked_env()}
        d["cwd"] = str(m.cwd) if m.cwd else None
    d.update(allow=list(m.allow), timeout=m.timeout, start_timeout=m.start_timeout)
    return d


def config_show(settings: Settings, out: TextIO, env: Mapping[str, str] | None = None) -> int:
    import yaml

    where = settings.config_file or "no config file: defaults and environment"
    out.write(f"# effective configuration ({where}); API keys are masked\n")
    env = os.environ if env is None else env
    for label, value in [*trust_rows(settings, env), *folder_rows(settings, env)]:
        out.write(f"# {label + ':' if label else '':<11} {value}\n")
    out.write(f"# {'recall:':<11} {describe_recall(settings.memory.inject)}\n")
    if settings.provider.type == "none":
        out.write("# no provider is configured: " + NO_PROVIDER_HINT + "\n")
    text = yaml.safe_dump(settings_dict(settings), sort_keys=False, allow_unicode=True)
    out.write(text)
    return EXIT_OK


def config_path(settings: Settings, out: TextIO, env: Mapping[str, str] | None = None) -> int:
    rows = [
        ("config file", str(settings.config_file) if settings.config_file else "(none)"),
        ("home", str(settings.home)),
        ("sessions", str(settings.sessions_dir)),
        ("memory file", str(settings.memory.file)),
        ("data dir", str(settings.data_dir)),
        ("workspace", str(settings.tools.workspace)),
        ("saved approvals", str(settings.tools.saved_file)),
    ]
    if settings.provider.type == "local":
        rows.append(("model file", settings.provider.model_path or "(none)"))
    if settings.config_file is None:
        rows.append(
            (
                "searched",
                "--config, $COUNTBOT_CONFIG, ./config.yaml, " + str(settings.home / "config.yaml"),
            )
        )
    env = os.environ if env is None else env
    rows += [*trust_rows(settings, env), *folder_rows(settings, env)]
    width = max(len(label) for label, _ in rows)
    for label, value in rows:
        out.write(f"{label.ljust(width)}  {value}\n")
    return EXIT_OK


def folder_rows(settings: Settings, env: Mapping[str, str]) -> list[tuple[str, str]]:
    """Which folders a file-sync tool may share (the sessions, the memory) and which are this
    machine's own (what countbot derives from them, in the cache folder; the data folder)."""
    memory = settings.memory.file
    rows = [
        ("sync", f"{settings.sessions_dir} (sessions; conflict copies are merged)"),
        ("", f"{memory} (memory, with its {memory.stem}.* files; conflict copies are merged)"),
    ]
    derived = {
        derived_dir(settings.sessions_dir, env): "search index, listing cache, locks",
        derived_dir(memory.parent, env): "recall vectors, lock",
    }
    data = derived_dir(settings.data_dir, env)
    derived[data] = ", ".join(filter(None, [derived.get(data), "token and window caches"]))
    rows += [
        ("local" if i == 0 else "", f"{folder} (derived: {what}; rebuilt when missing)")
        for i, (folder, what) in enumerate(derived.items())
    ]
    rows.append(("", f"{settings.data_dir} (data dir: cost tally, input history)"))
    return rows


def allow_list(out: TextIO, env: Mapping[str, str] | None = None) -> int:
    """`config allow list`: the rules saved with `A`, one a line, and the file holding them."""
    path = saved_allow.allow_file(default_home(os.environ if env is None else env))
    rules = saved_allow.load(path).rules()
    if not rules:
        out.write(f"no saved approvals ({path} has none)\n")
        return 0
    out.write(f"saved approvals in {path}:\n")
    for kind, text in rules:
        out.write(f"  {kind:<8} {visible(text)}\n")
    return 0


def allow_remove(rule: str, out: TextIO, env: Mapping[str, str] | None = None) -> int:
    """`config allow remove RULE`: forget one saved command or tool (the exact text listed)."""
    path = saved_allow.allow_file(default_home(os.environ if env is None else env))
    kind = saved_allow.remove(path, rule)
    if kind is None:
        raise UsageError(
            f"no saved approval {sanitize_line(rule)!r} in {path} (see `countbot config allow list`)"
        )
    out.write(f"removed the saved {kind} rule {sanitize_line(rule)!r} from {path}\n")
    return 0
