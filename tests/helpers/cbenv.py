"""Helpers to run `countbot` as a user would: an isolated home, a config file pointing at a
loopback server, no API keys from the real environment.

`CB.run` starts the installed script as a process: for what only a process shows (signals,
start-up imports, concurrent processes, a terminal). `CB.invoke` calls the same entry point
(`countbot_cli.__main__.main`) in this process with the same environment, working folder, stdin
and captured stdout/stderr, and returns the same `CompletedProcess`: for everything else, at a
fraction of the cost.
"""

from __future__ import annotations

import io
import json
import os
import signal
import subprocess
import sys
import tempfile
import traceback
from collections.abc import Iterable, Iterator
from contextlib import ExitStack, contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import fakeserver as fs
import yaml

from countbot_cli.config.providers import ProviderConfig

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

    def ask_saved(self, *args: str) -> str:
        """`countbot ask --json ARGS` in this process (exit 0 checked); the id of the session
        it saved to."""
        proc = self.invoke("ask", "--json", *args)
        assert proc.returncode == 0, proc.stderr
        return str(json.loads(proc.stdout)["session_id"])

    def derived(self, folder: Path, name: str) -> Path:
        """Where countbot keeps the file `name` derived from `folder` (its cache folder)."""
        from countbot_cli.config.home import derived_dir

        return derived_dir(folder, self.env) / name

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

    def python(self, code: str, *args: str) -> subprocess.CompletedProcess[str]:
        """`python -c CODE ARGS` in a fresh process, in work/ with this environment (a probe
        that runs countbot's main under a watch of its own)."""
        return subprocess.run(
            [sys.executable, "-c", code, *args],
            capture_output=True,
            text=True,
            cwd=self.work,
            env=self.env,
            timeout=60,
        )

    def loaded(self, heavy: Iterable[str], *args: str) -> list[str]:
        """Which of the `heavy` modules `countbot ARGS` imports, in a fresh process (the
        start-up import guards: a command must not load what it does not use). A name is a
        top-level package (`httpx`: any of it) or one module (`countbot_cli.ui.transcript`)."""
        probe = (
            "import sys, json\n"
            "heavy = set(json.loads(sys.argv[1]))\n"
            "from countbot_cli.__main__ import main\n"
            "sys.argv = ['countbot', *sys.argv[2:]]\n"
            "try:\n    main()\nexcept SystemExit:\n    pass\n"
            "print('LOADED', json.dumps(sorted(heavy & set(sys.modules))), file=sys.stderr)\n"
        )
        proc = self.python(probe, json.dumps(sorted(heavy)), *args)
        line = [ln for ln in proc.stderr.splitlines() if ln.startswith("LOADED")]
        assert line, proc.stderr
        loaded: list[str] = json.loads(line[0].split(" ", 1)[1])
        return loaded

    def invoke(
        self, *args: str, input: str | None = None, env: dict[str, str] | None = None
    ) -> subprocess.CompletedProcess[str]:
        """`run`, in this process: `countbot_cli.__main__.main(args)` as the script calls it."""
        return invoke(list(args), {**self.env, **(env or {})}, self.work, input or "")

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

    def bash_complete(self, words: list[str]) -> tuple[list[str], str]:
        """Load `countbot completion bash` into bash, complete `words` (the last is the word
        under the cursor) the way bash calls the function, and return (COMPREPLY,
        `complete -p countbot`)."""
        line = " ".join(f"'{w}'" for w in words)
        program = (
            'eval "$(countbot completion bash)" || exit 9\n'
            f"COMP_WORDS=(countbot {line}); COMP_CWORD={len(words)}\n"
            "_countbot_complete\n"
            'printf "%s\\n" "${COMPREPLY[@]}"\n'
            "complete -p countbot\n"
        )
        env = {**self.env, "PATH": str(Path(COUNTBOT).parent) + os.pathsep + self.env["PATH"]}
        proc = subprocess.run(
            ["bash", "--norc", "--noprofile", "-c", program],
            capture_output=True,
            text=True,
            cwd=self.work,
            env=env,
            timeout=60,
        )
        assert proc.returncode == 0, proc.stderr
        *reply, spec = proc.stdout.splitlines()
        return [r for r in reply if r], spec

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
    """The environment of a user with no keys, no config and a home under `root`; the cache
    folder is the test run's (tests/conftest.py: never the user's, built once a run)."""
    home = root / "home"
    home.mkdir(parents=True, exist_ok=True)
    env = {
        "PATH": os.environ.get("PATH", "/usr/bin:/bin"),
        "HOME": str(home),
        "XDG_CONFIG_HOME": str(home / ".config"),
        "XDG_DATA_HOME": str(home / ".local" / "share"),
        "XDG_CACHE_HOME": os.environ.get("XDG_CACHE_HOME") or str(home / ".cache"),
        "LANG": "C.UTF-8",
        "LC_ALL": "C.UTF-8",
        "TERM": "xterm-256color",
    }
    for keep in ("TMPDIR", "SYSTEMROOT"):
        if keep in os.environ:
            env[keep] = os.environ[keep]
    return env


QUIET_MEMORY: dict[str, Any] = {
    "memory": {
        "overflow_summary": False,
        "session_summary": False,
        "auto_memory": False,
        "inject": "off",
    }
}  # config that makes no memory upkeep calls and injects nothing: only the chat's requests


def refused(cb: CB, server: fs.FakeServer, proc: Any, code: int) -> str:
    """One error line, the exit code, and nothing sent nor saved; returns the line."""
    assert proc.returncode == code, proc.stderr
    lines = proc.stderr.splitlines()
    assert len(lines) == 1 and lines[0].startswith("countbot: error: "), proc.stderr
    assert proc.stdout == ""
    assert server.requests == [] and cb.session_files() == []
    return str(lines[0])


def provider_settings(**fields: Any) -> ProviderConfig:
    """The resolved settings of one provider (what a provider is built from), for tests that
    build a provider directly; `fields` override an OpenAI-compatible test provider's."""
    base: dict[str, Any] = {
        "name": "test",
        "type": "openai",
        "api_base": "http://127.0.0.1:9/v1",
        "api_key": TEST_KEY,
        "api_key_source": "test",
        "model": "test-model",
        "context_window": None,
        "headers": {},
    }
    return ProviderConfig(**{**base, **fields})


def local_settings(**fields: Any) -> ProviderConfig:
    """The resolved settings of the embedded (local) provider on the bundled model with a
    2048-token window, for tests that build a LocalProvider directly; `fields` override them."""
    base: dict[str, Any] = {
        "name": "local",
        "type": "local",
        "api_base": "",
        "api_key": None,
        "model": "",
        "context_window": 2048,
    }
    return provider_settings(**{**base, **fields})


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


RECALL_WAIT = 120  # seconds: memory.recall_wait in the tests' configs


def make_cb(tmp_path: Path, base_url: str | None, **config: Any) -> CB:
    work = tmp_path / "work"
    work.mkdir(parents=True, exist_ok=True)
    cb = CB(root=tmp_path, work=work, env=clean_env(tmp_path))
    if base_url is not None:
        cfg = provider_config(base_url, **config.pop("provider", {}))
        cfg.setdefault("tools", {"enabled": False})
        # recall by meaning waits for every line's vector (a hang bound), so that what a test
        # sees does not depend on how busy the machine is; a test of the short wait sets it.
        # No encoder process outlives its countbot (tests of that set recall_keep)
        memory = {"recall_wait": RECALL_WAIT, "recall_keep": 0, **config.get("memory", {})}
        config["memory"] = memory
        cfg.update(config)
        cb.write_config(cfg)
    return cb


def invoke(
    args: list[str], env: dict[str, str], cwd: Path, stdin: str
) -> subprocess.CompletedProcess[str]:
    """Run countbot's entry point in this process as `subprocess.run([COUNTBOT, *args],
    input=stdin, capture_output=True, text=True, cwd=cwd, env=env)` would run the script.

    os.environ is replaced by `env` and the working folder by `cwd` for the call; stdin, stdout
    and stderr are real files (not terminals), with the error handlers Python gives them in a
    UTF-8 locale; the exit code is taken from SystemExit, and an uncaught exception prints its
    traceback and exits 1 as the interpreter would. Signal handlers the CLI installs are put back.
    """
    from countbot_cli.__main__ import main
    from countbot_cli.config import settings

    settings._NOTIFIED.clear()  # a new process has given no "once per process" notice yet
    with _process_state(env, cwd), _std_streams(stdin) as (out, err):
        try:
            main(list(args))
            code = 0
        except SystemExit as exc:
            code = _exit_code(exc)
        except Exception:  # the interpreter's last resort: traceback on stderr, exit 1
            traceback.print_exc()
            code = 1
    return subprocess.CompletedProcess([COUNTBOT, *args], code, _text(out), _text(err))


def _exit_code(exc: SystemExit) -> int:
    if exc.code is None:
        return 0
    if isinstance(exc.code, int):
        return exc.code
    sys.stderr.write(f"{exc.code}\n")
    return 1


def _text(data: bytearray) -> str:
    """Decoded as subprocess's text mode decodes a child's output (universal newlines)."""
    return data.decode("utf-8").replace("\r\n", "\n").replace("\r", "\n")


@contextmanager
def _process_state(env: dict[str, str], cwd: Path) -> Iterator[None]:
    saved_env, saved_cwd = dict(os.environ), os.getcwd()
    handlers = {s: signal.getsignal(s) for s in (signal.SIGINT, signal.SIGTERM, signal.SIGHUP)}
    os.environ.clear()
    os.environ.update(env)
    os.chdir(cwd)
    try:
        yield
    finally:
        os.chdir(saved_cwd)
        os.environ.clear()
        os.environ.update(saved_env)
        for sig, handler in handlers.items():
            signal.signal(sig, handler)


@contextmanager
def _std_streams(stdin: str) -> Iterator[tuple[bytearray, bytearray]]:
    """sys.stdin/stdout/stderr on temporary files; yields (stdout, stderr) buffers that are
    filled when the block ends (read them after it)."""
    saved = sys.stdin, sys.stdout, sys.stderr
    captured = (bytearray(), bytearray())
    with ExitStack() as files:
        fin, fout, ferr = (files.enter_context(tempfile.TemporaryFile()) for _ in range(3))
        fin.write(stdin.encode("utf-8"))
        fin.seek(0)
        sys.stdin = io.TextIOWrapper(fin, encoding="utf-8", errors="surrogateescape")
        sys.stdout = io.TextIOWrapper(fout, encoding="utf-8", errors="surrogateescape")
        sys.stderr = io.TextIOWrapper(ferr, encoding="utf-8", errors="backslashreplace")
        streams = sys.stdin, sys.stdout, sys.stderr
        try:
            yield captured
        finally:
            for stream in streams:
                try:
                    stream.flush()
                    stream.detach()  # the temporary file is closed by the ExitStack
                except (OSError, ValueError):
                    pass
            sys.stdin, sys.stdout, sys.stderr = saved
            for f, buf in ((fout, captured[0]), (ferr, captured[1])):
                f.seek(0)
                buf.extend(f.read())
