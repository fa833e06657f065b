"""The config files' parsed form kept between runs (config/parsed_cache.py, issue 25 point 2):
a start whose config did not change imports no YAML parser and gets the same settings; an
edited, damaged or uncacheable config is parsed as before, errors with their lines included."""

from __future__ import annotations

import json
from pathlib import Path

import fakeserver as fs
from cbenv import make_cb

from countbot_cli.config import parsed_cache
from countbot_cli.config.file import parse_yaml
from countbot_cli.config.home import default_home
from countbot_cli.config.settings import load_settings

CONFIG = """\
default_provider: mine
providers:
  mine:
    type: openai
    api_base: http://127.0.0.1:9/v1
    api_key: sk-test
    model: first-model  # a comment
    headers: {X-One: "1", X-Two: two}
tools:
  enabled: false
  max_output_chars: 1234
memory:
  auto_memory: false
"""


def _env(tmp_path: Path) -> dict[str, str]:
    home = tmp_path / "home"
    return {"HOME": str(home), "XDG_CONFIG_HOME": str(home / ".config")}


def _user_config(env: dict[str, str], text: str) -> Path:
    path = default_home(env) / "config.yaml"
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text, encoding="utf-8")
    return path


def test_a_second_plain_ask_reads_the_config_without_yaml(
    tmp_path: Path, server: fs.FakeServer
) -> None:
    cb = make_cb(tmp_path, server.base_url)
    server.default = fs.text("ok")
    heavy = {"yaml", "httpx"}
    assert cb.loaded(heavy, "ask", "--plain", "--no-save", "hi") == ["httpx", "yaml"]
    assert cb.loaded(heavy, "ask", "--plain", "--no-save", "hi") == ["httpx"]
    chats = [r.json for r in server.requests if r.path.endswith("/chat/completions")]
    assert len(chats) == 2 and chats[0]["model"] == chats[1]["model"] == "test-model"


def test_the_cached_tree_gives_the_same_settings(tmp_path: Path) -> None:
    env = _env(tmp_path)
    _user_config(env, CONFIG)
    cache = parsed_cache.cache_path(default_home(env))
    first = load_settings(env=env, cwd=tmp_path)
    assert cache.is_file()
    stored = cache.read_bytes()
    again = load_settings(env=env, cwd=tmp_path)
    assert cache.read_bytes() == stored  # read, not written again
    assert again == first
    assert (again.provider.model, again.tools.max_output_chars) == ("first-model", 1234)
    assert dict(again.provider.headers) == {"X-One": "1", "X-Two": "two"}
    assert cache in first.own_files.paths  # the tools ask before touching it


def test_an_edited_config_is_parsed_again(tmp_path: Path) -> None:
    env = _env(tmp_path)
    path = _user_config(env, CONFIG)
    assert load_settings(env=env, cwd=tmp_path).provider.model == "first-model"
    path.write_text(CONFIG.replace("first-model", "second-model"), encoding="utf-8")
    assert load_settings(env=env, cwd=tmp_path).provider.model == "second-model"
    path.write_text(CONFIG.replace("max_output_chars: 1234", "max_output_chars: many"))
    try:
        load_settings(env=env, cwd=tmp_path)
    except Exception as exc:  # the error names the file's line, as without the cache
        assert "config.yaml:11" in str(exc) and "max_output_chars" in str(exc)
    else:
        raise AssertionError("a bad value was accepted")


def test_a_damaged_cache_is_parsed_around_and_replaced(tmp_path: Path) -> None:
    env = _env(tmp_path)
    _user_config(env, CONFIG)
    cache = parsed_cache.cache_path(default_home(env))
    first = load_settings(env=env, cwd=tmp_path)
    entries = json.loads(cache.read_text())["entries"]
    key = next(iter(entries))
    for damage in ("{not json", json.dumps({"format": parsed_cache.FORMAT, "entries": {key: 7}})):
        cache.write_text(damage)
        assert load_settings(env=env, cwd=tmp_path) == first
        assert json.loads(cache.read_text())["entries"] == entries


def test_trees_json_cannot_carry_are_not_kept(tmp_path: Path) -> None:
    cache = tmp_path / "parsed-config.json"
    parse = parsed_cache.cached_parser(cache)
    text = "when: 2026-12-01\nlist: [1, 2.5, true, null, text]\n"
    assert parse(text, "c.yaml") == parse_yaml(text, "c.yaml")
    assert not cache.exists()  # the date
    text = "list: [1, 2.5, true, null, text]\nmap: {a: {b: [x]}}\n"
    assert parse(text, "c.yaml") == parse_yaml(text, "c.yaml")
    assert parse(text, "c.yaml") == parse_yaml(text, "c.yaml")  # from the cache
    assert cache.exists()


def test_only_the_last_few_texts_are_kept(tmp_path: Path) -> None:
    cache = tmp_path / "parsed-config.json"
    parse = parsed_cache.cached_parser(cache)
    for i in range(parsed_cache.MAX_ENTRIES + 3):
        parse(f"n: {i}\n", "c.yaml")
    assert len(json.loads(cache.read_text())["entries"]) == parsed_cache.MAX_ENTRIES
