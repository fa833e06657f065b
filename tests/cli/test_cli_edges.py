"""The command line's rough edges, each as a user meets it, by running `countbot`: a bad role
file among good ones, a typo in an `-o` key, folders countbot cannot make, a session from a
newer countbot, `-t <Tab>`, notices said once, one prefix style, the exit-code block of --help."""

from __future__ import annotations

import re
import shutil
from pathlib import Path

import fakeserver as fs
import pytest
from cbenv import CB, make_cb


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
