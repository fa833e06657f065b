"""app.py, the construction: what a conversation it builds carries for itself."""

from __future__ import annotations

import io
from pathlib import Path

import pytest
from cbenv import QUIET_MEMORY, make_cb

from countbot_cli import app
from countbot_cli.config.settings import load_settings
from countbot_cli.conversation.chat import Conversation
from countbot_cli.provider.fake import ScriptedProvider


def test_an_untrusted_agents_md_is_named_once_by_each_conversation(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """The notice is the conversation's state, not the process's: a `/model` switch (a new
    engine) does not repeat it, and a conversation built after another still gives it."""
    cb = make_cb(
        tmp_path,
        "http://127.0.0.1:9/v1",
        tools={"enabled": True, "workspace": str(tmp_path / "work")},
        **QUIET_MEMORY,
    )
    (cb.work / "AGENTS.md").write_text("Answer in French.\n", "utf-8")
    settings = load_settings(config_path=str(cb.config_file), env=cb.env, cwd=cb.work)
    store = app.make_store(settings, io.StringIO())

    def opened() -> Conversation:
        return app.build_conversation(
            settings,
            store,
            provider_for=lambda s: ScriptedProvider(model=s.provider.model or "m"),
            tools_enabled=True,
            yes=False,
        )

    first = opened()
    first.switch_model("another-model")  # builds a second engine for the same conversation
    first.close()
    second = opened()
    second.close()
    said = capsys.readouterr().err
    assert said.count("AGENTS.md: it is not trusted") == 2, said
