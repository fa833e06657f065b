"""`--config FILE` before a command (the root's, a group's) or after it applies to that run only:
typer's `ctx.obj` hands it down, no process-wide state keeps it for the next run."""

from __future__ import annotations

from pathlib import Path

import yaml
from cbenv import make_cb

from countbot_cli.conversation.sessions.session import new_session
from countbot_cli.conversation.sessions.store import SessionStore


def test_config_given_before_or_after_the_command_applies_to_that_run_only(
    tmp_path: Path,
) -> None:
    cb = make_cb(tmp_path, None)
    other = tmp_path / "other.yaml"
    other.write_text(
        yaml.safe_dump(
            {
                "sessions_dir": str(tmp_path / "elsewhere"),
                "memory": {"file": str(tmp_path / "elsewhere" / "MEMORY.md")},
            }
        ),
        "utf-8",
    )
    SessionStore(tmp_path / "elsewhere").create(new_session(provider="p", model="m", title="kept"))

    assert cb.invoke("--config", str(other), "memory", "add", "the sky is green").returncode == 0
    for args in (
        ["--config", str(other), "memory", "show"],  # the root's
        ["memory", "show", "--config", str(other)],  # the command's own
    ):
        assert "the sky is green" in cb.invoke(*args).stdout, args
    for args in (
        ["--config", str(other), "sessions", "list"],
        ["sessions", "--config", str(other), "list"],  # the group's
        ["sessions", "--config", str(other)],  # the group alone lists
        ["sessions", "list", "--config", str(other)],
    ):
        assert "kept" in cb.invoke(*args).stdout, args
    # the next runs in the same process, without --config, read the default files again
    assert "the sky is green" not in cb.invoke("memory", "show").stdout
    assert cb.invoke("sessions", "list").stdout == "No saved sessions yet.\n"
