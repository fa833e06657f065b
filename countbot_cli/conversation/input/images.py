"""Images for `-a`: sniffed, scaled down to a pixel budget, sent as `data:` URLs; their cost in
tokens by OpenAI's tile rule.

Pillow is imported only here and only when an image is attached (the `[attach]` extra). An
image within the budget is sent as its own bytes; a larger one is decoded (JPEG at a reduced
size straight from the decoder, `draft`), turned upright by its EXIF orientation, scaled down
and encoded again in its own format (a GIF becomes a PNG of its first frame).

The token count reads the image's size from the header of the data URL (PNG, GIF, JPEG and
WebP are parsed here, without Pillow), so the budget can price any message it is handed.
"""

from __future__ import annotations

import base64
import binascii
import importlib
import io
import math
import struct
from typing import Any, NamedTuple

from countbot_cli.errors import UsageError

MIME_BY_FORMAT = {
    "PNG": "image/png",
    "JPEG": "image/jpeg",
    "GIF": "image/gif",
    "WEBP": "image/webp",
}
MAX_DECODE_PIXELS = 120_000_000  # refused before decoding: a pixel bomb, not a photo
TOKENS_PER_IMAGE_MAX = 85 + 170 * 8  # OpenAI high detail: at most 2 x 4 tiles after scaling
ATTACH_EXTRA_HINT = "pip install 'countbot-cli[attach]'"


def sniff(data: bytes) -> str | None:
    """'PNG', 'JPEG', 'GIF' or 'WEBP' from the first bytes, else None."""
    if data.startswith(b"\x89PNG\r\n\x1a\n"):
        return "PNG"
    if data.startswith(b"\xff\xd8\xff"):
        return "JPEG"
    if data[:6] in (b"GIF87a", b"GIF89a"):
        return "GIF"
    if data[:4] == b"RIFF" and data[8:12] == b"WEBP":
        return "WEBP"
    return None


class PreparedImage(NamedTuple):
    data_url: str
    mime: str
    size: tuple[int, int]  # the original width x height
    sent: tuple[int, int]  # what is sent, after scaling
    sent_bytes: int

    @property
    def tokens(self) -> int:
        return tile_tokens(*self.sent)


def prepare_image(data: bytes, label: str, max_pixels: int) -> PreparedImage:
    """`data` (a png, jpeg, gif or webp file) as a data URL within `max_pixels`; a UsageError
    naming `label` when Pillow is missing or the image cannot be read."""
    pil = _pillow(label)
    image_mod = pil.Image
    try:
        with image_mod.open(io.BytesIO(data)) as im:
            fmt = str(im.format or "")
            if fmt not in MIME_BY_FORMAT:
                raise UsageError(
                    f"{label}: a {fmt or 'unknown'} image; png, jpeg, gif or webp only"
                )
            w, h = im.size
            if w * h > MAX_DECODE_PIXELS:
                raise UsageError(f"{label}: {w}x{h} pixels is too large an image to attach")
            if w * h <= max_pixels:
                out, sent, mime = data, (w, h), MIME_BY_FORMAT[fmt]
            else:
                out, sent, mime = _scaled(pil, im, fmt, max_pixels)
    except UsageError:
        raise
    except (OSError, ValueError, SyntaxError, image_mod.DecompressionBombError) as exc:
        raise UsageError(f"{label}: not a readable image ({_first_line(exc)})") from None
    url = f"data:{mime};base64," + base64.b64encode(out).decode("ascii")
    return PreparedImage(data_url=url, mime=mime, size=(w, h), sent=sent, sent_bytes=len(out))


def _scaled(pil: Any, im: Any, fmt: str, max_pixels: int) -> tuple[bytes, tuple[int, int], str]:
    """`im` scaled to at most `max_pixels`, encoded again: (bytes, (w, h), mime)."""
    w, h = im.size
    scale = math.sqrt(max_pixels / (w * h))
    target = (max(1, int(w * scale)), max(1, int(h * scale)))
    if fmt == "JPEG":
        im.draft("RGB", target)  # let the decoder do most of the shrinking (1/2, 1/4, 1/8)
    frame = pil.ImageOps.exif_transpose(im)
    fw, fh = frame.size
    scale = min(1.0, math.sqrt(max_pixels / (fw * fh)))
    size = (max(1, int(fw * scale)), max(1, int(fh * scale)))
    out_fmt = "PNG" if fmt == "GIF" else fmt
    if out_fmt == "JPEG" and frame.mode not in ("RGB", "L"):
        frame = frame.convert("RGB")
    elif frame.mode == "P" or (out_fmt == "WEBP" and frame.mode not in ("RGB", "RGBA")):
        frame = frame.convert("RGBA")
    small = frame.resize(size, pil.Image.Resampling.LANCZOS, reducing_gap=2.0)
    buf = io.BytesIO()
    # PNG at zlib level 1: a 2 MP photo encodes in ~0.5 s instead of ~2.8 s, ~20 % larger
    options: dict[str, Any] = (
        {"quality": 85} if out_fmt in ("JPEG", "WEBP") else {"compress_level": 1}
    )
    small.save(buf, format=out_fmt, **options)
    return buf.getvalue(), small.size, MIME_BY_FORMAT[out_fmt]


def _pillow(label: str) -> Any:
    """The PIL package with Image and ImageOps loaded, or a UsageError saying how to get it."""
    try:
        pil = importlib.import_module("PIL")
        importlib.import_module("PIL.Image")
        importlib.import_module("PIL.ImageOps")
    except ImportError:
        raise UsageError(
            f"{label}: attaching images needs Pillow; nothing was sent", hint=ATTACH_EXTRA_HINT
        ) from None
    return pil


def _first_line(exc: BaseException) -> str:
    text = str(exc).strip().splitlines()
    return text[0][:120] if text else type(exc).__name__


# ---- tokens ----


def tile_tokens(width: int, height: int) -> int:
    """OpenAI's high-detail rule: fit in 2048 x 2048, shortest side down to 768, then 85 +
    170 for each 512-pixel tile."""
    w, h = float(width), float(height)
    if max(w, h) > 2048:
        s = 2048 / max(w, h)
        w, h = w * s, h * s
    if min(w, h) > 768:
        s = 768 / min(w, h)
        w, h = w * s, h * s
    return 85 + 170 * math.ceil(w / 512) * math.ceil(h / 512)


def data_url_tokens(url: str) -> int:
    """Tokens of an image part's URL: by its size when a data URL's header says it, else the
    most an image can cost (a remote URL, or a header not understood)."""
    size = data_url_size(url)
    return tile_tokens(*size) if size else TOKENS_PER_IMAGE_MAX


def data_url_size(url: str) -> tuple[int, int] | None:
    """(width, height) from the header of a base64 data URL, without decoding the rest."""
    if not url.startswith("data:"):
        return None
    comma = url.find(",", 0, 200)
    if comma < 0 or not url[:comma].endswith(";base64"):
        return None
    head = url[comma + 1 : comma + 1 + 262_144]  # a multiple of 4: JPEG's EXIF can be long
    try:
        data = base64.b64decode(head[: len(head) // 4 * 4], validate=False)
    except (binascii.Error, ValueError):
        return None
    return header_size(data)


def header_size(data: bytes) -> tuple[int, int] | None:
    """(width, height) read from a PNG, GIF, JPEG or WebP header, else None."""
    kind = sniff(data)
    try:
        if kind == "PNG":
            w, h = struct.unpack(">II", data[16:24])
        elif kind == "GIF":
            w, h = struct.unpack("<HH", data[6:10])
        elif kind == "WEBP":
            return _webp_size(data)
        elif kind == "JPEG":
            return _jpeg_size(data)
        else:
            return None
    except struct.error:
        return None
    return (w, h) if w > 0 and h > 0 else None


def _webp_size(data: bytes) -> tuple[int, int] | None:
    chunk = data[12:16]
    if chunk == b"VP8X":
        w = int.from_bytes(data[24:27], "little") + 1
        h = int.from_bytes(data[27:30], "little") + 1
    elif chunk == b"VP8L":
        bits = int.from_bytes(data[21:25], "little")
        w, h = (bits & 0x3FFF) + 1, ((bits >> 14) & 0x3FFF) + 1
    elif chunk == b"VP8 ":
        w, h = struct.unpack("<HH", data[26:30])
        w, h = w & 0x3FFF, h & 0x3FFF
    else:
        return None
    return (w, h) if w > 0 and h > 0 else None


_SOF = {0xC0, 0xC1, 0xC2, 0xC3, 0xC5, 0xC6, 0xC7, 0xC9, 0xCA, 0xCB, 0xCD, 0xCE, 0xCF}


def _jpeg_size(data: bytes) -> tuple[int, int] | None:
    """The frame size from the first SOF marker, walking the segments."""
    i = 2
    while i + 4 <= len(data):
        if data[i] != 0xFF:
            return None
        marker = data[i + 1]
        if marker == 0xFF:  # fill byte
            i += 1
            continue
        if marker in (0x01, 0xD8) or 0xD0 <= marker <= 0xD7:
            i += 2
            continue
        length = int.from_bytes(data[i + 2 : i + 4], "big")
        if marker in _SOF and i + 9 <= len(data):
            h, w = struct.unpack(">HH", data[i + 5 : i + 9])
            return (w, h) if w > 0 and h > 0 else None
        i += 2 + length
    return None
