"""`ask -x/--extract` and `--extract-all`: only the code of the answer on stdout; an empty
answer, no code block and the tool-round limit say so on stderr with their own exit codes."""

from __future__ import annotations

from pathlib import Path

import fakeserver as fs
import pytest
from cbenv import make_cb

from countbot_cli.errors import EXIT_CODES_HELP
from countbot_cli.ui.codeblocks import code_blocks

SEVERAL = (
    "Here is the script:\n\n```python\nprint('one')\n```\n\nand the shell part:\n\n"
    "- run it:\n\n  ```sh\n  python x.py | head\n  ```\n\n~~~\nplain ~~~ block\n~~~\nDone."
)


def test_extract_one_block_prints_only_its_code(tmp_path: Path, server: fs.FakeServer) -> None:
    cb = make_cb(tmp_path, server.base_url)
    server.add(
        fs.text("Sure:\n\n```bash\nls -la \\\n  | sort\n```\n\nThat lists files.", chunk_size=3)
    )
    proc = cb.invoke("ask", "-x", "list files")
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout == "ls -la \\\n  | sort\n"


def test_extract_several_blocks_first_and_all(tmp_path: Path, server: fs.FakeServer) -> None:
    cb = make_cb(tmp_path, server.base_url)
    server.add(fs.text(SEVERAL, chunk_size=7))
    first = cb.invoke("ask", "--extract", "q")
    assert (first.returncode, first.stdout) == (0, "print('one')\n")
    server.add(fs.text(SEVERAL, chunk_size=7))
    every = cb.invoke("ask", "--extract-all", "q")
    assert every.returncode == 0, every.stderr
    # the fence inside the list item comes out without its indentation
    assert every.stdout == "print('one')\n\npython x.py | head\n\nplain ~~~ block\n"


def test_extract_with_no_code_block_prints_nothing_and_exits_7(
    tmp_path: Path, server: fs.FakeServer
) -> None:
    cb = make_cb(tmp_path, server.base_url)
    server.add(fs.text("No code needed: use `ls`."))
    proc = cb.invoke("ask", "-x", "q")
    assert (proc.returncode, proc.stdout) == (7, "")
    assert "no fenced code block" in proc.stderr
    # the turn is still saved whole
    assert cb.only_session()["messages"][-1]["content"] == "No code needed: use `ls`."


def test_extract_and_json_together_is_a_usage_error(tmp_path: Path, server: fs.FakeServer) -> None:
    cb = make_cb(tmp_path, server.base_url)
    proc = cb.invoke("ask", "-x", "--json", "q")
    assert proc.returncode == 2
    assert "--json" in proc.stderr and server.chat_bodies() == []


def test_empty_answer_is_said_on_stderr_with_exit_7(tmp_path: Path, server: fs.FakeServer) -> None:
    cb = make_cb(tmp_path, server.base_url)
    server.add(fs.text("  \n"))
    proc = cb.invoke("ask", "q")
    assert proc.returncode == 7
    assert "countbot: the answer was empty" in proc.stderr


def test_tool_round_limit_exits_8(tmp_path: Path, server: fs.FakeServer) -> None:
    cb = make_cb(tmp_path, server.base_url, tools={"enabled": True}, max_iterations=1)
    (cb.work / "a.txt").write_text("hello\n", encoding="utf-8")
    for _ in range(2):
        server.add(fs.tool_calls([("read_file", {"path": "a.txt"})]))
    proc = cb.invoke("ask", "read a.txt again and again")
    assert proc.returncode == 8, proc.stderr
    assert "max_iterations" in proc.stderr
    assert len(server.chat_bodies()) == 2


def test_exit_codes_7_and_8_are_in_ask_help_and_the_manual() -> None:
    assert "7 empty answer" in EXIT_CODES_HELP and "8 the tool-round limit" in EXIT_CODES_HELP
    manual = (Path(__file__).parents[2] / "docs" / "scripting.md").read_text(encoding="utf-8")
    assert "| 7 |" in manual and "| 8 |" in manual


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("no fence", []),
        ("```\nunclosed\nstill code", [("", "unclosed\nstill code")]),
        ("> ```js\n> x()\n> ```", [("js", "x()\n")]),
        ("````md\n```\ninner\n```\n````", [("md", "```\ninner\n```\n")]),
    ],
)
def test_code_blocks_follow_commonmark(text: str, expected: list[tuple[str, str]]) -> None:
    assert [tuple(b) for b in code_blocks(text)] == expected
