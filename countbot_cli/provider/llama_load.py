"""Loading a GGUF with llama-cpp-python so that it runs on every CPU (issue 18, point 1).

llama.cpp's CPU backend "repacks" weights into extra buffer types for faster kernels. On CPUs
that report AMX (`amx_tile`/`amx_int8`/`amx_bf16` in /proc/cpuinfo: Sapphire-Rapids-class Xeons)
it picks the AMX buffer type, and `llama_decode` then segfaults on the first multi-token batch
(ggml-org/llama.cpp#20824). The model parameter `use_extra_bufts = False` avoids that path; it
is not a `Llama()` keyword in llama-cpp-python 0.3.36, so `Llama.__init__`'s call of
`llama_model_default_params` is wrapped while a model loads.

The parameter is turned off only where the CPU reports AMX: elsewhere the repack is what makes
Q4_0/Q4_K/IQ4_NL models evaluate prompts faster (bench/bench_local.py measures it), and for
the bundled Q4_1 SmolLM2 it repacks nothing on a CPU without AMX.

Everything that loads a model goes through here: the embedded provider (provider/local.py)
and llama-cpp-python's own server as the e2e tier and bench start it (`python -m countbot_cli.provider.llama_load SERVER-ARGS...`). No llama_cpp import at
module level (it is heavy); this module is stdlib only until a model loads.
"""

from __future__ import annotations

import importlib
import sys
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

CPUINFO = Path("/proc/cpuinfo")
AMX_FLAGS = frozenset({"amx_tile", "amx_int8", "amx_bf16"})
_PATCH_LOCK = threading.Lock()  # one wrapped default-params function at a time


def cpu_reports_amx(cpuinfo: Path = CPUINFO) -> bool:
    """Whether the CPU's flags (the first `flags` line of /proc/cpuinfo) include AMX."""
    try:
        text = cpuinfo.read_text(encoding="utf-8", errors="replace")
    except OSError:  # not Linux, or /proc not mounted: no AMX repack to avoid that we know of
        return False
    for line in text.splitlines():
        key, _, value = line.partition(":")
        if key.strip() == "flags":
            return not AMX_FLAGS.isdisjoint(value.split())
    return False


def extra_buffer_types(cpuinfo: Path = CPUINFO) -> bool:
    """The `use_extra_bufts` model parameter for this CPU: off where AMX would be used."""
    return not cpu_reports_amx(cpuinfo)


@contextmanager
def model_params(cpuinfo: Path = CPUINFO) -> Iterator[bool]:
    """While inside, every model llama-cpp-python loads in this process gets the
    `use_extra_bufts` this CPU needs (yielded). Imports llama_cpp."""
    lowlevel: Any = importlib.import_module("llama_cpp.llama_cpp")
    extra = extra_buffer_types(cpuinfo)
    with _PATCH_LOCK:
        default = lowlevel.llama_model_default_params

        def params() -> Any:
            p = default()
            p.use_extra_bufts = extra
            return p

        lowlevel.llama_model_default_params = params
        try:
            yield extra
        finally:
            lowlevel.llama_model_default_params = default


def load_llama(path: str, n_ctx: int, *, cpuinfo: Path = CPUINFO, **kw: Any) -> Any:
    """A `llama_cpp.Llama` for the GGUF at `path`, loaded the way that runs on this CPU."""
    llama_cpp: Any = importlib.import_module("llama_cpp")
    with model_params(cpuinfo):
        return llama_cpp.Llama(model_path=path, n_ctx=n_ctx, verbose=False, **kw)


def serve(argv: list[str], cpuinfo: Path = CPUINFO) -> None:
    """llama-cpp-python's OpenAI-compatible server (`python -m llama_cpp.server ARGV`), its
    model loaded the same way."""
    server: Any = importlib.import_module("llama_cpp.server.__main__")
    sys.argv = ["llama_cpp.server", *argv]
    with model_params(cpuinfo):
        server.main()


if __name__ == "__main__":
    serve(sys.argv[1:])
