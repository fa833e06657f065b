"""The encodings countbot builds offline (conversation/encodings.py) against stock tiktoken's
`get_encoding`: the same token ids and counts on a mixed English/Chinese/code corpus, with no
network and no cache folder; tiktoken's own patterns, file hashes and special tokens."""

from __future__ import annotations

import json
import os
import random
import subprocess
import sys
from pathlib import Path

import pytest
import tiktoken
from bpe_files import bpe_bytes, seed_cache

from countbot_cli.conversation import encodings
from countbot_cli.conversation.tokens import CL100K, O200K, EncodingLoader, TokenCounter

ROOT = Path(__file__).resolve().parents[2]

MIXED_CORPUS = [
    "The quick brown fox jumps over the lazy dog, twice: once at 09:41 and again at 17:05.",
    "Résumé of the naïve café's coöperative — “quoted”, ‘single’, and … ellipses.",
    "I'M SURE they'll say it's the user's: WE'VE seen THAT'S how 'd and 'LL split.",
    "上下文窗口的大小决定了模型一次能读多少内容；超过以后，最早的消息会被裁掉。",
    "我们在北京、上海和深圳各有一个办公室，周一到周五上午九点开门。",
    "混合 mixed 文本 with English words 和中文标点，还有数字 12345 与 emoji 🙂🚀。",
    "def fib(n: int) -> int:\n    return n if n < 2 else fib(n - 1) + fib(n - 2)\n",
    'fn main() {\n    let v: Vec<u32> = (0..10).map(|x| x * x).collect();\n    println!("{:?}", v);\n}\n',
    "SELECT id, name FROM users WHERE created_at > '2026-01-01' ORDER BY name LIMIT 10;",
    "for (let i = 0; i < arr.length; i++) { if (arr[i] === undefined) continue; sum += arr[i]; }",
    "    \t  indented\twith\ttabs   and    runs of     spaces\n\n\n   \r\n\r\n  trailing  ",
    "https://example.com/path?query=value&other=%E4%B8%AD#fragment <|endoftext|> 0xDEADBEEF",
    "Ünïcödé ΑΒΓ δέλτα Кириллица ひらがなカタカナ 한국어 עברית العربية हिन्दी ๑๒๓ ½ ² ℃",
]


def corpus() -> list[str]:
    """The mixed corpus, this repository's English docs and Python code, long runs that only
    merge byte by byte (a Chinese paragraph without punctuation, one repeated letter), and
    seeded random mixes of every script above with digits, quotes and whitespace."""
    texts = [*MIXED_CORPUS, "\n".join(MIXED_CORPUS) * 3]
    for rel in ("README.md", "docs/ARCHITECTURE.md", "countbot_cli/conversation/tokens.py"):
        texts.append((ROOT / rel).read_text(encoding="utf-8"))
    chinese = "".join(t for t in MIXED_CORPUS[3:5]).translate({ord(c): None for c in "，。；、"})
    texts += [chinese * 40, "q" * 3000, "ab" * 1500 + "x"]
    alphabet = "".join(MIXED_CORPUS) + "''''\"\"  \n\n\t\r0123456789"
    rnd = random.Random(25)
    texts += ["".join(rnd.choice(alphabet) for _ in range(2000)) for _ in range(8)]
    return texts


def tiktokens(cache: Path, name: str, texts: list[str]) -> list[list[int]]:
    """Stock tiktoken's ids for ``texts``, reading the same BPE file from its download cache."""
    seed_cache(cache, name)
    code = (
        "import json, sys, tiktoken\n"
        "enc = tiktoken.get_encoding(sys.argv[1])\n"
        "print(json.dumps([enc.encode_ordinary(t) for t in json.loads(sys.stdin.read())]))\n"
    )
    out = subprocess.run(
        [sys.executable, "-c", code, name],
        input=json.dumps(texts),
        capture_output=True,
        text=True,
        env={**os.environ, "TIKTOKEN_CACHE_DIR": str(cache)},
        check=True,
    )
    ids: list[list[int]] = json.loads(out.stdout)
    return ids


@pytest.mark.parametrize("name", [O200K, CL100K])
def test_counts_equal_tiktokens_on_a_mixed_corpus_offline_and_without_a_cache(
    tmp_path: Path, name: str, no_network: list[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    """The encoding countbot builds from the package's file, with the network refused and no
    cache folder, gives stock tiktoken's ids and counts on English, Chinese and code, text by
    text, through the token counter too; nothing is written where tiktoken caches."""
    texts = corpus()
    expected = tiktokens(tmp_path / "oracle", name, texts)
    no_cache = tmp_path / "no-cache"
    monkeypatch.setenv("TIKTOKEN_CACHE_DIR", str(no_cache))
    loader = EncodingLoader()
    enc = loader.load(name)
    assert isinstance(enc, tiktoken.Encoding) and loader.source(name) == "package"
    assert [enc.encode_ordinary(t) for t in texts] == expected
    counter = TokenCounter("gpt-4o" if name == O200K else "gpt-4", loader=loader)
    assert counter.exact
    assert [counter.count_text(t) for t in texts] == [len(ids) for ids in expected]
    assert no_network == [] and not no_cache.exists()


def test_the_patterns_file_hashes_and_special_tokens_are_tiktokens() -> None:
    """encodings.ENCODINGS holds what tiktoken_ext.openai_public builds each encoding from
    (its constructors would download the file: their loader is swapped for one that records)."""
    from tiktoken_ext import openai_public

    seen: dict[str, str | None] = {}

    def load(url: str, expected_hash: str | None = None) -> dict[bytes, int]:
        seen["hash"] = expected_hash
        return {}

    for name, (pattern, sha256, special) in encodings.ENCODINGS.items():
        ctor = openai_public.ENCODING_CONSTRUCTORS[name]
        original = ctor.__globals__["load_tiktoken_bpe"]
        ctor.__globals__["load_tiktoken_bpe"] = load
        try:
            params = ctor()
        finally:
            ctor.__globals__["load_tiktoken_bpe"] = original
        ours = (pattern, sha256, special)
        assert (params["pat_str"], seen["hash"], params["special_tokens"]) == ours, name


def test_a_file_that_is_not_tiktokens_is_refused() -> None:
    data = bpe_bytes(CL100K)
    with pytest.raises(encodings.BadBPEFile, match="sha256"):
        encodings.build(CL100K, data.replace(b"IQ== 0", b"Ig== 0", 1))
    with pytest.raises(encodings.BadBPEFile, match="not an encoding"):
        encodings.build("p50k_base", data)
