"""Model families and context windows: which tiktoken encoding a model uses, how many tokens
its context window holds (a table of known models; `context_window` in the config overrides).

Split out of tokens.py; tokens.py re-exports every name.
"""

from __future__ import annotations

O200K, CL100K = "o200k_base", "cl100k_base"

# ---- model families ----

_O200K_PREFIXES = (
    "gpt-5",
    "gpt-4.5",
    "gpt-4.1",
    "gpt-4o",
    "chatgpt-4o",
    "o1",
    "o3",
    "o4",
    "gpt-oss",
    "codex-",
)
_CL100K_OPENAI_PREFIXES = (
    "gpt-4",
    "gpt-3.5",
    "gpt-35",
    "text-embedding-",
    "davinci-002",
    "babbage-002",
)


def normalize_model(model: str) -> str:
    """Lower case, without an aggregator or path prefix (``openai/gpt-4o``) or ``ft:``."""
    name = model.strip().lower().replace("\\", "/").rsplit("/", 1)[-1]
    return name[3:] if name.startswith("ft:") else name


def encoding_for_model(model: str) -> str:
    """``o200k_base`` for gpt-4o/4.1/4.5/5, o-series, chatgpt-4o and gpt-oss; otherwise
    ``cl100k_base`` -- exact for gpt-4/gpt-3.5, and only an approximation for other families
    (DeepSeek, Qwen, Llama, GLM, Kimi ... have their own tokenizers; see ``calibrate``)."""
    return O200K if normalize_model(model).startswith(_O200K_PREFIXES) else CL100K


def is_openai_model(model: str) -> bool:
    """True when tiktoken has this model's own tokenizer (its counts need no calibration)."""
    return normalize_model(model).startswith(_O200K_PREFIXES + _CL100K_OPENAI_PREFIXES)


# ---- context windows ----

DEFAULT_CONTEXT_WINDOW = 8192
"""For unknown models whose server does not say: the bundled SmolLM2's own limit. A local
server's window is asked of it (conversation/server_window.py); ``context_window`` overrides."""

_K128, _K131 = 128_000, 131_072
CONTEXT_WINDOWS: dict[str, int] = {
    # OpenAI (developers.openai.com model pages)
    "gpt-5": 400_000,  # 5.4/5.5 may allow ~1.05M; 400k is the safe family figure
    "gpt-4.1": 1_047_576,
    **dict.fromkeys(("gpt-4o", "chatgpt-4o", "gpt-4.5", "gpt-4-turbo"), _K128),
    **dict.fromkeys(("gpt-4-1106", "gpt-4-0125", "o1-mini", "o1-preview"), _K128),
    **dict.fromkeys(("o1", "o3", "o4-mini"), 200_000),
    **{"gpt-4-32k": 32_768, "gpt-4": 8_192, "gpt-3.5-turbo": 16_385, "gpt-35-turbo": 16_385},
    "gpt-oss": _K131,
    # DeepSeek: 64K in early 2025, 128K since V3.1 (api-docs.deepseek.com)
    **dict.fromkeys(("deepseek-chat", "deepseek-reasoner", "deepseek-flash"), _K128),
    # Qwen on DashScope, conservative (the -latest aliases grew to ~1M); "qwen": self-hosted
    **{"qwen-max": 32_768, "qwen-plus": _K131, "qwen-turbo": _K131, "qwen": 32_768},
    **{"moonshot-v1-8k": 8_192, "moonshot-v1-32k": 32_768, "moonshot-v1-128k": _K131},
    "kimi-k2": 262_144,
    **{"glm-4": _K128, "glm-4.6": 200_000, "glm-4.7": 200_000, "glm-5": 200_000},
    # Llama: 3.0 had 8k, 3.1+ 128k
    **dict.fromkeys(("llama3", "llama-3"), 8_192),
    **dict.fromkeys(("llama3.1", "llama-3.1", "llama3.2", "llama-3.2"), _K131),
    **dict.fromkeys(("llama3.3", "llama-3.3"), _K131),
    "claude": 200_000,
    # the bundled local model: SmolLM2-135M-Instruct's config has max_position_embeddings 8192
    "smollm2": 8_192,
}
_CONTEXT_WINDOW_PREFIXES = sorted(CONTEXT_WINDOWS, key=len, reverse=True)


def context_window_for(model: str, configured: int | None = None) -> int:
    """The configured context window when set (> 0), else the longest matching prefix of
    CONTEXT_WINDOWS, else DEFAULT_CONTEXT_WINDOW."""
    if configured is not None and configured > 0:
        return configured
    known = known_context_window(model)
    return DEFAULT_CONTEXT_WINDOW if known is None else known


def known_context_window(model: str) -> int | None:
    """The context window of the longest matching prefix of CONTEXT_WINDOWS; None: a model countbot
    does not know (its server may tell: provider/context_window_probe.py)."""
    name = normalize_model(model)
    for prefix in _CONTEXT_WINDOW_PREFIXES:
        if name.startswith(prefix):
            return CONTEXT_WINDOWS[prefix]
    return None


# ---- images ----

# Whether a model family takes image input, by the longest matching prefix (True: it does,
# False: text only). Names with a vision marker take images whatever their family. A model in
# neither list is unknown: countbot lets it through and the provider answers (`vision:` on the
# provider entry settles it either way).
IMAGE_INPUT: dict[str, bool] = {
    # OpenAI: the gpt-4o/4.1/4.5/5 families and o1/o3/o4-mini take images
    **dict.fromkeys(("gpt-4o", "chatgpt-4o", "gpt-4.1", "gpt-4.5", "gpt-5", "gpt-4-turbo"), True),
    **dict.fromkeys(("o1", "o3", "o4-mini", "claude", "gemini", "pixtral", "llava"), True),
    # text only
    **dict.fromkeys(("gpt-4", "gpt-3.5", "gpt-35", "o1-mini", "o1-preview", "o3-mini"), False),
    **dict.fromkeys(
        ("gpt-oss", "codex-", "deepseek", "qwen-max", "qwen-plus", "qwen-turbo"), False
    ),
    **dict.fromkeys(("moonshot-v1", "kimi-k2", "glm-4", "llama3", "llama-3", "smollm"), False),
}
_VISION_MARKERS = ("vision", "-vl", "vl-", "llava", "pixtral", "glm-4v", "glm-4.5v", "minicpm-v")
_IMAGE_PREFIXES = sorted(IMAGE_INPUT, key=len, reverse=True)


def takes_images(model: str, configured: bool | None = None) -> bool | None:
    """The provider's `vision:` setting when set, else what the table knows of the model
    (True / False), else None: unknown."""
    if configured is not None:
        return configured
    name = normalize_model(model)
    if any(marker in name for marker in _VISION_MARKERS):
        return True
    for prefix in _IMAGE_PREFIXES:
        if name.startswith(prefix):
            return IMAGE_INPUT[prefix]
    return None
