"""Loading a GGUF with llama-cpp-python so that it runs on every CPU.

On CPUs that report AMX in /proc/cpuinfo, llama.cpp's weight repacking picks a buffer type
whose decode crashes, so the model parameter `use_extra_bufts` is turned off there (wrapping
`llama_model_default_params` while a model loads: llama-cpp-python 0.3.36 has no keyword for
it); elsewhere the repack stays, as it is faster. A model may be given an abort callback
(the context parameter `abort_callback`, set the same way): llama.cpp calls it between the steps
of every evaluation, so a long prompt can be stopped inside native code. Everything that loads
a model goes through here, llama-cpp-python's own server too
(`python -m countbot_cli.provider.llama_load ARGS`).
Stdlib only until a model loads. docs/design/providers.md says more.
"""

from __future__ import annotations

import importlib
import sys
import threading
from collections.abc import Callable, Iterator
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
def model_params(cpuinfo: Path = CPUINFO, abort: Any = None) -> Iterator[bool]:
    """While inside, every model llama-cpp-python loads in this process gets the
    `use_extra_bufts` this CPU needs (yielded), and its context the `abort` callback
    (`abort_callback`'s) when one is given. Imports llama_cpp."""
    lowlevel: Any = importlib.import_module("llama_cpp.llama_cpp")
    extra = extra_buffer_types(cpuinfo)
    with _PATCH_LOCK:
        default = lowlevel.llama_model_default_params
        default_context = lowlevel.llama_context_default_params

        def params() -> Any:
            p = default()
            p.use_extra_bufts = extra
            return p

        def context_params() -> Any:
            p = default_context()
            p.abort_callback = abort
            return p

        lowlevel.llama_model_default_params = params
        if abort is not None:
            lowlevel.llama_context_default_params = context_params
        try:
            yield extra
        finally:
            lowlevel.llama_model_default_params = default
            lowlevel.llama_context_default_params = default_context


def abort_callback(stop: Callable[[], bool]) -> Any:
    """llama.cpp's abort callback for `stop` (True: the evaluation running now ends, and
    llama-cpp-python raises RuntimeError). Whoever loads models with it keeps it alive as long
    as they live: llama.cpp holds only its address."""
    lowlevel: Any = importlib.import_module("llama_cpp.llama_cpp")
    return lowlevel.ggml_abort_callback(lambda _data: bool(stop()))


def load_llama(
    path: str, n_ctx: int, *, cpuinfo: Path = CPUINFO, abort: Any = None, **kw: Any
) -> Any:
    """A `llama_cpp.Llama` for the GGUF at `path`, loaded the way that runs on this CPU
    (`abort`: an `abort_callback`)."""
    llama_cpp: Any = importlib.import_module("llama_cpp")
    with model_params(cpuinfo, abort):
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
