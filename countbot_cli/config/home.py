"""Where countbot's files are (SPEC §3): its own folder (`$XDG_CONFIG_HOME/countbot`, else
`~/.config/countbot`), its cache folder (`$XDG_CACHE_HOME/countbot`, else
`~/.cache/countbot`) and in it the folder of what is derived from each data folder
(`derived_dir`), where `config init` writes, and which config file a run uses:
`--config PATH`, `$COUNTBOT_CONFIG`, `./config.yaml`, then the user's own. Whether a
`./config.yaml` found so is applied (trusted) is settings.py's decision; nothing here reads a
file's content.
"""

from __future__ import annotations

import hashlib
import os
import re
from collections.abc import Mapping
from pathlib import Path

from countbot_cli.config.file import resolve_path, user_home
from countbot_cli.errors import ConfigError


def env_path(env: Mapping[str, str], name: str) -> str | None:
    """The variable's value, stripped; None when unset or blank."""
    value = env.get(name, "").strip()
    return value or None


def xdg_config_home(env: Mapping[str, str]) -> Path:
    """`$XDG_CONFIG_HOME` when absolute, else `~/.config`."""
    xdg = env_path(env, "XDG_CONFIG_HOME")
    if xdg and os.path.isabs(xdg):  # the XDG spec says to ignore relative values
        return Path(xdg)
    return user_home(env) / ".config"


def cache_home(env: Mapping[str, str]) -> Path:
    """countbot's cache folder, shared by every memory and project: `$XDG_CACHE_HOME/countbot`
    when absolute, else `~/.cache/countbot` (what it holds: config/own_files.py)."""
    xdg = env_path(env, "XDG_CACHE_HOME")
    if xdg and os.path.isabs(xdg):  # the XDG spec says to ignore relative values
        return Path(xdg) / "countbot"
    return user_home(env) / ".cache" / "countbot"


DERIVED = "folders"  # cache_home/DERIVED/<name>-<key>: what is derived from one data folder
_SAFE = re.compile(r"[^A-Za-z0-9._-]+")


def derived_dir(source: Path, env: Mapping[str, str] | None = None) -> Path:
    """Where countbot keeps what it derives from the folder `source` (a sessions folder, the
    folder of MEMORY.md, the data folder): `<cache folder>/folders/<name>-<key>`, the key a
    hash of the folder's real path. Machine-local, so nothing rebuildable is ever written
    into a folder a file-sync tool may share, and every process of this user on this machine
    agrees on it (config/derived.py puts files and locks there)."""
    real = os.path.realpath(source)
    key = hashlib.blake2b(os.fsencode(real), digest_size=8).hexdigest()
    name = _SAFE.sub("_", os.path.basename(real))[:40] or "root"
    return cache_home(os.environ if env is None else env) / DERIVED / f"{name}-{key}"


def default_home(env: Mapping[str, str]) -> Path:
    """countbot's own folder: `$XDG_CONFIG_HOME/countbot`."""
    return xdg_config_home(env) / "countbot"


def default_config_path(env: Mapping[str, str] | None = None) -> Path:
    """Where `config init` writes when no path is given."""
    return default_home(os.environ if env is None else env) / "config.yaml"


def find_config_file(
    config_path: str | Path | None, env: Mapping[str, str], cwd: Path
) -> Path | None:
    """The config file by SPEC §3's order; an explicitly named file must exist."""
    explicit = [(str(config_path), "--config")] if config_path not in (None, "") else []
    if from_env := env_path(env, "COUNTBOT_CONFIG"):
        explicit.append((from_env, "COUNTBOT_CONFIG"))
    if explicit:
        value, origin = explicit[0]
        path = resolve_path(value, cwd, env)
        if not path.is_file():
            what = "is a folder" if path.is_dir() else "does not exist"
            raise ConfigError(
                f"the config file {path} (from {origin}) {what}",
                hint="create one with `countbot config init PATH`",
            )
        return path
    for candidate in (cwd / "config.yaml", default_home(env) / "config.yaml"):
        if candidate.is_file():
            return Path(os.path.normpath(candidate))
    return None


def found_in_cwd(
    file: Path, config_path: str | Path | None, env: Mapping[str, str], cwd: Path
) -> bool:
    """The file is ./config.yaml picked up by the lookup, not one the user named (nor the
    user's own file, when countbot starts in its folder)."""
    named = config_path not in (None, "") or env_path(env, "COUNTBOT_CONFIG")
    own = os.path.realpath(default_home(env) / "config.yaml")
    return (
        not named
        and file == Path(os.path.normpath(cwd / "config.yaml"))
        and os.path.realpath(file) != own
    )


def user_config_file(env: Mapping[str, str]) -> Path | None:
    """The user's own config.yaml, when there is one."""
    candidate = default_home(env) / "config.yaml"
    return Path(os.path.normpath(candidate)) if candidate.is_file() else None
