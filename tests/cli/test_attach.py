"""`ask -a PATH|URL` as a user runs it: the exact request the model server receives
for an image, a PDF, a web page and all of them together; images scaled down; everything
refused with one line, the right exit code and nothing sent; what the session file keeps."""

from __future__ import annotations

import base64
import hashlib
import json
import sys
import threading
import time
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import fakeserver as fs
import pytest
from attach_files import data_url_image_size, write_image, write_pdf
from cbenv import CB, make_cb, refused

from countbot_cli.errors import EXIT_NETWORK, EXIT_USAGE

PAGE = b"""<!doctype html><html><head><title>Tide tables</title>
<style>body { color: SECRET_STYLE_RED }</style>
<script>var tracker = "SECRET_SCRIPT_TOKEN";</script></head>
<body><nav>Home | About</nav>
<main><h1>High tide</h1><p>The tide is <b>high</b> at 06:12.</p>
<script>document.write("SECRET_INLINE_SCRIPT")</script>
<ul><li>Brest</li><li>Calais</li></ul></main>
<footer>Copyright SECRET_FOOTER</footer></body></html>"""

PAGE_TEXT = "# High tide\n\nThe tide is **high** at 06:12.\n\n- Brest\n- Calais"


class _Pages(BaseHTTPRequestHandler):
    """/page: HTML; /redirect/N: N more redirects; /slow: never answers in time; /huge-declared
    and /huge-streamed: 50 MB; /image: a PNG by URL; /broken: 503."""

    def log_message(self, format: str, *args: Any) -> None:
        pass

    def do_GET(self) -> None:
        path = self.path
        if path == "/page":
            self._send(200, "text/html; charset=utf-8", PAGE)
        elif path.startswith("/redirect/"):
            left = int(path.rsplit("/", 1)[1])
            self.send_response(302)
            self.send_header("Location", f"/redirect/{left - 1}" if left > 1 else "/page")
            self.send_header("Content-Length", "0")
            self.end_headers()
        elif path == "/slow":
            time.sleep(30)
            self._send(200, "text/plain", b"too late")
        elif path.startswith("/huge"):
            self._huge(declared=path == "/huge-declared")
        elif path == "/image":
            self._send(200, "image/png", b"\x89PNG\r\n\x1a\n" + b"\0" * 100)
        else:
            self._send(503, "text/plain", b"down")

    def _send(self, status: int, ctype: str, body: bytes) -> None:
        try:
            self.send_response(status)
            self.send_header("Content-Type", ctype)
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)
        except OSError:  # the client went away (a /slow answer long after its test ended):
            pass  # a traceback here would land in whichever test's stderr is captured then

    def _huge(self, *, declared: bool) -> None:
        self.send_response(200)
        self.send_header("Content-Type", "text/plain")
        if declared:
            self.send_header("Content-Length", str(50_000_000))
        self.end_headers()
        self.server.huge_sent = 0  # type: ignore[attr-defined]
        chunk = b"x" * 65536
        try:
            while self.server.huge_sent < 50_000_000:  # type: ignore[attr-defined]
                self.wfile.write(chunk)
                self.server.huge_sent += len(chunk)  # type: ignore[attr-defined]
        except OSError:
            pass  # the client stopped reading: as it should


class _QuietServer(ThreadingHTTPServer):
    def handle_error(self, request: Any, client_address: Any) -> None:
        """A client gone (ECONNRESET, EPIPE) is no error of the page server's; its traceback
        would be printed into whatever stderr an in-process countbot has captured then."""
        if not isinstance(sys.exc_info()[1], OSError):
            super().handle_error(request, client_address)


@pytest.fixture
def pages() -> Iterator[ThreadingHTTPServer]:
    srv = _QuietServer(("127.0.0.1", 0), _Pages)
    srv.daemon_threads = True
    srv.huge_sent = 0  # type: ignore[attr-defined]
    thread = threading.Thread(target=srv.serve_forever, daemon=True)
    thread.start()
    yield srv
    srv.shutdown()
    srv.server_close()


@pytest.fixture
def server() -> Iterator[fs.FakeServer]:
    with fs.FakeServer() as srv:
        srv.default = fs.text("noted")
        yield srv


def _url(pages: ThreadingHTTPServer, path: str) -> str:
    return f"http://127.0.0.1:{pages.server_address[1]}{path}"


def _user_message(server: fs.FakeServer) -> Any:
    bodies = server.chat_bodies()
    assert len(bodies) == 1, bodies
    return bodies[0]["messages"][-1]


def _b64(path: Path) -> str:
    return base64.b64encode(path.read_bytes()).decode("ascii")


# ---- what is sent ----


def test_an_image_is_sent_as_an_image_url_part_with_its_own_bytes(
    tmp_path: Path, server: fs.FakeServer
) -> None:
    cb = make_cb(tmp_path, server.base_url)
    png = write_image(cb.work / "chart.png", (64, 48))
    proc = cb.invoke("ask", "what is this?", "-a", "chart.png")
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout == "noted\n"
    assert _user_message(server) == {
        "role": "user",
        "content": [
            {"type": "text", "text": "what is this?"},
            {"type": "image_url", "image_url": {"url": "data:image/png;base64," + _b64(png)}},
        ],
    }


def test_a_pdf_is_sent_as_its_text_page_by_page_up_to_the_page_cap(
    tmp_path: Path, server: fs.FakeServer
) -> None:
    cb = make_cb(tmp_path, server.base_url, attachments={"max_pdf_pages": 2})
    write_pdf(cb.work / "minutes.pdf", ["Budget approved", "Next meeting (May)", "Appendix"])
    proc = cb.invoke("ask", "summarise", "-a", "minutes.pdf")
    assert proc.returncode == 0, proc.stderr
    assert _user_message(server) == {
        "role": "user",
        "content": "summarise\n\nPDF `minutes.pdf` (pages 1-2 of 3):\n```\n"
        "--- page 1 ---\nBudget approved\n\n--- page 2 ---\nNext meeting (May)\n```",
    }


def test_a_web_page_is_sent_as_its_main_text_without_scripts_or_styles(
    tmp_path: Path, server: fs.FakeServer, pages: ThreadingHTTPServer
) -> None:
    cb = make_cb(tmp_path, server.base_url)
    url = _url(pages, "/page")
    proc = cb.invoke("ask", "when is high tide?", "-a", url)
    assert proc.returncode == 0, proc.stderr
    sent = _user_message(server)
    assert sent == {
        "role": "user",
        "content": f"when is high tide?\n\nPage `{url}` (Tide tables):\n```\n{PAGE_TEXT}\n```",
    }
    assert "SECRET" not in json.dumps(server.chat_bodies())


def test_text_pdf_page_and_two_images_together_keep_their_order(
    tmp_path: Path, server: fs.FakeServer, pages: ThreadingHTTPServer
) -> None:
    cb = make_cb(tmp_path, server.base_url)
    (cb.work / "notes.txt").write_text("remember the tides\n", encoding="utf-8")
    write_pdf(cb.work / "a.pdf", ["one page"])
    first = write_image(cb.work / "one.png", (32, 32))
    second = write_image(cb.work / "two.jpg", (40, 30), "JPEG")
    url = _url(pages, "/redirect/2")  # followed to /page
    proc = cb.invoke(
        "ask", "compare", "-f", "notes.txt", "-a", "one.png", "-a", "a.pdf", "-a", url,
        "-a", "two.jpg", input="piped context\n",
    )  # fmt: skip
    assert proc.returncode == 0, proc.stderr
    final = _url(pages, "/page")
    text = (
        "compare\n\npiped context\n\nFile `notes.txt`:\n```\nremember the tides\n```\n\n"
        "PDF `a.pdf` (1 page):\n```\n--- page 1 ---\none page\n```\n\n"
        f"Page `{final}` (Tide tables):\n```\n{PAGE_TEXT}\n```"
    )
    assert _user_message(server)["content"] == [
        {"type": "text", "text": text},
        {"type": "image_url", "image_url": {"url": "data:image/png;base64," + _b64(first)}},
        {"type": "image_url", "image_url": {"url": "data:image/jpeg;base64," + _b64(second)}},
    ]


def test_an_image_over_the_pixel_budget_is_scaled_down_in_its_own_format(
    tmp_path: Path, server: fs.FakeServer
) -> None:
    cb = make_cb(tmp_path, server.base_url, attachments={"max_image_pixels": 1_000_000})
    write_image(cb.work / "photo.jpg", (3000, 2000), "JPEG")
    proc = cb.invoke("ask", "describe", "-a", "photo.jpg")
    assert proc.returncode == 0, proc.stderr
    part = _user_message(server)["content"][1]
    mime, (w, h) = data_url_image_size(part["image_url"]["url"])
    assert mime == "image/jpeg"
    assert w * h <= 1_000_000 and w >= 1200 and abs(w / h - 1.5) < 0.01, (w, h)
    record = cb.only_session()["messages"][0]["attachments"][0]
    assert record["pixels"] == [3000, 2000] and record["sent_pixels"] == [w, h]


def test_an_image_alone_is_a_question(tmp_path: Path, server: fs.FakeServer) -> None:
    cb = make_cb(tmp_path, server.base_url)
    png = write_image(cb.work / "x.png", (8, 8))
    assert cb.invoke("ask", "-a", "x.png").returncode == 0
    assert _user_message(server)["content"] == [
        {"type": "image_url", "image_url": {"url": "data:image/png;base64," + _b64(png)}}
    ]


# ---- what the session keeps ----


def test_the_session_keeps_a_digest_of_an_image_not_its_bytes(
    tmp_path: Path, server: fs.FakeServer
) -> None:
    cb = make_cb(tmp_path, server.base_url)
    png = write_image(cb.work / "chart.png", (300, 200))
    write_pdf(cb.work / "doc.pdf", ["alpha", "beta"])
    assert cb.invoke("ask", "look", "-a", "chart.png", "-a", "doc.pdf").returncode == 0
    raw = cb.session_files()[0].read_text(encoding="utf-8")
    assert _b64(png)[100:200] not in raw
    user = cb.only_session()["messages"][0]
    assert user["attachments"] == [
        {
            "source": "chart.png",
            "sha256": hashlib.sha256(png.read_bytes()).hexdigest(),
            "bytes": png.stat().st_size,
            "kind": "image",
            "mime": "image/png",
            "pixels": [300, 200],
            "sent_pixels": [300, 200],
            "tokens": 255,
        },
        {
            "source": "doc.pdf",
            "sha256": hashlib.sha256((cb.work / "doc.pdf").read_bytes()).hexdigest(),
            "bytes": (cb.work / "doc.pdf").stat().st_size,
            "kind": "pdf",
            "pages": 2,
            "pages_sent": 2,
        },
    ]
    show = cb.invoke("sessions", "show", "latest")
    sha = user["attachments"][0]["sha256"][:16]
    size = png.stat().st_size
    assert f"  attached image chart.png · 300x200 · {size:,} bytes · sha256 {sha}…\n" in show.stdout
    assert "attached pdf doc.pdf · 2 pages" in show.stdout
    export = cb.invoke("sessions", "export", "latest")
    assert f"- attached image chart.png · 300x200 · {png.stat().st_size:,} bytes" in export.stdout
    # the next turn sends the words again, not the image
    server.add(fs.text("again"))
    assert cb.invoke("ask", "-c", "and now?").returncode == 0
    history = server.chat_bodies()[1]["messages"]
    assert [m["content"] for m in history if m["role"] == "user"][0].startswith("look\n\nPDF")
    assert "image_url" not in json.dumps(history)


# ---- refused: one line, nothing sent ----


def test_a_binary_file_that_is_no_image_is_refused(tmp_path: Path, server: fs.FakeServer) -> None:
    cb = make_cb(tmp_path, server.base_url)
    (cb.work / "blob.bin").write_bytes(b"\x7fELF\x02\x01\x01\x00" + bytes(range(256)) * 4)
    line = refused(cb, server, cb.invoke("ask", "what?", "-a", "blob.bin"), EXIT_USAGE)
    assert "-a blob.bin: a binary file; text, images (png, jpeg, gif, webp) and PDFs" in line


def test_a_broken_image_and_a_broken_pdf_are_refused(tmp_path: Path, server: fs.FakeServer) -> None:
    cb = make_cb(tmp_path, server.base_url)
    (cb.work / "bad.png").write_bytes(b"\x89PNG\r\n\x1a\n" + b"garbage" * 10)
    (cb.work / "bad.pdf").write_bytes(b"%PDF-1.4\nnot really\n")
    line = refused(cb, server, cb.invoke("ask", "x", "-a", "bad.png"), EXIT_USAGE)
    assert "-a bad.png: not a readable image" in line
    line = refused(cb, server, cb.invoke("ask", "x", "-a", "bad.pdf"), EXIT_USAGE)
    assert "-a bad.pdf: not a readable PDF" in line


@pytest.mark.parametrize(
    ("model", "vision"),
    [("gpt-3.5-turbo", None), ("deepseek-chat", None), ("gpt-4o", False)],
)
def test_an_image_for_a_model_that_takes_none_is_refused_before_the_request(
    tmp_path: Path, server: fs.FakeServer, model: str, vision: bool | None
) -> None:
    provider: dict[str, Any] = {"model": model}
    if vision is not None:
        provider["vision"] = vision
    cb = make_cb(tmp_path, server.base_url, provider=provider)
    write_image(cb.work / "x.png", (8, 8))
    line = refused(cb, server, cb.invoke("ask", "what?", "-a", "x.png"), EXIT_USAGE)
    assert f"{model} does not take images (x.png); nothing was sent" in line
    assert "`vision: true`" in line


def test_vision_true_lets_an_image_through_to_a_model_the_table_calls_text_only(
    tmp_path: Path, server: fs.FakeServer
) -> None:
    cb = make_cb(tmp_path, server.base_url, provider={"model": "gpt-4", "vision": True})
    write_image(cb.work / "x.png", (8, 8))
    assert cb.invoke("ask", "what?", "-a", "x.png").returncode == 0, "vision: true must win"
    assert _user_message(server)["content"][1]["type"] == "image_url"


def test_a_url_redirecting_five_times_is_refused(
    tmp_path: Path, server: fs.FakeServer, pages: ThreadingHTTPServer
) -> None:
    cb = make_cb(tmp_path, server.base_url)
    url = _url(pages, "/redirect/5")
    line = refused(cb, server, cb.invoke("ask", "x", "-a", url), EXIT_USAGE)
    assert f"-a {url}: more than 4 redirects; nothing was sent" in line


def test_a_url_that_does_not_answer_in_time_is_a_network_error(
    tmp_path: Path, server: fs.FakeServer, pages: ThreadingHTTPServer
) -> None:
    cb = make_cb(tmp_path, server.base_url, attachments={"url_timeout": 1})
    url = _url(pages, "/slow")
    proc = cb.run("ask", "x", "-a", url, timeout=20)  # a hang bound: the page answers after 30 s
    line = refused(cb, server, proc, EXIT_NETWORK)
    assert f"-a {url}: timed out after 1 s; nothing was sent" in line


@pytest.mark.parametrize("path", ["/huge-declared", "/huge-streamed"])
def test_a_url_serving_50_mb_is_refused_reading_at_most_the_cap(
    tmp_path: Path, server: fs.FakeServer, pages: ThreadingHTTPServer, path: str
) -> None:
    cb = make_cb(tmp_path, server.base_url)
    url = _url(pages, path)
    line = refused(cb, server, cb.invoke("ask", "x", "-a", url), EXIT_USAGE)
    if path == "/huge-declared":
        assert f"-a {url}: 50,000,000 bytes is over the 5,000,000-byte limit" in line
    else:
        assert f"-a {url}: is over the 5,000,000-byte limit; nothing was sent" in line
    assert pages.huge_sent < 20_000_000  # type: ignore[attr-defined]


def test_a_url_serving_an_image_or_failing_is_refused(
    tmp_path: Path, server: fs.FakeServer, pages: ThreadingHTTPServer
) -> None:
    cb = make_cb(tmp_path, server.base_url)
    url = _url(pages, "/image")
    line = refused(cb, server, cb.invoke("ask", "x", "-a", url), EXIT_USAGE)
    assert f"-a {url}: serves image/png; only text pages can be attached" in line
    url = _url(pages, "/broken")
    line = refused(cb, server, cb.invoke("ask", "x", "-a", url), EXIT_NETWORK)
    assert f"-a {url}: the server answered 503; nothing was sent" in line
    port = pages.server_address[1]
    pages.shutdown()
    pages.server_close()
    closed = f"http://127.0.0.1:{port}/page"
    line = refused(cb, server, cb.invoke("ask", "x", "-a", closed), EXIT_NETWORK)
    assert f"-a {closed}: cannot fetch it" in line


# ---- start-up stays lean ----

HEAVY = {"PIL", "pypdf", "markdownify", "bs4", "httpx"}


def _loaded(cb: CB, *args: str) -> list[str]:
    return cb.loaded(HEAVY, *args)


def test_attachment_libraries_are_imported_only_for_what_is_attached(
    tmp_path: Path, server: fs.FakeServer
) -> None:
    cb = make_cb(tmp_path, server.base_url)
    (cb.work / "notes.txt").write_text("hi\n", encoding="utf-8")
    write_image(cb.work / "x.png", (8, 8))
    write_pdf(cb.work / "d.pdf", ["text"])
    assert _loaded(cb, "--help") == []
    assert _loaded(cb, "ask", "--plain", "--no-save", "hi") == ["httpx"]  # the provider's
    assert _loaded(cb, "ask", "--plain", "--no-save", "hi", "-a", "notes.txt") == ["httpx"]
    assert _loaded(cb, "ask", "--plain", "--no-save", "hi", "-a", "x.png") == ["PIL", "httpx"]
    # pypdf itself imports Pillow when it is installed
    pdf = _loaded(cb, "ask", "--plain", "--no-save", "hi", "-a", "d.pdf")
    assert pdf in (["httpx", "pypdf"], ["PIL", "httpx", "pypdf"])
