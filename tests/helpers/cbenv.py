"""Helpers to run the installed `countbot` as a user would: an isolated home, a config file
pointing at a loopback server, no API keys from the real environment."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import yaml

COUNTBOT = str(Path(sys.executable).parent / "countbot")
TEST_KEY = "sk-test-SECRET-0123456789abcdef"


@dataclass
class CB:
    """One isolated countbot installation: a work folder with config.yaml, sessions/, MEMORY.md."""

    root: Path
    work: Path
    env: dict[str, str]

    @property
    def config_file(self) -> Path:
        return self.work / "config.yaml"

    @property
    def sessions_dir(self) -> Path:
        return self.work / "sessions"

    @property
    def memory_file(self) -> Path:
        return self.work / "MEMORY.md"

    @property
    def user_home(self) -> Path:
        """countbot's own folder for this user ($XDG_CONFIG_HOME/countbot)."""
        return Path(self.env["XDG_CONFIG_HOME"]) / "countbot"

    def write_config(self, cfg: dict[str, Any]) -> None:
        """Write work/config.yaml and trust it, as the user would with `countbot config trust`
        (countbot runs in work/ and finds the file by lookup)."""
        self.config_file.write_text(yaml.safe_dump(cfg, sort_keys=False), encoding="utf-8")
        self.trust_config()

    def trust_config(self) -> None:
        """Trust work/config.yaml as it is now (the record `countbot config trust` makes)."""
        from countbot_cli.config import trust

        trust.trust(self.config_file, self.config_file.read_bytes(), self.user_home)

    def run(
        self,
        *args: str,
        input: str | None = None,
        timeout: float = 60,
        env: dict[str, str] | None = None,
    ) -> subprocess.CompletedProcess[str]:
        return subprocess.run(
            [COUNTBOT, *args],
            input=input if input is not None else "",
            capture_output=True,
            text=True,
            cwd=self.work,
            env={**self.env, **(env or {})},
            timeout=timeout,
        )

    def popen(self, *args: str, env: dict[str, str] | None = None) -> subprocess.Popen[str]:
        return subprocess.Popen(
            [COUNTBOT, *args],
            stdin=subprocess.DEVNULL,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
            cwd=self.work,
            env={**self.env, **(env or {})},
        )

    def session_files(self) -> list[Path]:
        if not self.sessions_dir.exists():
            return []
        return sorted(p for p in self.sessions_dir.glob("*.json") if p.name != "index.json")

    def only_session(self) -> dict[str, Any]:
        files = self.session_files()
        assert len(files) == 1, [f.name for f in files]
        data: dict[str, Any] = json.loads(files[0].read_text(encoding="utf-8"))
        return data


def clean_env(root: Path) -> dict[str, str]:
    """The environment of a user with no keys, no config and a home under `root`."""
    home = root / "home"
    home.mkdir(parents=True, exist_ok=True)
    env = {
        "PATH": os.environ.get("PATH", "/usr/bin:/bin"),
        "HOME": str(home),
        "XDG_CONFIG_HOME": str(home / ".config"),
        "XDG_DATA_HOME": str(home / ".local" / "share"),
        "LANG": "C.UTF-8",
        "LC_ALL": "C.UTF-8",
        "TERM": "xterm-256color",
        "PYTHONDONTWRITEBYTECODE": "1",
    }
    for keep in ("TMPDIR", "SYSTEMROOT"):
        if keep in os.environ:
            env[keep] = os.environ[keep]
    return env


def provider_config(base_url: str, **extra: Any) -> dict[str, Any]:
    provider: dict[str, Any] = {
        "type": "openai",
        "api_base": base_url,
        "api_key": TEST_KEY,
        "model": "test-model",
        "max_retries": 2,
    }
    provider.update(extra)
    return {"default_provider": "test", "providers": {"test": provider}}


def make_cb(tmp_path: Path, base_url: str | None, **config: Any) -> CB:
    work = tmp_path / "work"
    work.mkdir(parents=True, exist_ok=True)
    cb = CB(root=tmp_path, work=work, env=clean_env(tmp_path))
    if base_url is not None:
        cfg = provider_config(base_url, **config.pop("provider", {}))
        cfg.setdefault("tools", {"enabled": False})
        cfg.update(config)
        cb.write_config(cfg)
    return cb
