"""Hostile YAML costs nothing: an alias bomb, a 10,000-deep collection, a self-containing alias
and an oversized file are config errors (exit 2, file and line) found in linear time, before
any value is built — while merge keys (`<<: *base`), a legitimate use of aliases, still work."""

from __future__ import annotations

import tracemalloc
from pathlib import Path

import pytest
from cbenv import make_cb
from waits import returns_within

from countbot_cli.config.file import MAX_BYTES, MAX_DEPTH, MAX_VALUES
from countbot_cli.config.settings import load_settings
from countbot_cli.errors import ConfigError


def alias_bomb(levels: int = 9, width: int = 10) -> str:
    """The "billion laughs": level n is `width` aliases of level n-1 (10**9 strings)."""
    body = ["bomb:", '  - &l0 "lol"']
    for n in range(1, levels + 1):
        refs = ", ".join(f"*l{n - 1}" for _ in range(width))
        body.append(f"  - &l{n} [{refs}]")
    return "\n".join(body) + "\n"


def deep(depth: int) -> str:
    return "tools: " + "[" * depth + "]" * depth + "\n"


def _error_line(stderr: str) -> str:
    lines = [ln for ln in stderr.splitlines() if ln.startswith("countbot: error:")]
    assert len(lines) == 1 and len(stderr.splitlines()) == 1, stderr
    return lines[0]


@pytest.mark.parametrize(
    ("text", "line", "words"),
    [
        (alias_bomb(), 7, f"aliases (*name) expand to more than {MAX_VALUES:,} values"),
        (deep(10_000), 1, f"nested deeper than {MAX_DEPTH} levels"),
    ],
    ids=["alias-bomb", "10000-deep"],
)
@pytest.mark.parametrize("command", [("config", "check"), ("ask", "hi")])
def test_hostile_yaml_is_a_config_error_not_a_hang(
    tmp_path: Path, text: str, line: int, words: str, command: tuple[str, ...]
) -> None:
    cb = make_cb(tmp_path, None)
    bad = tmp_path / "bad.yaml"
    bad.write_text(text, encoding="utf-8")
    # the hang bound: an expanded bomb never ends
    proc = cb.run(*command, env={"COUNTBOT_CONFIG": str(bad)}, timeout=30)
    assert proc.returncode == 2, proc.stderr
    err = _error_line(proc.stderr)
    assert f"{bad}:{line}" in err and words in err
    assert "Traceback" not in proc.stderr and "RecursionError" not in proc.stderr
    assert not list(tmp_path.glob("**/sessions/*.json"))


def _load_error(tmp_path: Path, text: str) -> tuple[ConfigError, int]:
    """Load `text` in-process: the error and the peak bytes allocated; a load still running
    after 30 s fails the test (a hang bound)."""
    path = tmp_path / "c.yaml"
    path.write_text(text, encoding="utf-8")

    def refused() -> ConfigError:
        with pytest.raises(ConfigError) as info:
            load_settings(config_path=path, env={"HOME": str(tmp_path)}, cwd=tmp_path)
        return info.value

    tracemalloc.start()
    try:
        err = returns_within(refused, "loading a hostile config", 30)
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    assert err.exit_code == 2 and err.file == str(path)
    return err, peak


def test_alias_bomb_is_refused_in_bounded_time_and_memory(tmp_path: Path) -> None:
    err, peak = _load_error(tmp_path, alias_bomb(levels=30))  # 10**30 when expanded
    assert err.line is not None and "expand to more than" in err.message
    assert peak < 5_000_000, peak  # memory


def test_expansion_that_only_gets_deep_is_refused(tmp_path: Path) -> None:
    # each alias nests the previous one: few values, but 200 levels once expanded
    lines = ["chain:", "  - &a0 x"] + [f"  - &a{n} [*a{n - 1}]" for n in range(1, 200)]
    err, _ = _load_error(tmp_path, "\n".join(lines) + "\n")
    assert f"nested deeper than {MAX_DEPTH} levels" in err.message


def test_an_alias_inside_itself_is_refused(tmp_path: Path) -> None:
    err, _ = _load_error(tmp_path, "persona: &p\n  ai_name: x\n  me: *p\n")
    assert "refers to a collection that contains it" in err.message and err.line == 1


@pytest.mark.parametrize("style", ["flow-mapping", "block"])
def test_deep_mappings_are_refused_at_their_line(tmp_path: Path, style: str) -> None:
    if style == "block":
        text = "".join("  " * i + f"k{i}:\n" for i in range(300)) + "  " * 300 + "v\n"
    else:
        text = "a: " + "{b: " * 10_000 + "1" + "}" * 10_000 + "\n"
    err, _ = _load_error(tmp_path, text)
    assert f"nested deeper than {MAX_DEPTH} levels" in err.message
    assert err.line == (MAX_DEPTH if style == "block" else 1)


def test_a_file_over_the_size_cap_is_refused(tmp_path: Path) -> None:
    err, _ = _load_error(tmp_path, "# padding\n" * (MAX_BYTES // 10 + 1))
    assert "too big for a config file" in err.message


def test_merge_keys_still_share_settings(tmp_path: Path) -> None:
    path = tmp_path / "c.yaml"
    path.write_text(
        "providers:\n"
        "  a: &base\n"
        "    api_base: http://127.0.0.1:9/v1\n"
        "    read_timeout: 7\n"
        "    model: m1\n"
        "  b:\n"
        "    <<: *base\n"
        "    model: m2\n"
        "default_provider: b\n",
        encoding="utf-8",
    )
    s = load_settings(config_path=path, env={"HOME": str(tmp_path)}, cwd=tmp_path)
    a, b = s.providers["a"], s.providers["b"]
    assert (b.api_base, b.read_timeout, b.model) == ("http://127.0.0.1:9/v1", 7.0, "m2")
    assert (a.read_timeout, a.model) == (7.0, "m1")
