"""Where a streamed answer's CPU goes on a real pty, layer by layer (issue 25 point 4).

`bench_render.py --pty` gives one figure a client; in process (`bench_stream.py`,
`bench_frames.py`) each layer is measured with warm caches, which a real terminal does not have:
between two reads the process sleeps and its caches go cold, so a read costs several times what
it costs in a loop. This runs `countbot ask --no-save hi` (and `--plain`) on the pty bench's
loopback server and terminal (pty_stream.py) with probes around each layer, thread CPU time
(`time.thread_time`) summed by name, and prints them: the CPU used before the first body read
(start-up, the request), each socket read (httpcore's network stream), the CPU spent inside a
pacing sleep (the kernel's), the decoding of a read's events, the view's handling of each delta
(with the frames and settled blocks it draws), the frames the stall waiter draws, the settled
blocks, and the collector's runs. The probes cost a few microseconds each (two clock reads), so
totals are a little above `bench_render.py --pty`'s.

The probes patch countbot's functions by name (provider.pacing.paced, provider.openai_compat.
_read_events, ui.turnview's views, ui.stream.StreamView, ui.stallredraw): a checkout without one
of them is measured without that probe.

Run: python bench/pty_profile.py [TOKENS] [--countbot PATH] [--chunked]
     (PATH: a countbot console script; its venv's python runs the probes)
"""

from __future__ import annotations

import sys
import tempfile
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path[:0] = [str(HERE), str(HERE.parent / "tests" / "helpers")]  # gen_doc
RATE = 100.0  # tokens a second, as bench_render.py streams them

SHIM = """
import sys
sys.path.insert(0, {here!r})
out = sys.argv.pop(1)
sys.argv[0] = "countbot"
import pty_profile
from countbot_cli.__main__ import entry
pty_profile.install(out)
sys.exit(entry())
"""


def install(out: str) -> None:
    """In the client: put the probes in and write the sums to `out` at exit."""
    import atexit
    import collections
    import functools
    import gc
    import importlib
    import time
    from typing import Any

    sums: dict[str, list[float]] = collections.defaultdict(lambda: [0, 0.0])
    marks: dict[str, float] = {}

    def add(name: str, started: float) -> None:
        entry = sums[name]
        entry[0] += 1
        entry[1] += time.thread_time() - started

    def probe(name: str, fn: Any) -> Any:
        @functools.wraps(fn)
        def wrapper(*args: Any, **kwargs: Any) -> Any:
            started = time.thread_time()
            try:
                return fn(*args, **kwargs)
            finally:
                add(name, started)

        return wrapper

    def patch(module: str, owner: str | None, name: str, label: str) -> None:
        try:
            mod = importlib.import_module(module)
            target = getattr(mod, owner) if owner else mod
            setattr(target, name, probe(label, getattr(target, name)))
        except (ImportError, AttributeError):
            pass

    try:
        from countbot_cli.provider import pacing

        real_paced = pacing.paced

        def paced(read: Any, *args: Any, **kwargs: Any) -> Any:
            marks.setdefault("CPU before the first paced read", time.process_time())
            kwargs["sleep"] = probe("inside pacing sleeps (kernel)", time.sleep)
            if kwargs.get("wait") is not None:
                kwargs["wait"] = probe("inside waits for bytes (kernel)", kwargs["wait"])
            return real_paced(probe("socket reads (httpcore)", read), *args, **kwargs)

        pacing.paced = paced
    except (ImportError, AttributeError):
        pass
    try:
        from countbot_cli.provider.openai_compat import OpenAICompatProvider

        real_decode = OpenAICompatProvider._decode_stream

        def decode(self: Any, *args: Any, **kwargs: Any) -> Any:
            done = yield from real_decode(self, *args, **kwargs)
            marks["CPU at the answer's end"] = time.process_time()
            return done

        OpenAICompatProvider._decode_stream = decode  # type: ignore[method-assign]
    except (ImportError, AttributeError):
        pass
    patch("countbot_cli.provider.openai_compat", None, "_read_events", "decode a read's events")
    patch("countbot_cli.ui.turnview", "MarkdownView", "text", "MarkdownView.text (frames too)")
    patch("countbot_cli.ui.turnview", "PlainView", "text", "PlainView.text")
    patch("countbot_cli.ui.stream", "StreamView", "_settle", "settled blocks")
    patch("countbot_cli.ui.stream", "StreamView", "_show", "frames and settles drawn")
    patch("countbot_cli.ui.stream", "StreamView", "refresh", "frames the stall waiter drew")

    started = {"gc": 0.0}

    def collected(phase: str, info: dict[str, Any]) -> None:
        if phase == "start":
            started["gc"] = time.thread_time()
        else:
            add("collector runs", started["gc"])

    gc.callbacks.append(collected)

    def report() -> None:
        with open(out, "w", encoding="utf-8") as f:
            f.write(f"{'CPU of the whole process':34} {time.process_time() * 1e3:9.1f} ms\n")
            for name, at in marks.items():
                f.write(f"{name:34} {at * 1e3:9.1f} ms\n")
            for name, (n, total) in sorted(sums.items(), key=lambda kv: -kv[1][1]):
                each = total / max(n, 1) * 1e6
                f.write(f"{name:34} {total * 1e3:9.1f} ms  {int(n):5d} x {each:7.1f} us\n")

    atexit.register(report)


def main() -> None:
    import pty_stream
    from gen_doc import make_doc, token_chunks, token_counter

    argv = sys.argv[1:]
    tokens = next((int(a) for a in argv if a.isdigit()), 2000)
    path = argv[argv.index("--countbot") + 1] if "--countbot" in argv else None
    script = Path(path) if path else Path(sys.executable).parent / "countbot"
    python = script.read_text().splitlines()[0].removeprefix("#!").strip()
    tmp = Path(tempfile.mkdtemp(prefix="cb-profile-"))
    shim = SHIM.format(here=str(HERE))
    clients = []
    for label, extra in (("rendered", []), ("--plain", ["--plain"])):
        out = str(tmp / f"{label.strip('-')}.txt")
        clients.append((label, [python, "-c", shim, out, "ask", *extra, "--no-save", "hi"]))
    chunks = token_chunks(make_doc(tokens, 1, token_counter()))  # bench_render.py's answer
    pty_stream.run(clients, chunks, RATE, 1, chunked="--chunked" in argv)
    for label, cmd in clients:
        print(f"\n# {label}: thread CPU by probe")
        report = Path(cmd[3])
        print(report.read_text().rstrip() if report.exists() else "(no report)")


if __name__ == "__main__":
    main()
