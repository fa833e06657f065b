"""The pieces of `-a`: image sizes read from data URLs, OpenAI's tile rule, which
models take images, the message's API and stored forms, the token budget, HTML to text."""

from __future__ import annotations

import base64
from pathlib import Path

import pytest
from attach_files import write_image, write_pdf

from countbot_cli.config.attach import AttachSettings
from countbot_cli.conversation.input.attachments import load_attachments
from countbot_cli.conversation.input.fetch import html_to_text
from countbot_cli.conversation.input.images import data_url_size, tile_tokens
from countbot_cli.conversation.tokens import TokenCounter
from countbot_cli.errors import UsageError
from countbot_cli.messages import Message
from countbot_cli.provider.model_limits import takes_images


@pytest.mark.parametrize(("fmt", "mime"), [("PNG", "png"), ("JPEG", "jpeg"), ("GIF", "gif")])
def test_the_size_of_an_image_is_read_from_its_data_url(
    tmp_path: Path, fmt: str, mime: str
) -> None:
    path = write_image(tmp_path / f"x.{mime}", (333, 77), fmt)
    url = f"data:image/{mime};base64," + base64.b64encode(path.read_bytes()).decode()
    assert data_url_size(url) == (333, 77)


@pytest.mark.parametrize("lossless", [True, False])
def test_the_size_of_a_webp_is_read_from_its_data_url(tmp_path: Path, lossless: bool) -> None:
    from PIL import Image

    path = tmp_path / "x.webp"
    Image.new("RGB", (501, 203), (1, 2, 3)).save(path, format="WEBP", lossless=lossless)
    url = "data:image/webp;base64," + base64.b64encode(path.read_bytes()).decode()
    assert data_url_size(url) == (501, 203)
    assert data_url_size("https://example.invalid/x.png") is None


@pytest.mark.parametrize(
    ("size", "tokens"),
    [
        ((100, 100), 85 + 170),  # one tile
        ((512, 512), 85 + 170),
        ((1024, 1024), 85 + 170 * 4),  # shortest side to 768: 2 x 2 tiles
        ((4000, 3000), 85 + 170 * 4),  # 2048 x 1536, then 1024 x 768: 2 x 2
        ((2048, 4096), 85 + 170 * 6),  # 1024 x 2048, then 768 x 1536: 2 x 3
    ],
)
def test_openai_tile_rule(size: tuple[int, int], tokens: int) -> None:
    assert tile_tokens(*size) == tokens


def test_which_models_take_images() -> None:
    assert takes_images("gpt-4o-mini") is True
    assert takes_images("openai/gpt-4.1") is True
    assert takes_images("gpt-4") is False
    assert takes_images("o3-mini") is False
    assert takes_images("qwen2.5-vl-7b-instruct") is True
    assert takes_images("SmolLM2-135M-Instruct") is False
    assert takes_images("some-new-model") is None  # unknown: let the provider answer
    assert takes_images("gpt-4", configured=True) is True
    assert takes_images("gpt-4o", configured=False) is False


def test_a_message_with_images_is_sent_as_parts_and_stored_without_them() -> None:
    msg = Message(role="user", content="what?", images=["data:image/png;base64,AAAA"])
    msg.attachments = [{"kind": "image", "source": "x.png", "sha256": "ab"}]
    assert msg.to_api() == {
        "role": "user",
        "content": [
            {"type": "text", "text": "what?"},
            {"type": "image_url", "image_url": {"url": "data:image/png;base64,AAAA"}},
        ],
    }
    stored = msg.to_dict()
    assert "AAAA" not in repr(stored)
    assert stored["attachments"] == [{"kind": "image", "source": "x.png", "sha256": "ab"}]
    again = Message.from_dict(stored)
    assert again.attachments == stored["attachments"] and again.images is None
    assert again.to_api() == {"role": "user", "content": "what?"}


def test_an_image_is_counted_by_its_tiles_not_its_base64(tmp_path: Path) -> None:
    attached = load_attachments(
        [("-a", str(write_image(tmp_path / "x.png", (1024, 1024))))], AttachSettings()
    )
    counter = TokenCounter("gpt-4o")
    plain = counter.count_message(Message(role="user", content="hi", id="a"))
    with_image = counter.count_message(
        Message(role="user", content="hi", images=attached.images, id="b")
    )
    assert with_image - plain == tile_tokens(1024, 1024) == 765
    api = Message(role="user", content="hi", images=attached.images).to_api()
    assert (
        counter.count_messages([api]) - counter.count_messages([{"role": "user", "content": "hi"}])
        == 765
    )


def test_html_keeps_the_main_content_and_drops_scripts_styles_and_chrome() -> None:
    html = """<html><head><title> A   page </title><style>p{}</style></head><body>
    <header>SITE HEADER</header><nav>menu</nav><script>alert(1)</script>
    <p>Hello <a href="/x">link</a> <img src="data:image/png;base64,QUJD" alt="a cat"></p>
    <!-- a comment --><noscript>enable js</noscript><form><input value="q"></form>
    <footer>FOOT</footer></body></html>"""
    text, title = html_to_text(html)
    assert title == "A page"
    assert text == "Hello [link](/x) a cat"


def test_a_pdf_past_the_page_cap_and_an_empty_pdf(tmp_path: Path) -> None:
    pdf = write_pdf(tmp_path / "long.pdf", [f"page {i}" for i in range(1, 8)])
    attached = load_attachments([("-a", str(pdf))], AttachSettings(max_pdf_pages=3))
    assert attached.blocks[0].startswith(f"PDF `{pdf}` (pages 1-3 of 7):\n```\n--- page 1 ---")
    assert "page 4" not in attached.blocks[0]
    assert attached.records[0]["pages"] == 7 and attached.records[0]["pages_sent"] == 3
    blank = write_pdf(tmp_path / "blank.pdf", [""])
    with pytest.raises(UsageError, match="has no text to read"):
        load_attachments([("-a", str(blank))], AttachSettings())
