"""The AMX crash fix asserted on any CPU: with a /proc/cpuinfo that reports
AMX, the embedded model's loader and llama-cpp-python's server under countbot's launcher load
the real bundled GGUF with `use_extra_bufts = False`; without AMX they keep the repack."""

from __future__ import annotations

import importlib
from pathlib import Path
from typing import Any

import pytest
from local_extra import needs_local

from countbot_cli.provider import llama_load
from countbot_cli.provider.local import LOCAL_HINT, bundled_model_path

# the first lines of /proc/cpuinfo on a Sapphire Rapids Xeon (where the repack crashes) and on
# a CPU without AMX; only the flags matter
FLAGS = "fpu vme de pse tsc msr sse sse2 avx avx2 avx512f avx512bw avx512_vnni"
AMX_CPU = (
    "processor\t: 0\nmodel name\t: Intel Xeon Platinum 8488C\n"
    f"flags\t\t: {FLAGS} amx_bf16 amx_tile amx_int8\n"
)
PLAIN_CPU = f"processor\t: 0\nmodel name\t: AMD EPYC\nflags\t\t: {FLAGS}\n"


@pytest.fixture
def gguf() -> str:
    path = bundled_model_path()
    if path is None:
        pytest.fail(f"the bundled SmolLM2 GGUF is not installed: {LOCAL_HINT}")
    return path


@pytest.fixture
def amx(tmp_path: Path) -> Path:
    path = tmp_path / "cpuinfo-amx"
    path.write_text(AMX_CPU)
    return path


@pytest.fixture
def plain(tmp_path: Path) -> Path:
    path = tmp_path / "cpuinfo"
    path.write_text(PLAIN_CPU)
    return path


def test_amx_is_read_from_the_cpu_flags(amx: Path, plain: Path, tmp_path: Path) -> None:
    assert llama_load.cpu_reports_amx(amx) is True
    assert llama_load.cpu_reports_amx(plain) is False
    assert llama_load.cpu_reports_amx(tmp_path / "missing") is False
    one = tmp_path / "one-flag"
    one.write_text(f"flags\t: {FLAGS} amx_tile\n")  # any AMX flag is enough
    assert llama_load.cpu_reports_amx(one) is True
    named = tmp_path / "named"  # "amx" in another line (a model name) is not a flag
    named.write_text(f"model name\t: amx_tile\nflags\t: {FLAGS}\n")
    assert llama_load.cpu_reports_amx(named) is False


@needs_local
def test_the_loader_asks_for_no_extra_buffer_types_on_a_cpu_reporting_amx(
    gguf: str, amx: Path, plain: Path
) -> None:
    llm = llama_load.load_llama(gguf, 256, cpuinfo=amx)
    try:
        assert llm.model_params.use_extra_bufts is False
    finally:
        llm.close()
    llm = llama_load.load_llama(gguf, 256, cpuinfo=plain)  # the repack is kept elsewhere
    try:
        assert llm.model_params.use_extra_bufts is True
    finally:
        llm.close()
    # and nothing stays wrapped for other code loading models in this process
    lowlevel: Any = importlib.import_module("llama_cpp.llama_cpp")
    assert lowlevel.llama_model_default_params().use_extra_bufts is True


@needs_local
def test_the_e2e_server_launcher_loads_the_model_without_extra_buffer_types(
    gguf: str, amx: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """`python -m countbot_cli.provider.llama_load ARGS` runs llama_cpp.server's main; the model
    it loads (with the server's own loading code) gets the parameter."""
    server: Any = importlib.import_module("llama_cpp.server.__main__")
    from llama_cpp.server.model import LlamaProxy
    from llama_cpp.server.settings import ModelSettings

    seen: dict[str, Any] = {}

    def main() -> None:  # what the server's main does before it serves: load the model
        proxy = LlamaProxy([ModelSettings(model=gguf, n_ctx=256, verbose=False)])
        llm = proxy()
        seen["extra"] = llm.model_params.use_extra_bufts
        seen["argv"] = list(server.sys.argv)
        llm.close()

    monkeypatch.setattr(server, "main", main)
    monkeypatch.setattr(server.sys, "argv", list(server.sys.argv))
    llama_load.serve(["--model", gguf], cpuinfo=amx)
    assert seen == {"extra": False, "argv": ["llama_cpp.server", "--model", gguf]}
