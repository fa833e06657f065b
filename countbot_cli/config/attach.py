"""The `attachments:` section of the config: the limits of `-a/--attach` (SPEC §1).

```yaml
attachments:
  max_image_pixels: 2000000   # larger images are scaled down to about this many pixels
  max_pdf_pages: 50           # pages of a PDF whose text is sent
  max_url_bytes: 5000000      # bytes downloaded from an http(s) URL
  url_timeout: 20             # seconds for a whole fetch, redirects included
  max_redirects: 4
```
Whether the model takes images at all is a provider setting (`vision: true|false`).
"""

from __future__ import annotations

from typing import NamedTuple

from countbot_cli.config.file import Section

ATTACH_KEYS = ("max_image_pixels", "max_pdf_pages", "max_url_bytes", "url_timeout", "max_redirects")


class AttachSettings(NamedTuple):
    # ~2 MP: more than any provider's image tiling uses (OpenAI scales to 768 px on the short
    # side), small enough that a phone photo costs ~1 MB of base64 instead of ~10
    max_image_pixels: int = 2_000_000
    max_pdf_pages: int = 50
    max_url_bytes: int = 5_000_000
    url_timeout: float = 20.0
    max_redirects: int = 4
    max_file_bytes: int = 20_000_000  # an image or PDF file (OpenAI takes images up to 20 MB)


def parse_attach(sec: Section) -> AttachSettings:
    sec.check_keys(ATTACH_KEYS)
    d = AttachSettings()

    def pick(value: int | float | None, default: int | float) -> int | float:
        return default if value is None else value

    return AttachSettings(
        max_image_pixels=int(pick(sec.integer("max_image_pixels", 1024), d.max_image_pixels)),
        max_pdf_pages=int(pick(sec.integer("max_pdf_pages", 1), d.max_pdf_pages)),
        max_url_bytes=int(pick(sec.integer("max_url_bytes", 1024), d.max_url_bytes)),
        url_timeout=float(pick(sec.number("url_timeout", 0.1, 600.0), d.url_timeout)),
        max_redirects=int(pick(sec.integer("max_redirects", 0), d.max_redirects)),
    )
