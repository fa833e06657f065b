"""`CompactBPE`: an OpenAI BPE encoding (o200k_base, cl100k_base) held in three flat arrays,
counting exactly as tiktoken's ``encode_ordinary`` does (issue 25 point 1).

tiktoken's Rust core keeps every token three times in hash maps of small heap buffers: 47 MB
for o200k, 26 MB for cl100k, on top of the 29 MB Python table it is built from. Here the tokens
are one ``bytes`` blob in rank order, an ``array`` of where each starts, and an open-addressing
table of ``crc32(token) -> rank + 1`` (o200k: 1.3 + 0.8 + 2 MB), built from the BPE file in
one pass without a Python object per token.

Encoding is tiktoken's: the text is split by the encoding's pattern (the `regex` module, which
has the ``\\p{…}`` classes and possessive quantifiers its patterns use), a piece that is a token
is one token, any other piece is merged from its bytes by always merging the adjacent pair of
lowest rank, the leftmost of equals (tiktoken's ``_byte_pair_merge``; here with a heap, so a
long piece costs n log n). Special tokens are text, as in ``encode_ordinary``. The patterns and
the files' sha256 are tiktoken's own (``tiktoken_ext.openai_public``; a test keeps them equal).
"""

from __future__ import annotations

import base64
import hashlib
import heapq
import io
from array import array
from itertools import pairwise
from typing import TYPE_CHECKING, Any
from zlib import crc32

from countbot_cli.provider.model_limits import CL100K, O200K

if TYPE_CHECKING:
    from collections.abc import Iterator

_O200K_PAT = "|".join(
    [
        r"""[^\r\n\p{L}\p{N}]?[\p{Lu}\p{Lt}\p{Lm}\p{Lo}\p{M}]*[\p{Ll}\p{Lm}\p{Lo}\p{M}]+(?i:'s|'t|'re|'ve|'m|'ll|'d)?""",
        r"""[^\r\n\p{L}\p{N}]?[\p{Lu}\p{Lt}\p{Lm}\p{Lo}\p{M}]+[\p{Ll}\p{Lm}\p{Lo}\p{M}]*(?i:'s|'t|'re|'ve|'m|'ll|'d)?""",
        r"""\p{N}{1,3}""",
        r""" ?[^\s\p{L}\p{N}]+[\r\n/]*""",
        r"""\s*[\r\n]+""",
        r"""\s+(?!\S)""",
        r"""\s+""",
    ]
)
_CL100K_PAT = (
    r"""'(?i:[sdmt]|ll|ve|re)|[^\r\n\p{L}\p{N}]?+\p{L}++|\p{N}{1,3}+| ?[^\s\p{L}\p{N}]++[\r\n]*+"""
    r"""|\s++$|\s*[\r\n]|\s+(?!\S)|\s"""
)

# name -> (pre-tokenizer pattern, sha256 of the .tiktoken file), as tiktoken_ext.openai_public
ENCODINGS: dict[str, tuple[str, str]] = {
    O200K: (_O200K_PAT, "446a9538cb6c348e3516120d7c08b09f57c36495e2acfffe59a5bf8b0cfb1a2d"),
    CL100K: (_CL100K_PAT, "223921b76ee99bde995b7ff738513eef100fb51d18c93597a113bcffe865b2a7"),
}

_ABSENT = 1 << 62  # the rank of a byte string that is not a token: above every real one
_PIECE_CACHE_MAX = 32_768  # pieces whose count is remembered (a few MB at most)
_PIECE_CACHE_CHARS = 64


class BadBPEFile(ValueError):
    """The BPE data is not the file tiktoken expects (sha256), or not in its format."""


class CompactBPE:
    """One encoding: ``count`` and ``encode_ordinary`` as tiktoken's ``Encoding`` gives them."""

    def __init__(self, name: str, blob: bytes, starts: array[int], table: array[int]) -> None:
        import regex

        self.name = name
        self._blob = blob
        self._starts = starts  # token r is blob[starts[r]:starts[r + 1]]
        self._table = table  # crc32 slot -> rank + 1 (0: empty); linear probing
        self._mask = len(table) - 1
        self._pattern: Any = regex.compile(ENCODINGS[name][0])
        self._pieces: dict[str, int] = {}

    @property
    def n_vocab(self) -> int:
        return len(self._starts) - 1

    # ---- lookup ----

    def rank(self, token: bytes) -> int:
        """The rank of ``token``, or a number above every rank when it is not one."""
        table, starts, blob, mask = self._table, self._starts, self._blob, self._mask
        slot = crc32(token) & mask
        size = len(token)
        while True:
            entry = table[slot]
            if not entry:
                return _ABSENT
            start = starts[entry - 1]
            if starts[entry] - start == size and blob.startswith(token, start):
                return entry - 1
            slot = (slot + 1) & mask

    # ---- encoding ----

    def count(self, text: str) -> int:
        """How many tokens ``encode_ordinary(text)`` has (each piece's count remembered)."""
        known = self._pieces
        total = 0
        for piece in self._pattern.findall(text):
            n = known.get(piece)
            if n is None:
                n = len(self._parts(piece.encode("utf-8"))) - 1
                if len(known) >= _PIECE_CACHE_MAX:
                    known.clear()
                if len(piece) <= _PIECE_CACHE_CHARS:  # a long run is rare: not kept
                    known[piece] = n
            total += n
        return total

    def encode_ordinary(self, text: str) -> list[int]:
        """The token ids of ``text``, special tokens read as plain text."""
        out: list[int] = []
        for piece in self._pattern.findall(text):
            raw = piece.encode("utf-8")
            bounds = self._parts(raw)
            out.extend(self.rank(raw[a:b]) for a, b in pairwise(bounds))
        return out

    encode = encode_ordinary  # what tiktoken's encode gives for text without special tokens

    def _parts(self, piece: bytes) -> list[int]:
        """The start of each token of ``piece``, then its length: tiktoken's merge order."""
        n = len(piece)
        if n < 2 or self.rank(piece) != _ABSENT:
            return [0, n]
        rank = self.rank
        nxt = list(range(1, n + 1))  # the start of the part after the part starting at i
        prv = list(range(-1, n - 1))
        pair = [rank(piece[i : i + 2]) for i in range(n - 1)] + [_ABSENT]  # part i + its next
        heap = [(r, i) for i, r in enumerate(pair) if r != _ABSENT]
        heapq.heapify(heap)
        while heap:
            r, i = heapq.heappop(heap)
            if pair[i] != r:  # merged away, or its pair changed since: a stale entry
                continue
            gone = nxt[i]
            after = nxt[gone]
            nxt[i] = after
            if after < n:
                prv[after] = i
            pair[gone] = -1
            pair[i] = rank(piece[i : nxt[after]]) if after < n else _ABSENT
            if pair[i] != _ABSENT:
                heapq.heappush(heap, (pair[i], i))
            before = prv[i]
            if before >= 0:
                pair[before] = rank(piece[before:after])
                if pair[before] != _ABSENT:
                    heapq.heappush(heap, (pair[before], before))
        bounds = [0]
        while bounds[-1] < n:
            bounds.append(nxt[bounds[-1]])
        return bounds


def from_bpe_file(name: str, data: bytes) -> CompactBPE:
    """The encoding ``name`` from a ``.tiktoken`` file's bytes (``base64 rank`` lines, ranks
    0, 1, 2, ...): BadBPEFile unless it is the very file tiktoken expects."""
    if name not in ENCODINGS:
        raise BadBPEFile(f"{name}: not an encoding countbot knows")
    if hashlib.sha256(data).hexdigest() != ENCODINGS[name][1]:
        raise BadBPEFile(f"{name}: sha256 differs from tiktoken's")
    blob = bytearray()
    starts = array("I", [0])
    for rank, token in enumerate(_tokens(data)):
        if rank != token[1]:
            raise BadBPEFile(f"{name}: ranks out of order at {rank}")
        blob += token[0]
        starts.append(len(blob))
    table = _table(bytes(blob), starts)
    return CompactBPE(name, bytes(blob), starts, table)


def _tokens(data: bytes) -> Iterator[tuple[bytes, int]]:
    for line in io.BytesIO(data):  # line by line: no list of every line
        if line.strip():
            token, rank = line.split()
            yield base64.b64decode(token), int(rank)


def _table(blob: bytes, starts: array[int]) -> array[int]:
    """crc32 slot -> rank + 1, at most half full."""
    size = 1 << (2 * (len(starts) - 1)).bit_length()
    mask = size - 1
    table = array("I", bytes(4 * size))
    for rank in range(len(starts) - 1):
        slot = crc32(blob[starts[rank] : starts[rank + 1]]) & mask
        while table[slot]:
            slot = (slot + 1) & mask
        table[slot] = rank + 1
    return table
