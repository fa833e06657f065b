"""The token estimate used where no encoding is loaded (or none exists for a model): a few
rules of thumb over the characters, corrected by calibration (conversation/tokens.py)."""

from __future__ import annotations


def estimate_tokens(text: str) -> int:
    """Estimate used when no encoding can be loaded.

    One token per CJK ideograph, kana, hangul syllable or full-width form (cl100k gives about
    1-1.3, o200k about 0.7 per Chinese character); every other character adds its UTF-8 byte
    length to a pool counted at 4 bytes a token (OpenAI's rule of thumb for English, about right
    for code; Cyrillic/Greek land near 2 characters a token). Calibration corrects the rest.
    """
    if text.isascii():
        return (len(text) + 3) // 4
    wide = pool = 0
    for ch in text:
        o = ord(ch)
        if o < 0x80:
            pool += 1
        elif _is_wide(o):
            wide += 1
        else:
            pool += 2 if o < 0x800 else 3 if o < 0x10000 else 4
    return wide + (pool + 3) // 4


def _is_wide(o: int) -> bool:
    return (
        0x2E80 <= o <= 0x9FFF
        or 0xAC00 <= o <= 0xD7AF
        or 0xF900 <= o <= 0xFAFF
        or 0xFF00 <= o <= 0xFFEF
        or 0x20000 <= o <= 0x3FFFF
    )
