"""What countbot's llama_load.model_params uses of llama_cpp.llama_cpp (the fake's)."""

from __future__ import annotations

from types import SimpleNamespace


def llama_model_default_params() -> SimpleNamespace:
    return SimpleNamespace(use_extra_bufts=True)
