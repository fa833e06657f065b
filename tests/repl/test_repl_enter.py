"""Enter after a slash command never becomes a newline. An Enter typed while a slash command's
output prints reaches the prompt as "\\n" (the terminal's ICRNL outside the prompt's raw mode),
which is Ctrl-J, the newline key: on a slash-command line it ends the line as Enter does."""

from __future__ import annotations

from typing import Any

from countbot_cli.repl.prompt import is_command_line


def test_clear_then_help_typed_ahead_both_run_and_nothing_reaches_the_model(scripted: Any) -> None:
    h = scripted()
    h.provider.enqueue("the real answer")
    # one burst: as typed quickly, and as a cooked terminal hands over the second Enter
    h.run(["/clear\r/help\r/tokens\n/help tokens\n", "a real question\r"])
    out = h.text()
    assert "Commands:" in out  # /help ran
    assert "/tokens\n  what the next request holds" in out  # /help tokens ran
    sent_requests = h.sent()
    assert len(sent_requests) == 1  # only the real question reached the model
    sent = [m["content"] for m in sent_requests[0] if m["role"] == "user"]
    assert sent == ["a real question"]
    assert h.store.list()[0]["message_count"] == 2


def test_ctrl_j_still_makes_a_newline_in_a_message_and_after_a_double_slash(scripted: Any) -> None:
    h = scripted()
    h.provider.enqueue("one", "two")
    h.run(["first line\nsecond line\r", "//etc/hosts\nis a file\r"])
    assert h.sent_users() == ["first line\nsecond line", "/etc/hosts\nis a file"]
    assert is_command_line("/help") and is_command_line("/model gpt-4o")
    assert not is_command_line("//x") and not is_command_line("hello /x")
    assert not is_command_line("/help\nmore") and not is_command_line("/usr/bin is a path")
