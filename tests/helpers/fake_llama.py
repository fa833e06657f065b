"""A countbot whose local model is scripted (fake_llama_path/llama_cpp: see its docstring for
the script's keys): `local_cb(tmp_path, **script)` is a user whose config names a local provider,
with the environment that makes countbot's model process import the fake instead of
llama-cpp-python."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from cbenv import CB, clean_env

FAKE_PATH = Path(__file__).resolve().parent / "fake_llama_path"


def local_cb(tmp_path: Path, *, tools: bool = True, **script: Any) -> CB:
    """A user of a local model (`type: local`) that answers from `script`."""
    work = tmp_path / "work"
    work.mkdir(parents=True, exist_ok=True)
    cb = CB(root=tmp_path, work=work, env=clean_env(tmp_path))
    model = tmp_path / "scripted.gguf"
    model.write_bytes(b"GGUF not really")
    cb.write_config(
        {
            "default_provider": "loc",
            "providers": {"loc": {"type": "local", "model_path": str(model)}},
            "tools": {"enabled": tools},
            "memory": {"auto_memory": False, "overflow_summary": False, "inject": "off"},
        }
    )
    rescript(cb, **script)
    cb.env["PYTHONPATH"] = str(FAKE_PATH)
    return cb


def rescript(cb: CB, **script: Any) -> Path:
    """Write the script the next model process follows; its path."""
    path = cb.root / "fake-llama.json"
    path.write_text(json.dumps(script), encoding="utf-8")
    cb.env["FAKE_LLAMA"] = str(path)
    return path
