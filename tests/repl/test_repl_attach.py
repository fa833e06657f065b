"""Attachments in the REPL: `/attach PATH|URL` for the next message, `/attach` listing,
`/attach clear`, the prompt's `[N attached]`, one-line refusals that attach and send nothing,
path completion; and `countbot -a PATH` attaching to the first message, in a pseudo-terminal.
`/mcp`: the chat's MCP servers (an HTTP one from tests/helpers/mcp_http_server.py)."""

from __future__ import annotations

import base64
import json
import sys
from pathlib import Path
from typing import Any

import fakeserver as fs
import pexpect
import pytest
from attach_files import write_image
from cbenv import make_cb
from mcp_http_server import serving
from prompt_toolkit.completion import CompleteEvent
from prompt_toolkit.document import Document
from prompt_toolkit.formatted_text import to_plain_text
from repl_harness import Harness
from terminal import TOOLBAR_END, expect, spawn

from countbot_cli.repl.prompt import SlashCompleter


def _b64(path: Path) -> str:
    return base64.b64encode(path.read_bytes()).decode("ascii")


def _prompt_text(h: Harness) -> str:
    assert h.repl is not None
    message = h.repl._prompt_session().message
    assert callable(message)
    return to_plain_text(message())


def test_slash_attach_sends_a_file_and_an_image_with_the_next_message_only(
    harness: Any, server: fs.FakeServer
) -> None:
    h = harness()
    png = write_image(h.cb.work / "chart.png", (64, 48))
    (h.cb.work / "notes.txt").write_text("the tide turns at six\n", encoding="utf-8")
    server.add(fs.text("a chart and a note"), fs.text("nothing more"))
    seen: dict[str, str] = {}

    def prompt_shows_two(h: Harness) -> None:
        h.wait_for("attached text ")
        seen["prompt"] = _prompt_text(h)
        assert server.chat_bodies() == []  # attaching sends nothing

    h.run(
        [
            f"/attach {png}\r",
            f"/attach {h.cb.work / 'notes.txt'}\r",
            prompt_shows_two,
            "/attach\r",
            "what are these?\r",
            "and then?\r",
        ]
    )
    out = h.text()
    assert seen["prompt"] == "[2 attached] > "
    assert f"attached image {png} · 64x48" in out
    assert "2 attachments for the next message:" in out
    assert "attached text " + str(h.cb.work / "notes.txt") in out
    first, second = server.chat_bodies()
    content = first["messages"][-1]["content"]
    assert content[0]["type"] == "text"
    assert content[0]["text"].startswith("what are these?\n\nFile `")
    assert "the tide turns at six" in content[0]["text"]
    assert content[1] == {
        "type": "image_url",
        "image_url": {"url": "data:image/png;base64," + _b64(png)},
    }
    # the next message goes alone; the earlier one is history as words, the image not again
    assert second["messages"][-1]["content"] == "and then?"
    assert "image_url" not in json.dumps(second["messages"])
    saved = h.session_data()["messages"][0]
    assert [a["kind"] for a in saved["attachments"]] == ["image", "text"]
    assert _prompt_text(h) == "> "


def test_refusals_are_one_line_and_attach_nothing_and_clear_drops_what_is_held(
    harness: Any, server: fs.FakeServer
) -> None:
    h = harness(provider={"vision": False})
    work = h.cb.work
    png = write_image(work / "photo.png", (32, 32))
    (work / "blob.bin").write_bytes(b"\x00\x01\x02" * 100)
    (work / "big.txt").write_text("x" * 1_100_000, encoding="utf-8")
    (work / "ok.txt").write_text("fine", encoding="utf-8")
    server.add(fs.text("answered"))
    h.run(
        [
            f"/attach {work / 'missing.txt'}\r",
            f"/attach {work}\r",
            f"/attach {work / 'blob.bin'}\r",
            f"/attach {work / 'big.txt'}\r",
            f"/attach {png}\r",
            "/attach http://127.0.0.1:9/nothing-listens\r",
            "/attach\r",
            f"/attach {work / 'ok.txt'}\r",
            "/attach clear\r",
            "/attach clear\r",
            "plain question\r",
        ]
    )
    out = h.text()
    for why in (
        "missing.txt: no such file",
        "blob.bin: a binary file",
        "big.txt",
        "does not take images (" + str(png),
        "127.0.0.1:9/nothing-listens: cannot fetch it",
    ):
        lines = [line for line in out.splitlines() if why in line]
        assert len(lines) == 1, (why, out)
    assert "work: is a folder, not a file" in out
    assert "Nothing attached." in out
    assert "Dropped 1 attachment." in out and "Nothing was attached." in out
    assert "Traceback" not in out + h.err.getvalue()
    (body,) = server.chat_bodies()  # none of the refused ones reached the model
    assert body["messages"][-1]["content"] == "plain question"
    assert "attachments" not in h.session_data()["messages"][0]


def test_an_image_held_for_a_model_switched_to_without_vision_is_not_sent(
    harness: Any, server: fs.FakeServer
) -> None:
    h = harness(provider={"model": "gpt-4o"})
    png = write_image(h.cb.work / "p.png", (16, 16))
    server.add(fs.text("seen"))
    h.run([f"/attach {png}\r", "/model gpt-3.5-turbo\r", "look\r", "/attach clear\r", "look\r"])
    out = h.text()
    assert "gpt-3.5-turbo does not take images" in out
    assert "Dropped 1 attachment." in out  # the refused send kept it for the user to decide
    (body,) = server.chat_bodies()
    assert body["model"] == "gpt-3.5-turbo" and body["messages"][-1]["content"] == "look"


def test_attach_completes_paths(harness: Any) -> None:
    h = harness()
    (h.cb.work / "report-2026.pdf").write_bytes(b"%PDF-1.4\n")
    repl = h.make()
    completer = SlashCompleter(repl)
    text = f"/attach {h.cb.work}/rep"
    found = [c.text for c in completer.get_completions(Document(text), CompleteEvent())]
    assert found == ["ort-2026.pdf"]
    names = [c.display_text for c in completer.get_completions(Document("/at"), CompleteEvent())]
    assert names == ["/attach"]


@pytest.mark.skipif(sys.platform == "win32", reason="needs a POSIX pty")
def test_countbot_dash_a_attaches_to_the_first_message_in_a_terminal(tmp_path: Path) -> None:
    with fs.FakeServer() as server:
        cb = make_cb(tmp_path, server.base_url)
        png = write_image(cb.work / "shot.png", (20, 10))
        child = spawn(cb, "-a", "shot.png")
        try:
            expect(child, "[1 attached]")
            expect(child, TOOLBAR_END)
            server.add(fs.text("a screenshot"), fs.text("you are welcome"))
            child.send("what is it?\r")
            expect(child, "a screenshot")
            child.send("thanks\r")
            expect(child, "you are welcome")
            expect(child, TOOLBAR_END)
            child.sendeof()
            child.expect(pexpect.EOF)
        finally:
            child.close(force=True)
        first, second = server.chat_bodies()
        assert first["messages"][-1]["content"] == [
            {"type": "text", "text": "what is it?"},
            {"type": "image_url", "image_url": {"url": "data:image/png;base64," + _b64(png)}},
        ]
        assert second["messages"][-1]["content"] == "thanks"
        # a refused attachment stops the chat before it starts: one line, exit 2
        child = spawn(cb, "chat", "-a", "nope.png")
        child.expect(pexpect.EOF)
        child.close()
        assert child.exitstatus == 2
        assert "countbot: error: -a nope.png: no such file" in child.before


def test_slash_mcp_lists_the_chats_servers_state_and_tools(
    tmp_path: Path, server: fs.FakeServer
) -> None:
    with serving(tmp_path) as calc:
        entry = {"url": calc.url, "headers": {"Authorization": "Bearer tok-5e5e5e5e"}}
        h = Harness(
            tmp_path, server, tools=True, mcp={"servers": {"calc": {**entry, "allow": ["add"]}}}
        )
        repl = h.run(["/mcp\r", "/mcp\r"])
        tools = repl.conversation.engine.tools
        assert tools is not None and tools.mcp is not None
        tools.mcp.close()
    out = h.text()
    assert out.count(f"calc  running  (http: {calc.url})") == 2
    assert "  mcp__calc__add(a*: integer, b*: integer)  [allowed without asking]" in out
    assert "  mcp__calc__shout(text*: string)\n" in out
    assert "tok-5e5e" not in out + h.err.getvalue()
    assert server.chat_bodies() == []  # /mcp asks the model nothing
    # the chat's own servers, started once: one MCP session for both listings
    sessions = {r["headers"].get("mcp-session-id") for r in calc.requests()} - {None}
    assert len(sessions) == 1


def test_slash_mcp_without_servers_says_how_to_add_them(harness: Any) -> None:
    h = harness()
    h.run(["/mcp\r"])
    assert "no MCP servers configured (add them under `mcp: servers:` in the config)" in h.text()
