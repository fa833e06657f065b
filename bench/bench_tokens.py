"""Exact token counting (o200k_base) of long texts: this tree's tokenizer against another tree's.

Each measurement runs in a fresh process: it loads the encoding the way countbot does (the
process-wide loader), then counts the whole text exactly, with the tokenizer itself (not the
TokenCounter, which estimates a text over 256 Ki characters from samples). Printed per text:
the load's and the count's CPU seconds and the process's peak RSS, medians over the rounds,
and with --against DIR the ratio this tree / DIR from the same interleaved rounds (a round
alternates who goes first). DIR is another checkout with its own .venv (e.g. a worktree of an
older commit, whose tokenizer may be countbot's own BPE: its `count` is used when it has one).

Texts: 1 MB of mixed English prose, Chinese and code (this repository's docs and sources
and a Chinese paragraph, in turn), the same as one 10 MB line (line breaks made spaces), and
with --letters a 1 MB run of one letter (BPE's worst case: it merges byte by byte).

Usage: python bench/bench_tokens.py [-n ROUNDS] [--against DIR] [--letters]
"""

from __future__ import annotations

import argparse
import json
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
CHINESE = (
    "上下文窗口的大小决定了模型一次能读多少内容；超过以后，最早的消息会被裁掉。"
    "我们在北京、上海和深圳各有一个办公室，周一到周五上午九点开门。"
)
CHILD = """
import json, resource, sys, time
from countbot_cli.conversation import tokens
text = open(sys.argv[1], encoding="utf-8").read()
cpu = time.process_time()
enc = tokens.DEFAULT_LOADER.load("o200k_base")
loaded = time.process_time()
count = getattr(enc, "count", None) or (lambda t: len(enc.encode_ordinary(t)))
n = count(text)
done = time.process_time()
peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
print(json.dumps({"load": loaded - cpu, "count": done - loaded, "rss": peak, "tokens": n,
                  "tokenizer": type(enc).__module__}))
"""


def mixed(size: int) -> str:
    parts = [
        (ROOT / "docs" / "ARCHITECTURE.md").read_text("utf-8"),
        CHINESE * 40,
        (ROOT / "countbot_cli" / "conversation" / "tokens.py").read_text("utf-8"),
        (ROOT / "countbot_cli" / "provider" / "openai_compat.py").read_text("utf-8"),
    ]
    out: list[str] = []
    length = 0
    while length < size:
        for part in parts:
            out.append(part)
            length += len(part.encode("utf-8"))
    return "".join(out).encode("utf-8")[:size].decode("utf-8", errors="ignore")


def run(python: Path, path: Path) -> dict[str, float]:
    out = subprocess.run(  # run from the text's folder: `-c` puts the cwd first on sys.path
        [str(python), "-c", CHILD, str(path)],
        capture_output=True,
        text=True,
        check=True,
        cwd=path.parent,
    )
    result: dict[str, float] = json.loads(out.stdout)
    return result


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("-n", type=int, default=3, help="rounds")
    parser.add_argument("--against", type=Path, help="another checkout with its own .venv")
    parser.add_argument("--letters", action="store_true", help="also a 1 MB run of one letter")
    args = parser.parse_args()
    trees = {"this tree": Path(sys.executable)}
    if args.against:
        trees["against"] = args.against / ".venv" / "bin" / "python"
    texts = {"1 MB mixed": mixed(1 << 20)}
    texts["10 MB line"] = (mixed(1 << 20).replace("\n", " ").replace("\r", " ")) * 10
    if args.letters:
        texts["1 MB letters"] = "z" * (1 << 20)
    with tempfile.TemporaryDirectory() as tmp:
        files = {}
        for name, text in texts.items():
            files[name] = Path(tmp) / f"{len(files)}.txt"
            files[name].write_text(text, encoding="utf-8")
        results: dict[tuple[str, str], list[dict[str, float]]] = {}
        for r in range(args.n):
            for name, path in files.items():
                order = list(trees.items())
                for tree, python in order[::-1] if r % 2 else order:
                    results.setdefault((tree, name), []).append(run(python, path))
    for tree in trees:
        print(f"{tree}: {results[(tree, next(iter(texts)))][0]['tokenizer']}")
    print(f"{'text':14} {'tree':10} {'load s':>7} {'count s':>8} {'peak MiB':>9} {'tokens':>9}")
    for name in texts:
        medians = {}
        for tree in trees:
            runs = results[(tree, name)]
            m = {k: statistics.median(x[k] for x in runs) for k in ("load", "count", "rss")}
            medians[tree] = m
            tokens = runs[0]["tokens"]
            print(
                f"{name:14} {tree:10} {m['load']:7.2f} {m['count']:8.2f} {m['rss']:9.1f} {tokens:9.0f}"
            )
        if "against" in medians:
            a, b = medians["this tree"], medians["against"]
            print(
                f"{'':14} {'ratio':10} {a['load'] / b['load']:7.2f} {a['count'] / b['count']:8.2f}"
                f" {a['rss'] / b['rss']:9.2f}   (this tree / against)"
            )


if __name__ == "__main__":
    main()
