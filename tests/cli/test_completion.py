"""`countbot completion bash|zsh|fish`: the script loaded into a real shell completes commands,
options and session ids (and role names: tests/cli/test_roles.py)."""

from __future__ import annotations

import shutil
import subprocess
from dataclasses import replace
from pathlib import Path

import pytest
from cbenv import CB, make_cb

from countbot_cli.conversation.sessions.session import new_session
from countbot_cli.conversation.sessions.store import SessionStore


def _sessions(cb: CB, *ids_and_titles: tuple[str, str]) -> None:
    store = SessionStore(cb.sessions_dir)
    for sid, title in ids_and_titles:
        store.create(replace(new_session(provider="test", model="m", title=title), id=sid))


@pytest.mark.skipif(shutil.which("bash") is None, reason="needs bash")
def test_bash_script_completes_a_session_id_prefix_commands_and_options(tmp_path: Path) -> None:
    cb = make_cb(tmp_path, "http://127.0.0.1:9/v1")
    _sessions(cb, ("a1b2c3d4e5f6", "first"), ("a1ffff000000", "second"), ("bbbb11112222", "x"))
    reply, spec = cb.bash_complete(["sessions", "show", "a1"])
    assert spec == "complete -o default -F _countbot_complete countbot"
    assert sorted(reply) == ["a1b2c3d4e5f6", "a1ffff000000"]
    assert cb.bash_complete(["sessions", "show", "a1f"])[0] == ["a1ffff000000"]
    # -s/--session takes an id wherever it is an option
    assert cb.bash_complete(["ask", "-s", "bb"])[0] == ["bbbb11112222"]
    assert set(cb.bash_complete(["-c", "--session", ""])[0]) == {
        "a1b2c3d4e5f6",
        "a1ffff000000",
        "bbbb11112222",
    }
    # commands at the root and in a group, options of the command being typed
    assert sorted(cb.bash_complete(["se"])[0]) == ["sessions"]
    assert "completion" in cb.bash_complete([""])[0]
    assert sorted(cb.bash_complete(["sessions", "re"])[0]) == ["rename", "resume"]
    assert cb.bash_complete(["ask", "--no-s"])[0] == ["--no-save", "--no-stream"]
    # the first argument of `rename` is an id; its title is not
    assert cb.bash_complete(["sessions", "rename", "a1b2c3d4e5f6", "a1"])[0] == []


def test_completion_scripts_and_a_wrong_shell(tmp_path: Path) -> None:
    cb = make_cb(tmp_path, None)
    for shell, marker in [
        ("bash", "complete -o default -F"),
        ("zsh", "compdef _countbot countbot"),
        ("fish", "complete -c countbot"),
    ]:
        proc = cb.invoke("completion", shell)
        assert proc.returncode == 0 and marker in proc.stdout and "__complete" in proc.stdout
    wrong = cb.invoke("completion", "tcsh")
    assert wrong.returncode == 2
    assert "no completion for 'tcsh': use bash, zsh or fish" in wrong.stderr


@pytest.mark.skipif(shutil.which("zsh") is None, reason="needs zsh")
def test_zsh_script_parses(tmp_path: Path) -> None:
    cb = make_cb(tmp_path, None)
    script = cb.invoke("completion", "zsh").stdout
    proc = subprocess.run(["zsh", "-n"], input=script, capture_output=True, text=True)
    assert proc.returncode == 0, proc.stderr


def test_complete_reads_the_named_config_and_stays_quiet_when_it_is_broken(
    tmp_path: Path,
) -> None:
    cb = make_cb(tmp_path, None)
    other = cb.work / "other"
    other.mkdir()
    (other / "mine.yaml").write_text("sessions_dir: kept\n", encoding="utf-8")
    store = SessionStore(other / "kept")
    store.create(replace(new_session(provider="p", model="m", title="Mine"), id="cafe00000001"))
    proc = cb.invoke("__complete", "--config", "other/mine.yaml", "sessions", "show", "ca")
    assert (proc.returncode, proc.stdout) == (0, "cafe00000001\tMine\n"), proc.stderr
    (other / "broken.yaml").write_text("providers: [unclosed\n", encoding="utf-8")
    proc = cb.invoke("__complete", "--config", "other/broken.yaml", "sessions", "show", "")
    assert (proc.returncode, proc.stdout, proc.stderr) == (0, "", "")
