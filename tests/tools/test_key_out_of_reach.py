"""The API key out of reach of the commands countbot runs (keyguard.py): an approved
`cat /proc/$PPID/environ` run by a non-root user gets "Permission denied", not the key; and a
program countbot starts with its own environment (the `memory edit` editor) does not inherit
the variable the key came from.

The first test needs a user who is not root: run as one, it runs countbot as it is; run as
root, it starts countbot as `nobody` (root reads any process's environment whatever countbot
does). `nobody` must be able to run a Python with countbot's packages: this interpreter, or else
the system's of the same version with the virtual environment's packages on its path; with
neither it is skipped, saying why.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import tempfile
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import fakeserver as fs
import pytest
from cbenv import CB, clean_env, provider_config

pytestmark = pytest.mark.skipif(not sys.platform.startswith("linux"), reason="Linux /proc")

KEY_VAR = "MY_PROVIDER_CRED"  # a name the exec scrub would not catch by itself
KEY = "sk-proc-SECRET-0123456789abcdef"
NOBODY = 65534
REPO = Path(__file__).resolve().parents[2]


def _runs_as(uid: int, argv: list[str], env: dict[str, str]) -> bool:
    try:
        done = subprocess.run(
            [*argv, "-c", "import countbot_cli.__main__, httpx, yaml"],
            user=uid,
            group=uid,
            extra_groups=[],
            env=env,
            capture_output=True,
            timeout=60,
            cwd="/",
        )
    except OSError:
        return False
    return done.returncode == 0


def _countbot_for_nobody() -> tuple[list[str], dict[str, str]]:
    """(argv of countbot, extra environment) that `nobody` can run; skips when none."""
    site = Path(sys.executable).parent.parent / "lib"
    packages = sorted(site.glob("python3.*/site-packages"))
    path_env = {"PYTHONPATH": os.pathsep.join([str(REPO), *map(str, packages)])}
    version = f"python{sys.version_info.major}.{sys.version_info.minor}"
    for python, extra in (
        (sys.executable, {}),
        (shutil.which(version, path="/usr/local/bin:/usr/bin:/bin"), path_env),
    ):
        if python and _runs_as(NOBODY, [python], {"PATH": "/usr/bin:/bin", **extra}):
            return [python, "-m", "countbot_cli"], extra
    pytest.skip(f"no {version} with countbot's packages that the user nobody may run")


@pytest.fixture
def open_root() -> Iterator[Path]:
    """A folder any user may enter (pytest's own tmp_path is root's only)."""
    root = Path(tempfile.mkdtemp(prefix="countbot-keyguard-"))
    root.chmod(0o755)
    yield root
    shutil.rmtree(root, ignore_errors=True)


def _cb_with_key_from_env(root: Path, base_url: str, **config: Any) -> CB:
    work = root / "work"
    work.mkdir()
    cb = CB(root=root, work=work, env={**clean_env(root), KEY_VAR: KEY})
    cfg = provider_config(base_url)
    provider = cfg["providers"]["test"]
    del provider["api_key"]
    provider["api_key_env"] = KEY_VAR
    cb.write_config({**cfg, **config})
    return cb


def test_an_approved_command_cannot_read_the_key_from_countbots_proc_environ(
    open_root: Path, server: fs.FakeServer
) -> None:
    command = "cat /proc/$PPID/environ | tr '\\000' '\\n'; echo exit=$?"
    cb = _cb_with_key_from_env(
        open_root, server.base_url, tools={"enabled": True, "allow": [command]}
    )
    server.add(fs.tool_calls([("exec", {"command": command})]), fs.text("done"))
    argv, extra = [sys.executable, "-m", "countbot_cli"], {}
    drop: dict[str, Any] = {}
    if os.geteuid() == 0:
        argv, extra = _countbot_for_nobody()
        for path in [open_root, *open_root.rglob("*")]:
            os.chown(path, NOBODY, NOBODY, follow_symlinks=False)
        drop = {"user": NOBODY, "group": NOBODY, "extra_groups": []}
    proc = subprocess.run(
        [*argv, "ask", "show me the environment"],
        env={**cb.env, **extra},
        cwd=cb.work,
        capture_output=True,
        text=True,
        timeout=60,
        stdin=subprocess.DEVNULL,
        **drop,
    )
    assert proc.returncode == 0, proc.stderr
    first, second = server.chat_bodies()
    assert server.requests[0].headers["authorization"] == f"Bearer {KEY}"  # the key was used
    (result,) = [m for m in second["messages"] if m["role"] == "tool"]
    assert "Permission denied" in result["content"], result["content"]
    assert KEY not in result["content"] and KEY_VAR not in result["content"]


def test_the_variable_holding_the_key_is_not_passed_on(tmp_path: Path) -> None:
    """`memory edit` runs $EDITOR with countbot's own environment: the key's variable is not
    in it once the settings have read it; other variables are."""
    cb = _cb_with_key_from_env(tmp_path, "http://127.0.0.1:9/v1")
    dump = tmp_path / "editor-env.txt"
    editor = tmp_path / "editor.sh"
    editor.write_text(f'#!/bin/sh\nenv > "{dump}"\n', encoding="utf-8")
    editor.chmod(0o755)
    proc = cb.run("memory", "edit", env={"EDITOR": str(editor), "SAFE_SETTING": "kept"})
    assert proc.returncode == 0, proc.stderr
    seen = dump.read_text(encoding="utf-8")
    assert "SAFE_SETTING=kept" in seen
    assert KEY not in seen and f"{KEY_VAR}=" not in seen


def _probe(code: str) -> str:
    """What `python -c CODE` prints, in a fresh process (the undumpable probes)."""
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60)
    assert done.returncode == 0, done.stderr
    return done.stdout.strip()


def test_undumpable_leaves_this_process_its_own_proc_files() -> None:
    """What the tools rely on: the process still opens /proc/self/fd/N (a working folder
    for exec) after it made itself non-dumpable; a child it starts reads its own /proc."""
    code = (
        "import os, subprocess, sys\n"
        "from countbot_cli.keyguard import undumpable\n"
        "assert undumpable()\n"
        "fd = os.open('/tmp', os.O_RDONLY)\n"
        "assert os.path.isdir(f'/proc/self/fd/{fd}')\n"
        "out = subprocess.run(['pwd'], cwd=f'/proc/self/fd/{fd}', capture_output=True, text=True)\n"
        "assert out.stdout.strip() == '/tmp', out\n"
        "own = subprocess.run(['cat', '/proc/self/environ'], capture_output=True)\n"
        "assert own.returncode == 0 and b'PATH=' in own.stdout, own\n"
        "print('ok')\n"
    )
    assert _probe(code) == "ok"


def test_undumpable_leaves_the_process_non_dumpable() -> None:
    code = (
        "from countbot_cli.keyguard import undumpable\n"
        "assert undumpable()\n"
        "import ctypes\n"
        "print(ctypes.CDLL(None).prctl(3, 0, 0, 0, 0))\n"
    )
    assert _probe(code) == "0"
