"""Per-call options: `-o KEY VALUE` on `ask`, the bare prompt and the chat reach the request
body; a bad value is a usage error naming the key."""

from __future__ import annotations

from pathlib import Path

import fakeserver as fs
import pytest
from cbenv import make_cb

from countbot_cli.cli.routing import join_option_pairs


def test_options_reach_the_request_typed(tmp_path: Path, server: fs.FakeServer) -> None:
    cb = make_cb(tmp_path, server.base_url, temperature=1.0)
    server.default = fs.text("ok")
    proc = cb.invoke(
        "ask", "-o", "temperature", "0.2", "-o", "top_p", "0.9", "-o", "seed", "42",
        "-o", "reasoning_effort", "low", "-o", "max_tokens", "64",
        "-o", "logit_bias", '{"50256": -100}', "-o", "user", "me", "-o", "parallel_tool_calls",
        "false", "hello",
    )  # fmt: skip
    assert (proc.returncode, proc.stdout) == (0, "ok\n"), proc.stderr
    body = server.chat_bodies()[-1]
    assert body["messages"][-1]["content"] == "hello"
    assert {k: body[k] for k in ("temperature", "top_p", "seed", "max_tokens")} == {
        "temperature": 0.2,
        "top_p": 0.9,
        "seed": 42,
        "max_tokens": 64,
    }
    assert body["reasoning_effort"] == "low"
    assert body["logit_bias"] == {"50256": -100}  # JSON when the text is JSON
    assert body["user"] == "me"  # else the text
    assert body["parallel_tool_calls"] is False
    assert body["stream"] is True and body["model"] == "test-model"
    # without -o the config file's temperature is used and nothing else is added
    assert cb.invoke("ask", "plain").returncode == 0
    plain = server.chat_bodies()[-1]
    assert plain["temperature"] == 1.0 and "seed" not in plain and "top_p" not in plain
    # the bare prompt takes them too, and KEY=VALUE is the same as KEY VALUE
    assert cb.invoke("-o", "seed", "5", "-o", "top_p=0.5", "bare", "words").returncode == 0
    bare = server.chat_bodies()[-1]
    assert (bare["seed"], bare["top_p"], bare["messages"][-1]["content"]) == (5, 0.5, "bare words")


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["-o", "temperature", "hot"], "-o temperature takes a number from 0 to 2, not 'hot'"),
        (["-o", "temperature", "3"], "-o temperature takes a number from 0 to 2, not 3.0"),
        (["-o", "top_p", "nan"], "-o top_p takes a number from 0 to 1"),
        (["-o", "max_tokens", "0"], "-o max_tokens takes a whole number of at least 1, not 0"),
        (["-o", "seed", "1.5"], "-o seed takes a whole number, not '1.5'"),
        (["-o", "reasoning_effort", "max"], "-o reasoning_effort takes one of minimal, low"),
        (["-o", "model", "x"], "-o model is set by countbot itself"),
        (["-o", "stream", "false"], "-o stream is set by countbot itself"),
        (["-o", "a b", "1"], "-o 'a b' is not an option name"),
        (["-o", "seed"], "-o seed: needs a value"),
    ],
)
def test_a_bad_option_is_a_usage_error_naming_the_key(
    tmp_path: Path, server: fs.FakeServer, args: list[str], message: str
) -> None:
    cb = make_cb(tmp_path, server.base_url)
    proc = cb.invoke("ask", "question", *args)
    assert proc.returncode == 2, proc.stderr
    assert message in proc.stderr
    assert server.chat_bodies() == []
    assert cb.session_files() == []


def test_only_the_per_call_option_is_joined() -> None:
    # `sessions export -o FILE` keeps its own -o; after --, words are prompt text
    assert join_option_pairs(["sessions", "export", "abc", "-o", "out.md", "x"]) == [
        "sessions", "export", "abc", "-o", "out.md", "x",
    ]  # fmt: skip
    assert join_option_pairs(["ask", "-o", "seed", "1", "--", "-o", "a", "b"]) == [
        "ask", "-o", "seed=1", "--", "-o", "a", "b",
    ]  # fmt: skip
    assert join_option_pairs(["-m", "sessions", "-o", "seed", "1"]) == [
        "-m", "sessions", "-o", "seed=1",
    ]  # fmt: skip
    assert join_option_pairs(["ask", "what", "is", "config", "-o", "seed", "2"])[-1] == "seed=2"
