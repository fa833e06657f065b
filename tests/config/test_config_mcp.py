"""The `mcp:` section: what a user writes, what countbot makes of it, and the one-line errors
(file, line, key) for what it cannot use."""

from __future__ import annotations

from pathlib import Path

import pytest

from countbot_cli.config.settings import load_settings
from countbot_cli.errors import ConfigError


def _load(tmp_path: Path, text: str):  # type: ignore[no-untyped-def]
    home = tmp_path / "home"
    home.mkdir(exist_ok=True)
    file = tmp_path / "cfg.yaml"
    file.write_text(text, encoding="utf-8")
    return load_settings(
        config_path=str(file),
        env={"HOME": str(home)},
        cwd=tmp_path,
        require_provider=False,
        find_local_model=lambda: None,
    )


def test_stdio_and_http_servers_are_read_with_their_defaults(tmp_path: Path) -> None:
    s = _load(
        tmp_path,
        "mcp:\n"
        "  servers:\n"
        "    time:\n"
        "      command: uvx\n"
        "      args: [mcp-server-time, --local-timezone, UTC]\n"
        "      env: {TZ: UTC}\n"
        "      cwd: tools\n"
        "      allow: [get_current_time]\n"
        "      timeout: 5\n"
        "    docs:\n"
        "      url: https://mcp.example.com/mcp\n"
        "      headers: {Authorization: Bearer sk-secret-value-123456}\n",
    )
    time, docs = s.mcp.servers
    assert (time.name, time.transport, time.command) == ("time", "stdio", "uvx")
    assert time.args == ("mcp-server-time", "--local-timezone", "UTC")
    assert dict(time.env) == {"TZ": "UTC"} and time.cwd == tmp_path / "tools"
    assert time.allow == ("get_current_time",) and time.timeout == 5.0
    assert (docs.transport, docs.url, docs.timeout, docs.allow) == (
        "http",
        "https://mcp.example.com/mcp",
        60.0,
        (),
    )
    assert docs.masked_headers() == {"Authorization": "Bea…3456"}
    assert "sk-secret" not in repr(docs)


def test_no_mcp_section_means_no_servers(tmp_path: Path) -> None:
    assert _load(tmp_path, "tools:\n  enabled: true\n").mcp.servers == ()


@pytest.mark.parametrize(
    ("text", "line", "key", "words"),
    [
        (
            "mcp:\n  servers:\n    time:\n      comand: uvx\n",
            4,
            "mcp.servers.time.comand",
            "did you mean 'command'?",
        ),
        ("mcp:\n  server: {}\n", 2, "mcp.server", "did you mean 'servers'?"),
        (
            "mcp:\n  servers:\n    t:\n      command: a\n      url: http://x/mcp\n",
            5,
            "mcp.servers.t.url",
            "either `command` (stdio) or `url` (HTTP), not both",
        ),
        ("mcp:\n  servers:\n    t:\n      allow: [x]\n", 3, "mcp.servers.t", "needs `command`"),
        (
            "mcp:\n  servers:\n    a__b:\n      command: x\n",
            3,
            "mcp.servers.a__b",
            "not a usable server name",
        ),
        (
            "mcp:\n  servers:\n    t:\n      url: ftp://x\n",
            4,
            "mcp.servers.t.url",
            "not an http:// or https:// URL",
        ),
        (
            "mcp:\n  servers:\n    t:\n      url: http://x/mcp\n      args: [a]\n",
            5,
            "mcp.servers.t.args",
            "does not apply to an HTTP",
        ),
        (
            "mcp:\n  servers:\n    t:\n      command: x\n      timeout: -1\n",
            5,
            "mcp.servers.t.timeout",
            "must be at least 0.1",
        ),
        (
            "mcp:\n  servers:\n    t:\n      command: x\n      args: [1, 2]\n",
            5,
            "mcp.servers.t.args[0]",
            "expected text",
        ),
    ],
)
def test_mistakes_name_the_file_line_and_key(
    tmp_path: Path, text: str, line: int, key: str, words: str
) -> None:
    with pytest.raises(ConfigError) as info:
        _load(tmp_path, text)
    message = info.value.user_message()
    assert f"cfg.yaml:{line}" in message, message
    assert key in message and words in message, message
    assert info.value.exit_code == 2
