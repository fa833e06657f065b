"""`-a/--attach PATH|URL`: what each attachment becomes in the user message, and its record.

- a text file: a fenced block with its name (as `-f` always did), at most 1 MB;
- an image (png, jpeg, gif, webp, by its first bytes): an `image_url` part with a `data:` URL,
  scaled down to `attachments.max_image_pixels` (images.py); refused before anything is sent
  when the model is known not to take images (model_limits.takes_images, `vision:` on the
  provider);
- a PDF: the text of its first `max_pdf_pages` pages, page by page (pypdf);
- an http(s) URL: the page as readable text (fetch.py).

Every attachment is read and checked before the session is opened, so a refusal sends and
saves nothing. The session keeps a record of each (kind, source, sha256, bytes, pages or
pixels), never an image's bytes: later turns send the words, not the image again.
"""

from __future__ import annotations

import hashlib
import importlib
import io
import logging
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from countbot_cli.conversation.input.fetch import fetch_page, is_url
from countbot_cli.conversation.input.images import ATTACH_EXTRA_HINT, prepare_image, sniff
from countbot_cli.conversation.input.prompt_input import (
    MAX_INPUT_BYTES,
    check_size,
    compose_prompt,
    decode_text,
    fenced,
    read_file_bytes,
)
from countbot_cli.conversation.sessions.session import plural
from countbot_cli.errors import UsageError
from countbot_cli.provider.model_limits import takes_images

if TYPE_CHECKING:
    from countbot_cli.config.attach import AttachSettings
    from countbot_cli.config.providers import ProviderConfig
    from countbot_cli.config.settings import Settings


@dataclass
class Attached:
    """What the attachments add to one user message."""

    blocks: list[str] = field(default_factory=list)  # fenced texts, in order
    images: list[str] = field(default_factory=list)  # data URLs (never stored)
    records: list[dict[str, Any]] = field(default_factory=list)  # one per attachment, stored

    def __bool__(self) -> bool:
        return bool(self.records)


def load_attachments(refs: Sequence[tuple[str, str]], limits: AttachSettings) -> Attached:
    """Every `(flag, path-or-URL)` read, checked and converted; the first problem is a
    UsageError (exit 2) or FetchError (exit 6)."""
    out = Attached()
    for flag, ref in refs:
        if not ref.strip():
            raise UsageError(f"{flag} needs a file or an http(s) URL")
        if is_url(ref):
            _add_url(out, ref, limits)
        else:
            _add_file(out, flag, Path(ref), limits)
    return out


def check_images_allowed(attached: Attached, provider: ProviderConfig) -> None:
    """A UsageError before the request when images are attached for a model known not to take
    them; an unknown model is let through (its provider answers)."""
    if not attached.images or takes_images(provider.model, provider.vision) is not False:
        return
    names = ", ".join(r["source"] for r in attached.records if r["kind"] == "image")
    how = "`vision: false` on" if provider.vision is False else "not taking images, for"
    raise UsageError(
        f"{provider.model} does not take images ({names}); nothing was sent",
        hint=f"countbot knows it as {how} provider '{provider.name}': pick a vision model "
        "with -m, or set `vision: true` on the provider if it does take them",
    )


def _add_file(out: Attached, flag: str, path: Path, limits: AttachSettings) -> None:
    data = read_file_bytes(path, max(limits.max_file_bytes, MAX_INPUT_BYTES), flag)
    label = f"{flag} {path}"
    record: dict[str, Any] = {"source": str(path), **digest(data)}
    if sniff(data) is not None:
        image = prepare_image(data, label, limits.max_image_pixels)
        out.images.append(image.data_url)
        record.update(
            kind="image",
            mime=image.mime,
            pixels=list(image.size),
            sent_pixels=list(image.sent),
            tokens=image.tokens,
        )
    elif data.startswith(b"%PDF-"):
        text, total, sent = pdf_text(data, label, limits.max_pdf_pages)
        pages = plural(total, "page") if sent == total else f"pages 1-{sent} of {total}"
        out.blocks.append(fenced(f"PDF `{path}` ({pages})", text))
        record.update(kind="pdf", pages=total, pages_sent=sent)
    else:
        check_size(path, len(data), MAX_INPUT_BYTES, flag)
        if b"\x00" in data[:8192]:
            raise UsageError(
                f"{label}: a binary file; text, images (png, jpeg, gif, webp) and PDFs "
                "can be attached; nothing was sent"
            )
        out.blocks.append(fenced(f"File `{path}`", decode_text(path, data, flag)))
        record.update(kind="text")
    out.records.append(record)


def _add_url(out: Attached, url: str, limits: AttachSettings) -> None:
    page = fetch_page(
        url,
        max_bytes=limits.max_url_bytes,
        timeout=limits.url_timeout,
        max_redirects=limits.max_redirects,
    )
    check_size(page.source, len(page.text.encode("utf-8")), MAX_INPUT_BYTES, "-a")
    title = f" ({page.title})" if page.title else ""
    out.blocks.append(fenced(f"Page `{page.url}`{title}", page.text))
    record: dict[str, Any] = {"source": page.source, **digest(page.body)}
    record.update(kind="url", content_type=page.content_type.split(";")[0])
    if page.url != page.source:
        record["final_url"] = page.url
    if page.title:
        record["title"] = page.title[:200]
    out.records.append(record)


def digest(data: bytes) -> dict[str, Any]:
    return {"sha256": hashlib.sha256(data).hexdigest(), "bytes": len(data)}


def pdf_text(data: bytes, label: str, max_pages: int) -> tuple[str, int, int]:
    """(text of the first `max_pages` pages, pages in the file, pages read) via pypdf."""
    try:
        pypdf = importlib.import_module("pypdf")
    except ImportError:
        raise UsageError(
            f"{label}: attaching PDFs needs pypdf; nothing was sent", hint=ATTACH_EXTRA_HINT
        ) from None
    logging.getLogger("pypdf").setLevel(logging.ERROR)  # its warnings are not the user's
    try:
        reader = pypdf.PdfReader(io.BytesIO(data))
        if reader.is_encrypted and not reader.decrypt(""):
            raise UsageError(f"{label}: the PDF is encrypted; nothing was sent")
        total = len(reader.pages)
        sent = min(total, max_pages)
        pages = [reader.pages[i].extract_text() or "" for i in range(sent)]
    except UsageError:
        raise
    except Exception as exc:  # pypdf raises many kinds on a damaged or hostile file
        why = str(exc).splitlines()[0][:120] if str(exc) else type(exc).__name__
        raise UsageError(f"{label}: not a readable PDF ({why}); nothing was sent") from None
    if not any(p.strip() for p in pages):
        raise UsageError(
            f"{label}: the PDF has no text to read (a scan?); nothing was sent",
            hint="attach the pages as images instead",
        )
    text = "\n\n".join(f"--- page {i + 1} ---\n{p.strip()}" for i, p in enumerate(pages))
    check_size(label.split(" ", 1)[-1], len(text.encode("utf-8")), MAX_INPUT_BYTES, "text of")
    return text, total, sent


def describe(record: dict[str, Any]) -> str:
    """One line for `sessions show` and exports: what was attached, and its digest."""
    kind = str(record.get("kind") or "file")
    parts = [f"attached {kind} {record.get('source', '?')}"]
    if kind == "image":
        px = record.get("pixels") or []
        sent = record.get("sent_pixels") or []
        if len(px) == 2:
            size = f"{px[0]}x{px[1]}"
            if len(sent) == 2 and sent != px:
                size += f" sent as {sent[0]}x{sent[1]}"
            parts.append(size)
    elif kind == "pdf":
        total, sent = record.get("pages"), record.get("pages_sent")
        pages = plural(int(total), "page") if isinstance(total, int) else "? pages"
        parts.append(pages if total == sent else f"{sent} of {pages} sent")
    elif kind == "url" and record.get("final_url"):
        parts.append(f"-> {record['final_url']}")
    if isinstance(record.get("bytes"), int):
        parts.append(f"{record['bytes']:,} bytes")
    sha = str(record.get("sha256") or "")
    if sha:
        parts.append(f"sha256 {sha[:16]}…")
    return " · ".join(parts)


def compose_message(
    prompt: Sequence[str],
    stdin_text: str | None,
    refs: Sequence[tuple[str, str]],
    settings: Settings,
) -> tuple[str, Attached | None]:
    """The user message of `ask` (or the REPL's first): its text, and what `refs` attached,
    every attachment read and the model's image support checked before anything is sent."""
    if not refs:
        return compose_prompt(prompt, stdin_text), None
    attached = load_attachments(refs, settings.attach)
    check_images_allowed(attached, settings.provider)
    text = compose_prompt(prompt, stdin_text, attached.blocks, images=len(attached.images))
    return text, attached


class PendingAttachments:
    """What the REPL's `-a` and `/attach` hold for the next message: each attachment read and
    checked when it is added (a refusal adds nothing), sent with the next message, then
    dropped."""

    def __init__(self) -> None:
        self.items: list[Attached] = []

    def __len__(self) -> int:
        return len(self.items)

    def add(
        self, ref: str, settings: Settings, provider: ProviderConfig, flag: str = "/attach"
    ) -> dict[str, Any]:
        """Read and check `ref` (a path, `~` expanded, or an http(s) URL) for `provider`'s
        model; its record."""
        if ref.strip() and not is_url(ref):
            ref = str(Path(ref).expanduser())
        attached = load_attachments([(flag, ref)], settings.attach)
        check_images_allowed(attached, provider)
        self.items.append(attached)
        return attached.records[0]

    def records(self) -> list[dict[str, Any]]:
        return [r for a in self.items for r in a.records]

    def clear(self) -> int:
        n, self.items = len(self.items), []
        return n

    def compose(self, text: str, provider: ProviderConfig) -> tuple[str, Attached]:
        """The message `text` with every pending attachment, checked again for `provider`'s
        model (it may have changed since `/attach`). The pending list is left as it was."""
        merged = Attached()
        for a in self.items:
            merged.blocks += a.blocks
            merged.images += a.images
            merged.records += a.records
        check_images_allowed(merged, provider)
        words = [text] if text.strip() else []
        return compose_prompt(words, None, merged.blocks, images=len(merged.images)), merged
