"""Any exception during a turn saves the user's message (marked failed) and ends `ask` with a
one-line message and a documented exit code, never a traceback. In-process, through
commands.ask.run_ask with a provider whose stream breaks in an unexpected way."""

from __future__ import annotations

import io
import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import fakeserver as fs
import pytest
import yaml
from cbenv import make_cb, provider_config

from countbot_cli import app
from countbot_cli.commands.ask import AskOptions, run_ask
from countbot_cli.errors import EXIT_ERROR, UnexpectedError
from countbot_cli.messages import ChatRequest, Finished, StreamEvent, TextDelta


class BreakingProvider:
    """Streams some text, then raises `exc` as a bug deep in a provider would."""

    name = "test"
    model = "test-model"
    supports_tools = True
    context_window = None
    last_stats = None

    def __init__(self, exc: BaseException) -> None:
        self.exc = exc
        self.closed = False

    def stream(self, req: ChatRequest) -> Iterator[StreamEvent]:
        yield TextDelta("Half of an ")
        yield TextDelta("answer")
        raise self.exc

    def complete(self, req: ChatRequest) -> Finished:
        raise self.exc

    def list_models(self) -> list[str]:
        return []

    def close(self) -> None:
        self.closed = True


def _recurse(n: int) -> int:
    return _recurse(n + 1) + 1


def _recursion_error() -> RecursionError:
    try:
        _recurse(0)
    except RecursionError as e:
        return e
    raise AssertionError("not reached")


@pytest.fixture
def config(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    monkeypatch.setenv("HOME", str(tmp_path / "home"))
    monkeypatch.setenv("XDG_CONFIG_HOME", str(tmp_path / "home" / ".config"))
    monkeypatch.setenv("XDG_DATA_HOME", str(tmp_path / "home" / ".local" / "share"))
    monkeypatch.delenv("COUNTBOT_DEBUG", raising=False)
    cfg = provider_config("http://127.0.0.1:9/v1")
    cfg["tools"] = {"enabled": False}
    cfg["sessions_dir"] = str(tmp_path / "sessions")
    cfg["memory"] = {"file": str(tmp_path / "MEMORY.md"), "auto_memory": False}
    path = tmp_path / "config.yaml"
    path.write_text(yaml.safe_dump(cfg), encoding="utf-8")
    return path


def _ask(config: Path, provider: BreakingProvider, monkeypatch: pytest.MonkeyPatch, *flags: str):
    monkeypatch.setattr(app, "make_provider", lambda settings, err=None: provider)
    out, err = io.StringIO(), io.StringIO()
    opts = AskOptions(prompt=["what", "now?"], config=str(config), no_stream="--no-stream" in flags)
    code = run_ask(opts, stdin=io.StringIO(""), out=out, err=err)
    return code, out.getvalue(), err.getvalue()


def _only_session(config: Path) -> dict[str, Any]:
    (path,) = [p for p in (config.parent / "sessions").glob("*.json") if p.name != "index.json"]
    data: dict[str, Any] = json.loads(path.read_text("utf-8"))
    return data


@pytest.mark.parametrize(
    ("exc", "shown"),
    [
        (_recursion_error(), "RecursionError: maximum recursion depth exceeded"),
        (KeyError("choices"), "KeyError: 'choices'"),
        (ValueError("bad\nvalue\x1b]0;title\x07"), "ValueError: bad value"),
    ],
    ids=["RecursionError", "KeyError", "ValueError"],
)
def test_an_exception_mid_stream_saves_the_turn_marked_failed(
    config: Path, monkeypatch: pytest.MonkeyPatch, exc: BaseException, shown: str
) -> None:
    provider = BreakingProvider(exc)
    code, out, err = _ask(config, provider, monkeypatch)
    assert code == EXIT_ERROR == UnexpectedError.exit_code
    assert out == "Half of an answer\n"
    (line,) = err.splitlines()  # one line, no traceback
    assert line.startswith(f"countbot: error: unexpected error: {shown}")
    assert line.endswith("(set COUNTBOT_DEBUG=1 to see the traceback, and please report it)")
    assert "\x1b" not in line and "\x07" not in line
    assert provider.closed
    messages = _only_session(config)["messages"]
    assert [(m["role"], m["content"], m["status"]) for m in messages] == [
        ("user", "what now?", "failed"),
        ("assistant", "Half of an answer", "failed"),
    ]


def test_an_exception_without_any_text_saves_the_user_message(
    config: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    code, out, err = _ask(config, BreakingProvider(KeyError("x")), monkeypatch, "--no-stream")
    assert code == 1 and out == ""
    assert err.startswith("countbot: error: unexpected error: KeyError: 'x'")
    messages = _only_session(config)["messages"]
    assert [(m["role"], m["status"]) for m in messages] == [("user", "failed")]


def test_debug_shows_the_traceback_after_saving(
    config: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("COUNTBOT_DEBUG", "1")
    code, _, err = _ask(config, BreakingProvider(KeyError("choices")), monkeypatch)
    assert code == 1
    assert "Traceback (most recent call last)" in err and "in stream" in err
    assert err.splitlines()[-1].startswith("countbot: error: unexpected error: KeyError")
    assert _only_session(config)["messages"][0]["status"] == "failed"


def test_a_failed_turns_partial_answer_is_not_sent_to_the_model_again(
    tmp_path: Path, server: fs.FakeServer
) -> None:
    """The partial answer of a failed turn stays in the session (marked failed) but the next
    turn's request holds neither it nor the question it half answered; the exchange before
    it is sent as usual."""
    cb = make_cb(tmp_path, server.base_url)
    server.add(fs.text("The first answer."))
    server.add(fs.error_mid_stream("Half-an-answer Zq7 ", {"message": "overloaded"}))
    server.add(fs.text("A whole answer."))
    assert cb.invoke("ask", "first question").returncode == 0
    failed = cb.invoke("ask", "-c", "second question Qx1")
    assert failed.returncode == 6, failed.stderr
    assert [(m["content"], m.get("status")) for m in cb.only_session()["messages"]][2:] == [
        ("second question Qx1", "failed"),
        ("Half-an-answer Zq7 ", "failed"),
    ]
    again = cb.invoke("ask", "-c", "third question")
    assert again.returncode == 0, again.stderr
    third = server.chat_bodies()[2]
    sent = [(m["role"], m["content"]) for m in third["messages"][1:]]
    assert sent == [
        ("user", "first question"),
        ("assistant", "The first answer."),
        ("user", "third question"),
    ], sent
    assert "Zq7" not in json.dumps(third) and "Qx1" not in json.dumps(third)
