"""The command line's rough edges, each as a user meets it, by running `countbot`: a bad role
file among good ones, a typo in an `-o` key, folders countbot cannot make, a session from a
newer countbot, `-t <Tab>`, notices said once, one prefix style, the exit-code block of --help."""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
from pathlib import Path

import fakeserver as fs
import pexpect
import pytest
import yaml
from cbenv import CB, COUNTBOT, QUIET_MEMORY, clean_env, make_cb, provider_config
from local_extra import needs_local
from terminal import CPR, CPR_ANSWER, TOOLBAR_END, expect, plain, spawn


def _md(cb: CB, kind: str, name: str, text: str) -> Path:
    folder = cb.user_home / kind
    folder.mkdir(parents=True, exist_ok=True)
    path = folder / f"{name}.md"
    path.write_text(text, encoding="utf-8")
    return path


def test_roles_lists_the_good_roles_and_names_a_bad_one(tmp_path: Path) -> None:
    cb = make_cb(tmp_path, None)
    _md(cb, "roles", "alpha", "---\ndescription: the first\n---\nA.\n")
    bad = _md(cb, "roles", "broken", "---\nmodel: [unclosed\n---\nB.\n")
    _md(cb, "roles", "typo", "---\ntemprature: 0.2\n---\nT.\n")
    _md(cb, "roles", "zulu", "Z is for zulu.\n")
    proc = cb.run("roles")
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.splitlines() == ["alpha  the first", "zulu   Z is for zulu."]
    lines = proc.stderr.splitlines()
    assert len(lines) == 2, proc.stderr
    assert lines[0].startswith(f"countbot: role 'broken' left out: {bad}:2: invalid YAML")
    assert lines[1].startswith("countbot: role 'typo' left out: ")
    assert lines[1].endswith("unknown key 'temprature' (did you mean 'temperature'?)")


def _exit_code_rows(help_text: str) -> list[str]:
    block = help_text.split("Exit codes:\n", 1)[1].split("\n\n", 1)[0]
    return block.rstrip("\n").splitlines()


def test_the_exit_code_block_of_help_is_aligned(tmp_path: Path) -> None:
    cb = make_cb(tmp_path, None)
    for args in (["--help"], ["ask", "--help"]):
        proc = cb.run(*args)
        assert proc.returncode == 0, proc.stderr
        rows = [
            re.fullmatch(r"(\s*(\d+)) (\S.*?)(?:(\s\s+(\d+)) (\S.*))?", ln)
            for ln in _exit_code_rows(proc.stdout)
        ]
        assert all(rows), _exit_code_rows(proc.stdout)
        codes = {int(m[2]) for m in rows if m} | {int(m[5]) for m in rows if m and m[5]}
        assert codes == {0, 1, 2, 3, 4, 5, 6, 7, 8, 130}
        # each column: the codes end at one place and the texts start at one place
        assert len({m.end(1) for m in rows if m}) == 1, proc.stdout
        assert len({m.start(3) for m in rows if m}) == 1, proc.stdout
        assert len({m.end(4) for m in rows if m and m[5]}) == 1, proc.stdout
        assert len({m.start(6) for m in rows if m and m[5]}) == 1, proc.stdout


def test_an_option_key_one_edit_from_a_checked_one_is_refused(
    tmp_path: Path, server: fs.FakeServer
) -> None:
    cb = make_cb(tmp_path, server.base_url)
    proc = cb.run("ask", "-o", "temprature", "0.2", "hi")
    assert proc.returncode == 2, proc.stderr
    assert "temprature" in proc.stderr and "did you mean 'temperature'?" in proc.stderr
    assert cb.run("-o", "max_token", "9", "hi").returncode == 2
    assert server.chat_bodies() == []  # nothing was sent with the typo
    # a key that is no typo of a checked one still goes to the provider as it is
    server.add(fs.text("ok"))
    proc = cb.run(
        "ask", "-o", "top_k", "40", "-o", "logit_bias", '{"7": 1}', "-o", "top_p", "0.5", "hi"
    )
    assert proc.returncode == 0, proc.stderr
    body = server.chat_bodies()[-1]
    assert (body["top_k"], body["logit_bias"], body["top_p"]) == (40, {"7": 1}, 0.5)


@pytest.mark.skipif(shutil.which("bash") is None, reason="needs bash")
def test_tab_after_t_completes_template_names(tmp_path: Path) -> None:
    cb = make_cb(tmp_path, None)
    _md(cb, "templates", "summarise", "Summarise $ARGUMENTS\n")
    _md(cb, "templates", "review", "Review $1 for $2.\n")
    _md(cb, "roles", "reviewer", "A role, not a template.\n")
    assert sorted(cb.bash_complete(["-t", ""])[0]) == ["review", "summarise"]
    assert cb.bash_complete(["--template", "su"])[0] == ["summarise"]
    assert cb.bash_complete(["-m", "x", "-t", "re"])[0] == ["review"]
    assert cb.bash_complete(["ask", "-t", ""])[0] == ["review", "summarise"]
    assert cb.bash_complete(["se"])[0] == ["sessions"]  # a command's name is still one


def test_a_sessions_folder_that_cannot_be_made_is_exit_2_naming_it(
    tmp_path: Path, server: fs.FakeServer
) -> None:
    blocker = tmp_path / "a-file"
    blocker.write_text("not a folder\n", encoding="utf-8")
    cb = make_cb(tmp_path, server.base_url, sessions_dir=str(blocker / "sessions"))
    server.default = fs.text("an answer")
    for args in (["ask", "hi"], ["sessions", "list"], ["sessions", "show", "latest"]):
        proc = cb.run(*args)
        assert proc.returncode == 2, (args, proc.stderr)
        line = proc.stderr.splitlines()[-1]
        assert f"the sessions folder {blocker}/sessions: {blocker} is a file" in line, line
        assert "unexpected" not in proc.stderr


def test_a_memory_folder_that_cannot_be_made_is_exit_2_naming_it(tmp_path: Path) -> None:
    blocker = tmp_path / "a-file"
    blocker.write_text("not a folder\n", encoding="utf-8")
    cb = make_cb(tmp_path, "http://127.0.0.1:9/v1", memory={"file": str(blocker / "MEMORY.md")})
    for args in (["memory", "add", "I like tea"], ["memory", "show"]):
        proc = cb.run(*args)
        assert proc.returncode == 2, (args, proc.stderr)
        assert f"folder of the memory file {blocker}: {blocker} is a file" in proc.stderr


@pytest.mark.skipif(os.geteuid() == 0, reason="root is never refused permission")
def test_a_sessions_folder_without_permission_is_exit_2(tmp_path: Path) -> None:
    locked = tmp_path / "locked"
    locked.mkdir(mode=0o500)
    cb = make_cb(tmp_path, "http://127.0.0.1:9/v1", sessions_dir=str(locked / "sessions"))
    proc = cb.run("sessions", "list")
    assert proc.returncode == 2, proc.stderr
    assert f"the sessions folder {locked}/sessions" in proc.stderr


def test_a_session_from_a_newer_countbot_is_exit_2_saying_to_upgrade(
    tmp_path: Path, server: fs.FakeServer
) -> None:
    cb = make_cb(tmp_path, server.base_url)
    server.default = fs.text("an answer")
    old_id = cb.ask_saved("an older question")
    new_id = cb.ask_saved("a newer question")
    newer = cb.sessions_dir / f"{new_id}.json"
    doc = json.loads(newer.read_text(encoding="utf-8"))
    newer.write_text(json.dumps({**doc, "schema_version": 99}), encoding="utf-8")
    for args in (["sessions", "show", new_id], ["ask", "-s", new_id, "more"]):
        proc = cb.run(*args)
        assert proc.returncode == 2, (args, proc.stderr)
        assert "written by a newer countbot" in proc.stderr and "upgrade countbot" in proc.stderr
    listed = cb.run("sessions", "list")
    assert listed.returncode == 0, listed.stderr
    assert old_id[:8] in listed.stdout and new_id[:8] not in listed.stdout
    assert "upgrade countbot" in listed.stderr


def test_the_untrusted_config_notice_is_said_once_a_day(
    tmp_path: Path, server: fs.FakeServer
) -> None:
    cb = CB(root=tmp_path, work=tmp_path / "work", env=clean_env(tmp_path))
    cb.work.mkdir()
    cb.user_home.mkdir(parents=True)
    own = cb.user_home / "config.yaml"
    own.write_text(yaml.safe_dump(provider_config(server.base_url)), encoding="utf-8")
    cb.config_file.write_text("persona: {name: Cloned}\n", encoding="utf-8")  # not trusted
    server.default = fs.text("fine")
    first = cb.run("ask", "hi")
    assert first.returncode == 0, first.stderr
    assert first.stderr.count("ignored ./config.yaml") == 1
    again = cb.run("ask", "hi")
    assert again.returncode == 0 and again.stderr == ""  # said today already
    other = tmp_path / "other"
    other.mkdir()
    (other / "config.yaml").write_text("persona: {name: Other}\n", encoding="utf-8")
    elsewhere = subprocess.run(
        [COUNTBOT, "ask", "hi"], capture_output=True, text=True, cwd=other, env=cb.env
    )
    assert elsewhere.stderr.count("ignored ./config.yaml") == 1  # another file: said there
    said = cb.user_home / "notices.json"
    said.write_text(json.dumps({**json.loads(said.read_text()), "day": "2000-01-01"}))
    assert cb.run("ask", "hi").stderr.count("ignored ./config.yaml") == 1  # a new day


@needs_local
def test_the_embedded_model_notice_is_said_once_and_not_about_config_init_after_it(
    tmp_path: Path,
) -> None:
    cb = make_cb(tmp_path, None)
    first = cb.run("ask", "--no-tools", "-o", "max_tokens", "2", "hi", timeout=120)
    assert first.stderr.count("using the embedded local model") == 1, first.stderr
    assert "`countbot config init` sets up another provider" in first.stderr  # no config yet
    again = cb.run("ask", "--no-tools", "-o", "max_tokens", "2", "hi", timeout=120)
    assert "embedded local model" not in again.stderr, again.stderr
    assert cb.run("config", "init").returncode == 0
    (cb.user_home / "notices.json").unlink()  # as on the next day
    after = cb.run("ask", "--no-tools", "-o", "max_tokens", "2", "hi", timeout=120)
    assert after.stderr.count("using the embedded local model") == 1, after.stderr
    assert "config init" not in after.stderr
    assert f"or set up a provider in {cb.user_home / 'config.yaml'}" in after.stderr


def test_the_chat_shows_retries_and_the_final_error_in_one_style(
    tmp_path: Path, server: fs.FakeServer
) -> None:
    cb = make_cb(tmp_path, server.base_url, **QUIET_MEMORY)
    server.default = fs.status(503, {"error": {"message": "overloaded"}})
    child = spawn(cb)
    try:
        expect(child, TOOLBAR_END)
        child.send("hi\r")
        shown = ""
        while True:  # the embedded model may be offered first (with the `local` extra): no
            found = child.expect_exact([CPR, "[y/N]", "/retry sends it again"], timeout=60)
            shown += plain(child.before)
            if found == 0:
                child.send(CPR_ANSWER)
            elif found == 1:
                child.send("n\r")
            else:
                break
        expect(child, TOOLBAR_END)
        child.sendcontrol("d")
        child.expect(pexpect.EOF)
    finally:
        child.close(force=True)
    lines = [ln.strip() for ln in shown.splitlines()]
    retries = [ln for ln in lines if "retrying in" in ln]
    errors = [ln for ln in lines if ln.startswith("error: ")]
    assert len(retries) == 2 and len(errors) == 1, shown
    assert all(ln.startswith("server error (503); retrying in") for ln in retries), retries
    assert "countbot:" not in shown, shown
