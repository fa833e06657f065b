"""`-a https://…`: a web page fetched with httpx and turned into readable text.

The fetch is bounded every way a server could stretch it: one deadline (kept by netguard.py,
which also refuses a hop to a more private address), `max_redirects`, `max_url_bytes`, text
content types only; a `user:password@` is dropped. HTML becomes markdown with markdownify,
without scripts, styles, forms and (when there is no main content) navigation. A refusal is a
UsageError (exit 2), an unreachable server a FetchError (exit 6); in every case nothing was
sent to the model. httpx, BeautifulSoup and markdownify are imported only when a URL is
attached. docs/design/attachments.md says more.
"""

from __future__ import annotations

import importlib
import re
import time
from dataclasses import dataclass
from typing import Any
from urllib.parse import urljoin, urlsplit, urlunsplit

from countbot_cli.errors import FetchError, UsageError
from countbot_cli.speedups.httpx_import import import_httpx

TEXT_TYPES = ("text/", "application/xhtml+xml", "application/json", "application/xml")
HTML_TYPES = ("text/html", "application/xhtml+xml")
_DROP = ("script", "style", "noscript", "template", "iframe", "object", "embed", "svg", "canvas")
_DROP_FORMS = ("form", "button", "input", "select", "textarea")
_CHROME = ("nav", "header", "footer", "aside")


@dataclass(frozen=True)
class Page:
    source: str  # the URL asked for, without user:password@
    url: str  # after redirects
    content_type: str
    body: bytes
    text: str  # readable text (markdown for HTML)
    title: str


def is_url(ref: str) -> bool:
    return ref.lower().startswith(("http://", "https://"))


def without_userinfo(url: str) -> str:
    """`url` without the `user:password@` of its authority (which httpx would send)."""
    try:
        parts = urlsplit(url)
    except ValueError:  # not a URL (an unclosed [IPv6]): cut by hand, httpx refuses the rest
        return re.sub(r"^([A-Za-z][A-Za-z0-9+.-]*://)[^/?#]*@", r"\1", url)
    if "@" not in parts.netloc:
        return url
    return urlunsplit(parts._replace(netloc=parts.netloc.rpartition("@")[2]))


def fetch_page(url: str, *, max_bytes: int, timeout: float, max_redirects: int) -> Page:
    """The page at `url` as readable text (see the module for the limits)."""
    httpx = import_httpx()
    from countbot_cli.conversation.input import netguard  # httpcore: when a page is fetched

    url = without_userinfo(url)
    backend = netguard.GuardedBackend(netguard.Deadline(time.monotonic() + timeout))
    t = httpx.Timeout(timeout, connect=min(timeout, 10.0))
    headers = {"Accept": "text/html,text/plain;q=0.9,*/*;q=0.1", "User-Agent": "countbot"}
    transport = netguard.GuardedTransport(backend)
    try:
        with httpx.Client(
            timeout=t, follow_redirects=False, headers=headers, transport=transport
        ) as client:
            final, ctype, body = _follow(client, url, max_bytes, max_redirects)
    except httpx.TimeoutException:
        raise _timed_out(url, timeout) from None
    except netguard.HopRefused as exc:
        raise UsageError(f"-a {url}: {exc}; nothing was sent") from None
    except (httpx.InvalidURL, httpx.UnsupportedProtocol) as exc:
        raise UsageError(f"-a {url}: not a URL countbot can fetch ({exc})") from None
    except httpx.TransportError as exc:
        why = str(exc).splitlines()[0] if str(exc) else type(exc).__name__
        raise FetchError(f"-a {url}: cannot fetch it ({why}); nothing was sent") from None
    text, title = _readable(body, ctype)
    return Page(source=url, url=final, content_type=ctype, body=body, text=text, title=title)


def _timed_out(url: str, timeout: float) -> FetchError:
    return FetchError(f"-a {url}: timed out after {timeout:g} s; nothing was sent")


def _follow(client: Any, url: str, max_bytes: int, max_redirects: int) -> tuple[str, str, bytes]:
    """(final URL, content type, body) after at most `max_redirects` redirects."""
    current = url
    for _ in range(max_redirects + 1):
        with client.stream("GET", current) as resp:
            if resp.has_redirect_location:  # a 3xx without a Location is no redirect
                location = resp.headers.get("location", "")
                current = without_userinfo(urljoin(current, location))
                if urlsplit(current).scheme not in ("http", "https"):
                    raise UsageError(f"-a {url}: redirected to a non-http URL; nothing was sent")
                continue
            _check_status(url, resp.status_code)
            ctype = _content_type(url, resp.headers.get("content-type", ""))
            return current, ctype, _read(resp, url, max_bytes)
    raise UsageError(f"-a {url}: more than {max_redirects} redirects; nothing was sent")


def _check_status(url: str, status: int) -> None:
    if status >= 500:
        raise FetchError(f"-a {url}: the server answered {status}; nothing was sent")
    if status >= 400:
        raise UsageError(f"-a {url}: the server answered {status}; nothing was sent")
    if status >= 300:
        raise UsageError(f"-a {url}: the server answered {status} without a redirect")


def _content_type(url: str, header: str) -> str:
    ctype = header.split(";", 1)[0].strip().lower() or "application/octet-stream"
    if not ctype.startswith(TEXT_TYPES) and not ctype.endswith(("+json", "+xml")):
        raise UsageError(
            f"-a {url}: serves {ctype}; only text pages can be attached from a URL "
            "(download an image or PDF and attach the file)"
        )
    charset = re.search(r"charset=\"?([\w.:-]+)", header, re.IGNORECASE)
    return f"{ctype}; charset={charset.group(1)}" if charset else ctype


def _read(resp: Any, url: str, max_bytes: int) -> bytes:
    declared = resp.headers.get("content-length", "")
    if declared.isdigit() and int(declared) > max_bytes:
        raise UsageError(
            f"-a {url}: {int(declared):,} bytes is over the {max_bytes:,}-byte limit; "
            "nothing was sent"
        )
    parts: list[bytes] = []
    got = 0
    for chunk in resp.iter_bytes(65536):  # every read keeps the deadline (netguard)
        got += len(chunk)
        if got > max_bytes:
            raise UsageError(f"-a {url}: is over the {max_bytes:,}-byte limit; nothing was sent")
        parts.append(chunk)
    return b"".join(parts)


def _readable(body: bytes, ctype: str) -> tuple[str, str]:
    """(text, title): HTML as markdown, any other text as it is."""
    charset = ctype.split("charset=", 1)[1] if "charset=" in ctype else "utf-8"
    try:
        text = body.decode(charset, errors="replace")
    except LookupError:  # an unknown charset name
        text = body.decode("utf-8", errors="replace")
    if not ctype.startswith(HTML_TYPES):
        return text, ""
    return html_to_text(text)


def html_to_text(html: str) -> tuple[str, str]:
    """(markdown, title) of an HTML page: its main content, no scripts, styles or forms."""
    bs4 = importlib.import_module("bs4")
    markdownify = importlib.import_module("markdownify")
    soup = bs4.BeautifulSoup(html, "html.parser")
    title = " ".join(soup.title.get_text().split()) if soup.title else ""
    for tag in soup.find_all([*_DROP, *_DROP_FORMS, "head"]):
        tag.decompose()
    for comment in soup.find_all(string=lambda s: isinstance(s, bs4.Comment)):
        comment.extract()
    for img in soup.find_all("img"):  # the alt text, never a (data:) URL
        img.replace_with(str(img.get("alt") or ""))
    root = soup.find("main") or soup.find("article") or soup.find(attrs={"role": "main"})
    if root is None:
        root = soup.body or soup
        for tag in root.find_all(list(_CHROME)):
            tag.decompose()
    text = markdownify.MarkdownConverter(heading_style="ATX", bullets="-").convert_soup(root)
    text = re.sub(r"[ \t]+\n", "\n", text)
    return re.sub(r"\n{3,}", "\n\n", text).strip(), title
