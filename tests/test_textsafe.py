from __future__ import annotations

import random

import pytest

from countbot_cli.textsafe import StreamSanitizer, sanitize, sanitize_line

NASTY = [
    ("\x1b[31mred\x1b[0m", "red"),
    ("\x1b[2J\x1b[H\x1b[?1049hscreen", "screen"),
    ("\x1b]0;pwned title\x07after", "after"),
    ("\x1b]8;;https://evil.example\x1b\\link\x1b]8;;\x1b\\", "link"),
    ("\x1bP+q544e\x1b\\dcs", "dcs"),
    ("\x1b_apc payload\x1b\\x", "x"),
    ("\x9b31mC1 csi", "C1 csi"),
    ("\x9d0;title\x9cC1 osc", "C1 osc"),
    ("a\x1b7b\x1b8c\x1bcd", "abcd"),
    ("bell\x07 back\x08space del\x7f nul\x00", "bell backspace del nul"),
    ("\x1b(0line drawing", "line drawing"),
    ("keep\ttabs\nand newlines", "keep\ttabs\nand newlines"),
    ("crlf\r\nline", "crlf\nline"),
    ("progress 10%\rprogress 99%", "progress 10%\nprogress 99%"),
    ("unterminated \x1b]0;still visible", "unterminated 0;still visible"),
    ("half \x1b[", "half "),
    ("[red]markup[/red] stays", "[red]markup[/red] stays"),
    ("中文 and émoji 🎉 stay", "中文 and émoji 🎉 stay"),
]


@pytest.mark.parametrize(("raw", "clean"), NASTY)
def test_sanitize(raw: str, clean: str) -> None:
    assert sanitize(raw) == clean


def test_no_control_character_survives() -> None:
    rnd = random.Random(7)
    alphabet = [chr(c) for c in range(0, 0xA0)] + ["[", "]", "\\", ";", "中"]
    for _ in range(500):
        text = "".join(rnd.choice(alphabet) for _ in range(rnd.randint(0, 60)))
        out = sanitize(text)
        assert not [c for c in out if (ord(c) < 0x20 and c not in "\n\t") or 0x7F <= ord(c) <= 0x9F]


def test_plain_text_is_returned_unchanged() -> None:
    text = "nothing to do here\n\tat all"
    assert sanitize(text) is text


def test_sanitize_line() -> None:
    assert sanitize_line("  two\nlines\t\x1b[1mbold\x1b[0m ") == "two lines bold"


@pytest.mark.parametrize(("raw", "clean"), NASTY)
def test_stream_sanitizer_matches_sanitize_at_every_split(raw: str, clean: str) -> None:
    for cut in range(len(raw) + 1):
        s = StreamSanitizer()
        assert s.feed(raw[:cut]) + s.feed(raw[cut:]) + s.flush() == clean, cut


def test_stream_sanitizer_one_character_at_a_time() -> None:
    raw = "".join(r for r, _ in NASTY)
    s = StreamSanitizer()
    out = "".join(s.feed(c) for c in raw) + s.flush()
    assert out == sanitize(raw)


def test_stream_sanitizer_does_not_hold_back_plain_text() -> None:
    s = StreamSanitizer()
    assert s.feed("hello ") == "hello "
    assert s.feed("wor\x1b[3") == "wor"
    assert s.feed("1mld") == "ld"


def test_stream_sanitizer_bounds_what_it_holds_back() -> None:
    s = StreamSanitizer()
    out = s.feed("\x1b]0;" + "x" * 10_000)  # an OSC that never ends
    assert len(out) >= 10_000 - 4096 and "\x1b" not in out


def test_bidi_controls_are_removed() -> None:
    from countbot_cli.textsafe import sanitize, sanitize_line

    trojan = "access = 'user\u202e \u2066// admin\u2069 \u2066'"
    assert sanitize(trojan) == "access = 'user // admin '"
    assert "\u202e" not in sanitize_line("evil\u202etxt.exe")
    assert sanitize("שלום عربي") == "שלום عربي"  # ordinary right-to-left text is untouched
