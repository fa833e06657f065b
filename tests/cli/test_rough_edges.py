"""The rough edges a new user hit, each as the user meets it: the README's
provider snippet run as written, llama.cpp's server recognised, usage a server did not report
left null, one export rule, a role's typo, `--jsonl` at the tool-round limit."""

from __future__ import annotations

import json
import re
from pathlib import Path

import fakeserver as fs
import pytest
from cbenv import CB, clean_env, make_cb

ROOT = Path(__file__).parents[2]
README = (ROOT / "README.md").read_text(encoding="utf-8")
CONFIG_PAGE = (ROOT / "docs" / "config.md").read_text(encoding="utf-8")
TOOLS_PAGE = (ROOT / "docs" / "tools.md").read_text(encoding="utf-8")


def _snippet_env(base_url: str) -> dict[str, str]:
    """The README's "any OpenAI-compatible server" line as written, pointed at `base_url`."""
    block = README.split("## Configure", 1)[1].split("```sh", 1)[1].split("```", 1)[0]
    line = next(ln for ln in block.splitlines() if "COUNTBOT_API_BASE=" in ln)
    m = re.fullmatch(r"export COUNTBOT_API_BASE=(http://[^/\s]+)(/v1)\s+#.*", line.strip())
    assert m, line
    return {"COUNTBOT_API_BASE": base_url.rstrip("/") + m.group(2)[len("/v1") :]}


def _bare(tmp_path: Path) -> CB:
    """A user with no config file at all."""
    work = tmp_path / "work"
    work.mkdir()
    return CB(root=tmp_path, work=work, env=clean_env(tmp_path))


def test_the_readme_server_snippet_works_as_written(tmp_path: Path, server: fs.FakeServer) -> None:
    server.models = ["only-model"]
    server.add(fs.text("hello from the server"))
    cb = _bare(tmp_path)
    proc = cb.invoke("ask", "hi", env=_snippet_env(server.base_url))
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout == "hello from the server\n"
    assert server.chat_bodies()[-1]["model"] == "only-model"  # the server's only model


def test_a_server_with_several_models_says_which_variable_to_set(
    tmp_path: Path, server: fs.FakeServer
) -> None:
    server.models = ["llama3.2", "qwen2.5"]
    cb = _bare(tmp_path)
    proc = cb.invoke("ask", "hi", env=_snippet_env(server.base_url))
    assert proc.returncode == 2
    assert "llama3.2, qwen2.5" in proc.stderr and "COUNTBOT_MODEL" in proc.stderr
    assert server.chat_bodies() == []
    env = {**_snippet_env(server.base_url), "COUNTBOT_MODEL": "qwen2.5"}  # the manual's next line
    assert "export COUNTBOT_MODEL=" in CONFIG_PAGE
    server.add(fs.text("ok"))
    assert cb.invoke("ask", "hi", env=env).returncode == 0
    assert server.chat_bodies()[-1]["model"] == "qwen2.5"


LLAMA_CPP_PYTHON = {"id": "test-model", "object": "model", "owned_by": "me", "permissions": []}
LLAMA_SERVER = {"id": "test-model", "object": "model", "owned_by": "llamacpp"}


@pytest.mark.parametrize("row", [LLAMA_CPP_PYTHON, LLAMA_SERVER], ids=["python", "llama-server"])
def test_llama_cpp_servers_get_non_streamed_tool_requests_without_a_preset(
    tmp_path: Path, server: fs.FakeServer, row: dict[str, object]
) -> None:
    server.models_reply = fs.status(200, {"object": "list", "data": [row]})
    cb = make_cb(tmp_path, server.base_url, tools={"enabled": True})
    (cb.work / "a.txt").write_text("alpha\n", encoding="utf-8")
    server.add(fs.tool_calls([("read_file", {"path": "a.txt"})]), fs.text("It says alpha."))
    proc = cb.invoke("ask", "what is in a.txt?")
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout == "It says alpha.\n"
    assert [b["stream"] for b in server.chat_bodies()] == [False, False]  # tools: not streamed


def test_other_servers_keep_streaming_tool_requests(tmp_path: Path, server: fs.FakeServer) -> None:
    cb = make_cb(tmp_path, server.base_url, tools={"enabled": True})
    server.add(fs.text("fine"))
    assert cb.invoke("ask", "hi").returncode == 0
    assert server.chat_bodies()[-1]["stream"] is True


def test_usage_the_server_did_not_report_is_null_not_zero(
    tmp_path: Path, server: fs.FakeServer
) -> None:
    cb = make_cb(tmp_path, server.base_url)
    server.add(fs.text("no usage here"))
    data = json.loads(cb.invoke("ask", "--json", "hi").stdout)
    assert data["usage"] is None
    server.add(fs.text("counted", usage={"prompt_tokens": 5, "completion_tokens": 2}))
    data = json.loads(cb.invoke("ask", "--json", "hi").stdout)
    assert data["usage"]["prompt_tokens"] == 5
    server.add(fs.text("no usage again"))
    events = [json.loads(ln) for ln in cb.invoke("ask", "--jsonl", "hi").stdout.splitlines()]
    usage = next(e for e in events if e["type"] == "usage")
    assert usage["prompt_tokens"] is None and usage["total_tokens"] is None


def test_jsonl_end_at_the_tool_round_limit_says_so(tmp_path: Path, server: fs.FakeServer) -> None:
    cb = make_cb(tmp_path, server.base_url, tools={"enabled": True}, max_iterations=1)
    (cb.work / "a.txt").write_text("hello\n", encoding="utf-8")
    for _ in range(2):
        server.add(fs.tool_calls([("read_file", {"path": "a.txt"})]))
    proc = cb.invoke("ask", "--jsonl", "read a.txt again and again")
    assert proc.returncode == 8, proc.stderr
    end = json.loads(proc.stdout.splitlines()[-1])
    assert (end["type"], end["status"], end["exit_code"]) == ("end", "max_iterations", 8)
    for _ in range(2):
        server.add(fs.tool_calls([("read_file", {"path": "a.txt"})]))
    data = json.loads(cb.invoke("ask", "--json", "again").stdout)
    assert (data["status"], data["exit_code"]) == ("max_iterations", 8)


def _one_session(cb: CB, server: fs.FakeServer) -> str:
    server.add(fs.text("an answer"))
    assert cb.invoke("ask", "a question").returncode == 0
    return str(cb.only_session()["id"])


def test_export_format_follows_the_extension_unless_format_says(
    tmp_path: Path, server: fs.FakeServer
) -> None:
    cb = make_cb(tmp_path, server.base_url)
    sid = _one_session(cb, server)
    assert cb.invoke("sessions", "export", sid, "-o", "out.json").returncode == 0
    assert json.loads((cb.work / "out.json").read_text(encoding="utf-8"))["id"] == sid
    assert cb.invoke("sessions", "export", sid, "-o", "out.md").returncode == 0
    assert (cb.work / "out.md").read_text(encoding="utf-8").startswith("# ")
    forced = cb.invoke("sessions", "export", sid, "-o", "forced.json", "--format", "md")
    assert forced.returncode == 0
    assert (cb.work / "forced.json").read_text(encoding="utf-8").startswith("# ")
    bad = cb.invoke("sessions", "export", sid, "-o", "out.txt")
    assert bad.returncode == 2 and "'.txt'" in bad.stderr and "--format" in bad.stderr
    assert not (cb.work / "out.txt").exists()
    assert cb.invoke("sessions", "export", sid).stdout.startswith("# ")  # stdout: markdown


def test_a_typo_in_a_roles_front_matter_is_refused_with_did_you_mean(
    tmp_path: Path, server: fs.FakeServer
) -> None:
    cb = make_cb(tmp_path, server.base_url)
    folder = cb.user_home / "roles"
    folder.mkdir(parents=True)
    role = folder / "terse.md"
    role.write_text("---\ntemprature: 0.2\n---\nBe terse.\n", encoding="utf-8")
    proc = cb.invoke("ask", "-r", "terse", "hi")
    assert proc.returncode == 2
    assert f"{role}:2" in proc.stderr and "did you mean 'temperature'?" in proc.stderr
    assert server.chat_bodies() == []  # nothing was sent with the typo as a request field
    role.write_text("---\noptions:\n  logit_bias: {'50256': -100}\n---\nBe terse.\n")
    server.add(fs.text("ok"))
    assert cb.invoke("ask", "-r", "terse", "hi").returncode == 0
    assert server.chat_bodies()[-1]["logit_bias"] == {"50256": -100}  # other fields: options:


def test_the_manual_lists_every_answer_the_mcp_prompt_offers() -> None:
    from countbot_cli.messages import ToolCall
    from countbot_cli.tools.base import PreparedCall, ToolSpec
    from countbot_cli.ui.confirm import question

    spec = ToolSpec("mcp__time__now", "", {}, lambda *_: None, kind="mcp")  # type: ignore[arg-type]
    call = PreparedCall(call=ToolCall(id="c", name=spec.name, arguments="{}"), spec=spec, args={})
    offered = re.findall(r"\[(\w)\]", question(call, saving=True))
    assert offered == ["y", "n", "a", "A", "e"]
    answers = TOOLS_PAGE.split("## Approving a call", 1)[1].split("\n## ", 1)[0]
    for letter in offered:
        assert f"`{letter}`" in answers, letter


def test_the_manuals_session_examples_are_ids_a_session_can_have() -> None:
    pages = [README] + [p.read_text(encoding="utf-8") for p in (ROOT / "docs").glob("*.md")]
    refs = [r.rstrip("]") for text in pages for r in re.findall(r"countbot [^\n`]*?-s (\S+)", text)]
    assert len(refs) > 3
    for ref in refs:
        assert ref == "latest" or ref == "ID" or re.fullmatch(r"[0-9a-f]{4,}", ref), ref
