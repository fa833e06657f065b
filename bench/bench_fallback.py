"""Benchmark of the fallback to the embedded model (issue 24 point 1): from the failure of the
provider to the first token of the embedded model's answer, cold and warm.

The configured provider is a loopback address nothing listens on (the connection is refused at
once, `max_retries: 0`), `fallback: [local]`, the real conversation (`app.build_conversation`)
with its session store, the bundled SmolLM2-135M in countbot's model process. Each run is a new
countbot process (this script with `--one`): its first turn is cold (the model process starts
and loads the model), the next turns are warm (the link is built, the model loaded). Measured
per turn: from the notice that the provider failed (the moment the chain moves on) to the first
text of the answer, and from sending the question to that first text.

Run: .venv/bin/python bench/bench_fallback.py [--runs 3] [--warm 4]
"""

from __future__ import annotations

import argparse
import json
import socket
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

QUESTIONS = ("Say hello.", "Name a colour.", "Name a fruit.", "Count to three.", "Say bye.")


def closed_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port: int = s.getsockname()[1]
    return port


def one(turns: int) -> list[dict[str, float]]:
    """One countbot process: `turns` questions, each answered by the embedded model."""
    from bench_prefix import load_config

    from countbot_cli import app
    from countbot_cli.conversation.view import SilentView

    class Timed(SilentView):
        def __init__(self) -> None:
            self.failed: float | None = None
            self.first: float | None = None

        def notice(self, text: str) -> None:
            if "answering with local" in text and self.failed is None:
                self.failed = time.perf_counter()

        def text(self, text: str) -> None:
            if text and self.first is None:
                self.first = time.perf_counter()

    with tempfile.TemporaryDirectory() as tmp:
        root = Path(tmp)
        base = f"http://127.0.0.1:{closed_port()}/v1"
        cfg = {
            "default_provider": "down",
            "providers": {
                "down": {"api_base": base, "api_key": "sk-x", "model": "m", "max_retries": 0}
            },
            "fallback": ["local"],
            "max_tokens": 16,
            "temperature": 0,
            "tools": {"enabled": False},
            "memory": {"inject": "off", "overflow_summary": False, "auto_memory": False},
        }
        settings = load_config(root, cfg)
        conversation = app.build_conversation(
            settings,
            app.make_store(settings),
            provider_for=app.make_provider,
            tools_enabled=False,
            yes=False,
        )
        out = []
        for k in range(turns):
            view = Timed()
            t0 = time.perf_counter()
            result = conversation.send(QUESTIONS[k % len(QUESTIONS)], view)
            assert result.status == "ok" and result.fallback, result.error
            assert view.failed is not None and view.first is not None
            out.append({"to_first": view.first - view.failed, "from_send": view.first - t0})
        conversation.close()
    return out


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--runs", type=int, default=3, help="countbot processes (cold starts)")
    ap.add_argument("--warm", type=int, default=4, help="warm turns after each cold one")
    ap.add_argument("--one", type=int, help=argparse.SUPPRESS)
    args = ap.parse_args()
    if args.one:
        print(json.dumps(one(args.one)))
        return 0
    cold, warm = [], []
    for _ in range(args.runs):
        done = subprocess.run(
            [sys.executable, __file__, "--one", str(1 + args.warm)],
            capture_output=True,
            text=True,
            check=True,
        )
        turns = json.loads(done.stdout.strip().splitlines()[-1])
        cold.append(turns[0])
        warm += turns[1:]

    def row(label: str, rows: list[dict[str, float]]) -> None:
        to_first = statistics.median(r["to_first"] for r in rows)
        from_send = statistics.median(r["from_send"] for r in rows)
        print(
            f"  {label:5} (n={len(rows):2}) failure -> first token {to_first:6.2f} s"
            f"   question -> first token {from_send:6.2f} s"
        )

    print("fallback to the embedded model (SmolLM2-135M, model process), median seconds:")
    row("cold", cold)
    row("warm", warm)
    return 0


if __name__ == "__main__":
    sys.exit(main())
