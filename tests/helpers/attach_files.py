"""Files to attach, made on the spot (no binary fixtures): a multi-page PDF with a text layer,
written object by object, and images drawn with Pillow."""

from __future__ import annotations

import base64
import io
from pathlib import Path


def pdf_bytes(pages: list[str]) -> bytes:
    """A minimal valid PDF: one page a text (one line each, Helvetica), with its xref table."""
    n = len(pages)
    font_id = 3 + 2 * n
    kids = " ".join(f"{3 + 2 * i} 0 R" for i in range(n))
    objects = [
        b"<< /Type /Catalog /Pages 2 0 R >>",
        f"<< /Type /Pages /Kids [{kids}] /Count {n} >>".encode(),
    ]
    for i, text in enumerate(pages):
        safe = text.replace("\\", "\\\\").replace("(", "\\(").replace(")", "\\)")
        stream = f"BT /F1 12 Tf 72 720 Td ({safe}) Tj ET".encode("latin-1")
        objects.append(
            f"<< /Type /Page /Parent 2 0 R /MediaBox [0 0 612 792] "
            f"/Resources << /Font << /F1 {font_id} 0 R >> >> /Contents {4 + 2 * i} 0 R >>".encode()
        )
        objects.append(f"<< /Length {len(stream)} >>\nstream\n".encode() + stream + b"\nendstream")
    objects.append(b"<< /Type /Font /Subtype /Type1 /BaseFont /Helvetica >>")
    out = io.BytesIO()
    out.write(b"%PDF-1.4\n")
    offsets = []
    for number, body in enumerate(objects, start=1):
        offsets.append(out.tell())
        out.write(f"{number} 0 obj\n".encode() + body + b"\nendobj\n")
    xref = out.tell()
    out.write(f"xref\n0 {len(objects) + 1}\n0000000000 65535 f \n".encode())
    for off in offsets:
        out.write(f"{off:010d} 00000 n \n".encode())
    out.write(
        f"trailer\n<< /Size {len(objects) + 1} /Root 1 0 R >>\nstartxref\n{xref}\n%%EOF\n".encode()
    )
    return out.getvalue()


def write_pdf(path: Path, pages: list[str]) -> Path:
    path.write_bytes(pdf_bytes(pages))
    return path


def write_image(path: Path, size: tuple[int, int], fmt: str = "PNG") -> Path:
    """A picture with some detail (a gradient), so encoders have work to do."""
    from PIL import Image

    w, h = size
    gradient = Image.linear_gradient("L").resize((w, h))
    image = Image.merge("RGB", (gradient, gradient.rotate(90).resize((w, h)), gradient))
    image.save(path, format=fmt)
    return path


def data_url_image_size(url: str) -> tuple[str, tuple[int, int]]:
    """(mime, (width, height)) of a data URL, decoded with Pillow."""
    from PIL import Image

    head, data = url.split(",", 1)
    with Image.open(io.BytesIO(base64.b64decode(data))) as im:
        return head[5:].split(";")[0], im.size
