"""`config init|show|path|check` and `models`, against a tiny fake provider."""

from __future__ import annotations

import io
import json
import re
import stat
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import pytest
import yaml
from local_extra import needs_local

from countbot_cli.commands import config as cmd_config
from countbot_cli.commands import config_check
from countbot_cli.config import trust
from countbot_cli.config.example import EXAMPLE_CONFIG
from countbot_cli.config.home import default_home
from countbot_cli.config.settings import ProviderConfig, Settings, load_settings
from countbot_cli.errors import (
    EXIT_AUTH,
    EXIT_NETWORK,
    EXIT_OK,
    EXIT_PROVIDER,
    EXIT_USAGE,
    AuthError,
    ConnectError,
    CountbotError,
    ModelNotFoundError,
    QuotaExceededError,
    ServerError,
    UsageError,
)
from countbot_cli.messages import ChatRequest, Finished

SECRET = "sk-test-SECRET-0123456789abcdefWXYZ"
HEADER_TOKEN = "tok-HEADER-abcdefghijklmnop9876"


@pytest.fixture
def box(tmp_path: Path) -> SimpleNamespace:
    home, work = tmp_path / "home", tmp_path / "work"
    home.mkdir()
    work.mkdir()
    return SimpleNamespace(tmp=tmp_path, home=home, work=work, env={"HOME": str(home)})


def settings(box: SimpleNamespace, text: str | None, **kw: Any) -> Settings:
    """Write `text` to ./config.yaml, trust it (as `countbot config trust` does) and load."""
    kw.setdefault("env", box.env)
    if text is not None:
        path = box.work / "config.yaml"
        path.write_text(text, encoding="utf-8")
        trust.trust(path, path.read_bytes(), default_home(kw["env"]))
    return load_settings(cwd=box.work, find_local_model=lambda: None, **kw)


SERVER = "providers:\n  ollama:\n    model: llama3.2\n"
DEEPSEEK = "providers:\n  deepseek:\n"


class FakeProvider:
    """What config check and models need: list_models() and complete(req)."""

    def __init__(
        self,
        models: list[Any] | None = None,
        list_error: BaseException | None = None,
        reply_error: BaseException | None = None,
    ) -> None:
        self.models = ["llama3.2", "qwen2.5"] if models is None else models
        self.list_error = list_error
        self.reply_error = reply_error
        self.requests: list[ChatRequest] = []

    def list_models(self) -> list[Any]:
        if self.list_error:
            raise self.list_error
        return self.models

    def complete(self, req: ChatRequest) -> Finished:
        self.requests.append(req)
        if self.reply_error:
            raise self.reply_error
        return Finished(content="OK", tool_calls=[], finish_reason="length")


def check(s: Settings, fake: FakeProvider) -> tuple[int, str]:
    out = io.StringIO()
    seen: list[ProviderConfig] = []

    def factory(cfg: ProviderConfig) -> FakeProvider:
        seen.append(cfg)
        return fake

    code = config_check.config_check(s, factory, out)
    assert seen in ([], [s.provider])
    return code, out.getvalue()


# ---- config init ----


def test_init_writes_private_starter(box: SimpleNamespace) -> None:
    out = io.StringIO()
    target = box.tmp / "new" / "config.yaml"
    assert cmd_config.config_init(target, force=False, out=out) == EXIT_OK
    assert target.read_text(encoding="utf-8") == EXAMPLE_CONFIG
    assert stat.S_IMODE(target.stat().st_mode) == 0o600
    assert str(target) in out.getvalue() and "countbot config check" in out.getvalue()
    assert not list(target.parent.glob(".*tmp"))


def test_init_default_path_is_the_user_config(box: SimpleNamespace) -> None:
    env = {**box.env, "XDG_CONFIG_HOME": str(box.tmp / "xdg")}
    cmd_config.config_init(None, force=False, out=io.StringIO(), env=env)
    assert (box.tmp / "xdg" / "countbot" / "config.yaml").read_text() == EXAMPLE_CONFIG


def test_init_in_the_current_folder_says_it_needs_trust(
    box: SimpleNamespace, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.chdir(box.work)
    out = io.StringIO()
    cmd_config.config_init(Path("config.yaml"), force=False, out=out, env=box.env)
    assert "once you trust it" in out.getvalue() and "countbot config trust" in out.getvalue()
    assert settings(box, None, require_provider=False).ignored_config == box.work / "config.yaml"


def test_init_refuses_to_overwrite(box: SimpleNamespace) -> None:
    target = box.work / "config.yaml"
    target.write_text("mine: true\n")
    with pytest.raises(UsageError) as info:
        cmd_config.config_init(target, force=False, out=io.StringIO())
    assert info.value.exit_code == EXIT_USAGE and "--force" in info.value.user_message()
    assert target.read_text() == "mine: true\n"


def test_init_force_keeps_a_backup(box: SimpleNamespace) -> None:
    target = box.work / "config.yaml"
    target.write_text("mine: true\n")
    out = io.StringIO()
    assert cmd_config.config_init(target, force=True, out=out) == EXIT_OK
    assert target.read_text() == EXAMPLE_CONFIG
    assert (box.work / "config.yaml.bak").read_text() == "mine: true\n"
    assert "config.yaml.bak" in out.getvalue()


def uncomment_openai(text: str) -> str:
    """The starter file with `providers:` and its openai entry uncommented, as its comment
    says: the first `# ` of each line removed."""
    lines = text.splitlines()
    start = lines.index("# providers:")
    end = next(i for i in range(start, len(lines)) if lines[i].startswith("#   # deepseek:"))
    for i in range(start, end):
        lines[i] = lines[i][2:] if lines[i].startswith("# ") else lines[i].lstrip("#")
    return "\n".join(lines) + "\n"


def test_init_written_file_loads(box: SimpleNamespace) -> None:
    target = box.work / "config.yaml"
    cmd_config.config_init(target, force=False, out=io.StringIO())
    s = settings(box, None, env={**box.env, "OPENAI_API_KEY": SECRET}, config_path=target)
    assert (s.provider.type, s.provider.model) == ("openai", "gpt-4o-mini")
    target.write_text(uncomment_openai(target.read_text()))
    s = settings(box, None, env={**box.env, "OPENAI_API_KEY": SECRET}, config_path=target)
    assert (s.provider.name, s.provider.model) == ("openai", "gpt-4o-mini")
    assert s.provider.api_key == SECRET and s.provider.api_key_source == "env OPENAI_API_KEY"


@needs_local
def test_config_init_leaves_the_embedded_model_reachable(tmp_path: Path) -> None:
    """Issue 18: after `config init` every command exited 2 until a key was set. Now the
    starter file asks the embedded model; once openai is chosen without a key, the error
    says `-p local`, which answers."""
    from cbenv import make_cb

    cb = make_cb(tmp_path, None)
    proc = cb.run("config", "init")
    assert proc.returncode == 0, proc.stderr
    ask = ("ask", "--no-tools", "-o", "max_tokens", "8", "Say hello.")
    proc = cb.run(*ask, timeout=120)
    assert proc.returncode == 0 and proc.stdout.strip(), proc.stderr
    assert "embedded local model" in proc.stderr and "smoke test" in proc.stderr
    assert "`countbot models pull qwen3-1.7b` fetches a capable one" in proc.stderr
    written = cb.user_home / "config.yaml"
    written.write_text(uncomment_openai(written.read_text()))
    proc = cb.run(*ask)
    assert proc.returncode == EXIT_USAGE and "OPENAI_API_KEY" in proc.stderr
    assert "countbot -p local" in proc.stderr
    proc = cb.run("-p", "local", *ask[1:], timeout=120)  # the hint as typed (a bare prompt)
    assert proc.returncode == 0 and proc.stdout.strip(), proc.stderr


# ---- config show ----


def test_show_masks_every_secret(box: SimpleNamespace) -> None:
    text = (
        f"providers:\n  gw:\n    api_base: http://gw/v1\n    model: m\n    api_key: {SECRET}\n"
        f"    headers:\n      X-Api-Token: {HEADER_TOKEN}\n      X-Team: blue\n"
        "  deepseek:\n"
    )
    s = settings(box, text, env={**box.env, "DEEPSEEK_API_KEY": SECRET[::-1]})
    out = io.StringIO()
    assert cmd_config.config_show(s, out, box.env) == EXIT_OK
    shown = out.getvalue()
    for secret in (SECRET, HEADER_TOKEN, SECRET[::-1]):
        assert secret not in shown and secret[6:-4] not in shown
    data = yaml.safe_load(shown)
    gw = data["providers"]["gw"]
    assert gw["api_key"] == "sk-…WXYZ" and gw["api_key_source"] == "config file"
    assert gw["headers"] == {"X-Api-Token": "tok…9876", "X-Team": "blue"}
    assert data["provider"] == "gw"
    assert data["providers"]["deepseek"]["api_key_source"] == "env DEEPSEEK_API_KEY"
    assert data["memory"]["file"] == str(box.work / "MEMORY.md")
    assert data["temperature"] is None and data["max_iterations"] == 10


def test_show_without_provider(box: SimpleNamespace) -> None:
    s = settings(box, None, require_provider=False)
    out = io.StringIO()
    cmd_config.config_show(s, out, box.env)
    assert "no provider is configured" in out.getvalue()
    assert yaml.safe_load(out.getvalue())["provider"] is None


# ---- config path ----


def test_path_prints_every_path(box: SimpleNamespace) -> None:
    s = settings(box, SERVER)
    out = io.StringIO()
    assert cmd_config.config_path(s, out, box.env) == EXIT_OK
    got = dict(re.split(r"\s{2,}", line, maxsplit=1) for line in out.getvalue().splitlines())
    assert got["config file"] == str(box.work / "config.yaml")
    assert got["home"] == str(box.work)
    assert got["sessions"] == str(box.work / "sessions")
    assert got["memory file"] == str(box.work / "MEMORY.md")
    assert got["data dir"] == str(box.work)
    assert got["workspace"] == str(box.work)


def test_path_without_file(box: SimpleNamespace) -> None:
    out = io.StringIO()
    cmd_config.config_path(settings(box, None, require_provider=False), out, box.env)
    text = out.getvalue()
    assert "(none)" in text and str(box.home / ".config" / "countbot" / "sessions") in text


# ---- config check ----


def test_check_passes(box: SimpleNamespace) -> None:
    fake = FakeProvider()
    code, text = check(settings(box, SERVER), fake)
    assert code == EXIT_OK, text
    assert "all checks passed" in text and "2 available" in text
    [req] = fake.requests
    assert (req.model, req.max_tokens, req.stream) == ("llama3.2", 1, False)
    assert req.messages and req.messages[0]["role"] == "user"


def test_check_connection_refused(box: SimpleNamespace) -> None:
    fake = FakeProvider(list_error=ConnectError("connection refused"))
    code, text = check(settings(box, SERVER), fake)
    assert code == EXIT_NETWORK == 6
    assert "is the server running at http://localhost:11434/v1?" in text
    assert "ollama serve" in text and "FAIL" in text
    assert not fake.requests  # no point in a completion


def test_check_auth_names_the_variable(box: SimpleNamespace) -> None:
    env = {**box.env, "DEEPSEEK_API_KEY": SECRET}
    fake = FakeProvider(list_error=AuthError("invalid api key", status=401))
    code, text = check(settings(box, DEEPSEEK, env=env), fake)
    assert code == EXIT_AUTH == 4
    assert "DEEPSEEK_API_KEY" in text and SECRET not in text and "sk-…WXYZ" in text


def test_check_auth_without_a_key_and_with_a_literal_key(box: SimpleNamespace) -> None:
    s = settings(box, SERVER)
    code, text = check(s, FakeProvider(reply_error=AuthError("401", status=401)))
    assert code == EXIT_AUTH and "no API key was sent: export COUNTBOT_API_KEY=" in text
    s = settings(box, SERVER + f"    api_key: {SECRET}\n")
    code, text = check(s, FakeProvider(reply_error=AuthError("401", status=401)))
    assert "fix providers.ollama.api_key" in text and SECRET not in text


def test_check_model_not_found_lists_models(box: SimpleNamespace) -> None:
    fake = FakeProvider(
        models=["llama3.1", "qwen2.5"], reply_error=ModelNotFoundError("no such model", status=404)
    )
    code, text = check(settings(box, SERVER), fake)
    assert code == EXIT_PROVIDER == 3
    assert "llama3.1" in text and "qwen2.5" in text and "did you mean 'llama3.1'?" in text
    assert "warn" in text  # the list already showed the model missing


def test_check_without_models_endpoint_still_tries_a_reply(box: SimpleNamespace) -> None:
    fake = FakeProvider(list_error=ServerError("404 not found", status=404))
    code, text = check(settings(box, SERVER), fake)
    assert code == EXIT_OK and "could not list models" in text and fake.requests


def test_check_quota(box: SimpleNamespace) -> None:
    fake = FakeProvider(reply_error=QuotaExceededError("insufficient_quota", status=429))
    code, text = check(settings(box, SERVER), fake)
    assert code == 5 and "top it up" in text


def test_check_missing_model_lists_the_server_models(box: SimpleNamespace) -> None:
    s = settings(box, "providers:\n  ollama:\n", require_model=False)
    fake = FakeProvider()
    code, text = check(s, fake)
    assert code == EXIT_USAGE and "no model chosen" in text and "llama3.2, qwen2.5" in text
    assert not fake.requests


def test_check_factory_failure(box: SimpleNamespace) -> None:
    def factory(cfg: ProviderConfig) -> FakeProvider:
        raise CountbotError("llama_cpp is not installed", hint="pip install 'countbot-cli[local]'")

    out = io.StringIO()
    code = config_check.config_check(settings(box, SERVER), factory, out)
    assert code == 1 and "countbot-cli[local]" in out.getvalue()


def test_check_without_provider(box: SimpleNamespace) -> None:
    code, text = check(settings(box, None, require_provider=False), FakeProvider())
    assert code == EXIT_USAGE and "countbot config init" in text


def test_check_warns_about_a_readable_literal_key(box: SimpleNamespace) -> None:
    text = f"providers:\n  ollama:\n    model: llama3.2\n    api_key: {SECRET}\n"
    s = settings(box, text)
    (box.work / "config.yaml").chmod(0o644)
    code, out = check(s, FakeProvider())
    assert code == EXIT_OK and "chmod 600" in out and SECRET not in out
    (box.work / "config.yaml").chmod(0o600)
    assert "chmod 600" not in check(s, FakeProvider())[1]


# ---- models ----


def test_models_plain(box: SimpleNamespace) -> None:
    out = io.StringIO()
    fake = FakeProvider(models=["llama3.2", {"id": "qwen2.5"}, SimpleNamespace(id="phi4")])
    assert config_check.models(settings(box, SERVER), lambda c: fake, out) == EXIT_OK
    assert out.getvalue() == "llama3.2\nqwen2.5\nphi4\n"


def test_models_marks_current_on_a_terminal(box: SimpleNamespace) -> None:
    class Tty(io.StringIO):
        def isatty(self) -> bool:
            return True

    out = Tty()
    config_check.models(settings(box, SERVER), lambda c: FakeProvider(), out)
    assert out.getvalue() == "* llama3.2\n  qwen2.5\n"


def test_models_json(box: SimpleNamespace) -> None:
    out = io.StringIO()
    config_check.models(settings(box, SERVER), lambda c: FakeProvider(), out, json_out=True)
    assert json.loads(out.getvalue()) == {
        "provider": "ollama",
        "api_base": "http://localhost:11434/v1",
        "model": "llama3.2",
        "models": ["llama3.2", "qwen2.5"],
    }


def test_models_error_gets_a_diagnosis(box: SimpleNamespace) -> None:
    fake = FakeProvider(list_error=ConnectError("connection refused"))
    with pytest.raises(ConnectError) as info:
        config_check.models(settings(box, SERVER), lambda c: fake, io.StringIO())
    assert info.value.exit_code == EXIT_NETWORK
    assert "is the server running at http://localhost:11434/v1?" in info.value.user_message()
