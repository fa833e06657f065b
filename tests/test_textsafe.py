from __future__ import annotations

import random
import re

import pytest

from countbot_cli.textsafe import LazyPattern, StreamSanitizer, sanitize, sanitize_line

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


# ---- chunk independence: the stream's output never depends on where the cuts fall ----

HOSTILE = [
    "title \x1b]0;TITLE\x07 after",
    "st \x1b]0;TITLE\x1b\\ after",
    "clip \x1b]52;c;ZXZpbCBwYXlsb2Fk\x07 after",
    "link \x1b]8;;https://evil.example\x1b\\text\x1b]8;;\x1b\\ end",
    "dcs \x1bP+q544e\x1b\\ end",
    "csi \x1b[2J\x1b[H\x1b[10;20H\x1b[?1049h\x1b[38;2;255;0;0mred\x1b[0m end",
    "c1 \x9b31mcsi \x9d0;title\x9c osc \x90dcs\x9c end",
    "lone escape at the end \x1b",
    "lone C1 at the end \x9b",
    "unfinished \x1b]0;still visible",
    "crlf\r\nand lone cr\rand cr at the end\r",
    "osc with crlf inside \x1b]0;a\r\nb\x07 after",
    "esc breaks an osc \x1b]0;a\x1b[31mb\x07 after",
    "utf-8 中文 🎉 \x1b[1mbold\x1b[0m émoji",
    "bidi \u202eevil\u202c \u2066x\u2069",
]


def _fed(pieces: list[str]) -> str:
    s = StreamSanitizer()
    return "".join(s.feed(p) for p in pieces) + s.flush()


@pytest.mark.parametrize("raw", HOSTILE)
def test_stream_output_is_the_same_at_every_split_point(raw: str) -> None:
    want = sanitize(raw)
    assert "\x1b" not in want and "\x07" not in want and "TITLE" not in want
    for cut in range(len(raw) + 1):
        assert _fed([raw[:cut], raw[cut:]]) == want, cut
    for a in range(len(raw) + 1):
        for b in range(a, len(raw) + 1):
            assert _fed([raw[:a], raw[a:b], raw[b:]]) == want, (a, b)


def test_stream_output_is_the_same_for_random_splits_of_random_text() -> None:
    rnd = random.Random(9)
    alphabet = list("\x1b\x07\x9c\x9b\x9d\x90\r\n[]P\\;0m1 /(a中") + ["\U0001f389"]
    for _ in range(3000):
        raw = "".join(rnd.choice(alphabet) for _ in range(rnd.randint(0, 40)))
        cuts = sorted(rnd.sample(range(len(raw) + 1), min(len(raw) + 1, rnd.randint(0, 8))))
        pieces = [raw[i:j] for i, j in zip([0, *cuts], [*cuts, len(raw)], strict=True)]
        assert _fed(pieces) == sanitize(raw), (raw, cuts)


@pytest.mark.parametrize("terminator", ["\x07", "\x1b\\", "\x9c", ""])
@pytest.mark.parametrize("extra", [-1, 0, 1, 5])
def test_sequences_at_the_length_caps_are_chunk_independent(terminator: str, extra: int) -> None:
    from countbot_cli.textsafe import MAX_PARAMS, MAX_STRING

    osc = "a\x1b]0;" + "x" * (MAX_STRING - 2 + extra) + terminator + "z"
    csi = "a\x1b[" + "1" * (MAX_PARAMS + extra) + "m" + terminator + "z"
    for raw in (osc, csi):
        want = sanitize(raw)
        for step in (1, 3, 1000, MAX_STRING, MAX_STRING + 1, len(raw)):
            pieces = [raw[i : i + step] for i in range(0, len(raw), step)]
            assert _fed(pieces) == want, (len(raw), step)
    # within the cap the whole OSC goes; past it the introducer goes and the body stays
    assert (sanitize(osc) == "az") == (extra <= 0 and terminator != "")


def test_stream_hold_back_is_bounded_and_released_as_sanitize_shows_it() -> None:
    from countbot_cli.textsafe import MAX_STRING

    s = StreamSanitizer()
    out = s.feed("\x1b]0;" + "x" * (MAX_STRING + 100))  # can no longer complete
    assert out == "0;" + "x" * (MAX_STRING + 100)
    assert s.feed("\x07tail") == "tail"
    held = StreamSanitizer()
    assert held.feed("\x1b]0;" + "x" * (MAX_STRING - 10)) == ""  # may still complete
    assert held.feed("\x07tail") == "tail"


def test_json_text_escapes_what_json_leaves_raw_and_round_trips() -> None:
    import json

    from countbot_cli.textsafe import json_text

    value = {"id": "a\x1b]0;t\x07\x9b31m\x9d\x7f\u202e\u2028中"}
    text = json_text(value, indent=None)
    assert not [c for c in text if ord(c) < 0x20 or 0x7F <= ord(c) <= 0x9F]
    assert "\u202e" not in text and "\u2028" not in text and "中" in text
    assert json.loads(text) == value


def test_a_lazy_pattern_is_compiled_when_first_used_and_once(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    broken = LazyPattern("(")  # an import of a module holding it would not fail ...
    with pytest.raises(re.error):
        broken.re  # noqa: B018 ... its first use does
    compiled: list[str] = []
    real = re.compile

    def compile(pattern: str, flags: int = 0) -> re.Pattern[str]:
        compiled.append(pattern)
        return real(pattern, flags)

    monkeypatch.setattr(re, "compile", compile)
    digits = LazyPattern(r"\d+")
    assert compiled == []  # not at creation
    assert digits.re.findall("a1b22") == ["1", "22"]
    assert digits.re.findall("333") == ["333"]
    assert compiled == [r"\d+"]  # at the first use, and only then


def test_json_text_never_writes_nan_or_infinity() -> None:
    from countbot_cli.textsafe import json_text

    value = {"cost": float("nan"), "days": [1.5, float("inf"), (float("-inf"),)], "n": 2}
    text = json_text(value, indent=None)
    assert text == '{"cost": null, "days": [1.5, null, [null]], "n": 2}'
    assert json_text({"cost": 0.5}, indent=None) == '{"cost": 0.5}'
