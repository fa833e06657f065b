"""What countbot's llama_load.model_params uses of llama_cpp.llama_cpp (the fake's)."""

from __future__ import annotations

import ctypes
from types import SimpleNamespace

ggml_abort_callback = ctypes.CFUNCTYPE(ctypes.c_bool, ctypes.c_void_p)


def llama_model_default_params() -> SimpleNamespace:
    return SimpleNamespace(use_extra_bufts=True)


def llama_context_default_params() -> SimpleNamespace:
    return SimpleNamespace(abort_callback=None)
