"""The compact encoding (conversation/bpe.py) against stock tiktoken: the same token ids and
counts on a mixed English/Chinese/code corpus, tiktoken's own patterns and file hashes, and no
table beside the three flat arrays (issue 25 point 1)."""

from __future__ import annotations

import json
import os
import random
import subprocess
import sys
from pathlib import Path

import pytest
from bpe_files import bpe_bytes, seed_cache

from countbot_cli.conversation import bpe
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
    for rel in ("README.md", "docs/ARCHITECTURE.md", "countbot_cli/conversation/bpe.py"):
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
def test_counts_from_the_compact_encoding_equal_tiktokens_on_a_mixed_corpus(
    tmp_path: Path, name: str
) -> None:
    """What countbot loads is the compact encoding, not tiktoken's, and it gives tiktoken's
    ids and counts on English, Chinese and code, text by text, through the token counter too."""
    texts = corpus()
    expected = tiktokens(tmp_path / "cache", name, texts)
    loader = EncodingLoader(cache_dir=tmp_path / "none")  # the package's data, built by countbot
    enc = loader.load(name)
    assert isinstance(enc, bpe.CompactBPE) and loader.source(name) == "package"
    assert [enc.encode_ordinary(t) for t in texts] == expected
    assert [enc.count(t) for t in texts] == [len(ids) for ids in expected]
    counter = TokenCounter("gpt-4o" if name == O200K else "gpt-4", loader=loader)
    assert counter.exact
    assert [counter.count_text(t) for t in texts] == [len(ids) for ids in expected]


def test_the_patterns_and_file_hashes_are_tiktokens() -> None:
    """bpe.ENCODINGS copies tiktoken_ext.openai_public (countbot does not import tiktoken)."""
    from tiktoken_ext import openai_public

    seen: dict[str, str | None] = {}

    def load(url: str, expected_hash: str | None = None) -> dict[bytes, int]:
        seen["hash"] = expected_hash
        return {}

    for name, (pattern, sha256) in bpe.ENCODINGS.items():
        ctor = openai_public.ENCODING_CONSTRUCTORS[name]
        original = ctor.__globals__["load_tiktoken_bpe"]
        ctor.__globals__["load_tiktoken_bpe"] = load
        try:
            params = ctor()
        finally:
            ctor.__globals__["load_tiktoken_bpe"] = original
        assert (params["pat_str"], seen["hash"]) == (pattern, sha256), name


def test_the_tables_are_flat_arrays_of_a_few_megabytes() -> None:
    """o200k in one bytes blob, its starts and a crc32 table: no Python object per token."""
    enc = bpe.from_bpe_file(O200K, bpe_bytes(O200K))
    assert enc.n_vocab == 199_998
    arrays = (enc._blob, enc._starts, enc._table)
    assert [type(a).__name__ for a in arrays] == ["bytes", "array", "array"]
    assert sum(len(a) * getattr(a, "itemsize", 1) for a in arrays) < 5 * 2**20
    assert enc.rank(b"hello") == 24912 and enc.rank(b"not-a-token-at-all") > enc.n_vocab


def test_a_file_that_is_not_tiktokens_is_refused() -> None:
    data = bpe_bytes(CL100K)
    with pytest.raises(bpe.BadBPEFile, match="sha256"):
        bpe.from_bpe_file(CL100K, data.replace(b"IQ== 0", b"Ig== 0", 1))
    with pytest.raises(bpe.BadBPEFile, match="not an encoding"):
        bpe.from_bpe_file("p50k_base", data)
