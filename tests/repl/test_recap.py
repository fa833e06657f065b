"""The recap: resuming a session shows its summary above the last exchanges,
`/recap` prints it on demand (and says so when there is none), and the `/resume` picker and
`sessions list` show a one-line gist where there is one."""

from __future__ import annotations

from typing import Any

from repl_harness import Harness

from countbot_cli.conversation.sessions.session import new_session
from countbot_cli.messages import Message
from countbot_cli.ui.session_picker import Picker

TRIP = "Planning a rail trip through Japan in April. Budget 3000 EUR; trains only, no flights."


def long_session(h: Harness, title: str, *, rolling: str = "", mine: str = "") -> str:
    s = new_session(provider="test", model="test-model", title=title)
    for i in range(6):
        s.archived += [
            Message(role="user", content=f"{title} old q{i}"),
            Message(role="assistant", content=f"{title} old a{i}"),
        ]
    for i in range(4):
        s.messages += [
            Message(role="user", content=f"{title} q{i}"),
            Message(role="assistant", content=f"{title} a{i}"),
        ]
    s.rolling_summary, s.summary = rolling, mine
    h.store.create(s)
    return s.id


def test_resume_shows_the_recap_above_the_last_exchanges(scripted: Any) -> None:
    h = scripted()
    sid = long_session(h, "Japan", rolling=TRIP)
    h.provider.enqueue("ok")
    h.run(["more?\r"], session=h.store.load(sid), is_new=False)  # -c / -s / sessions resume
    out = h.text()
    head = out.index("Resumed “Japan” · 20 messages")
    said = out.index("Recap: Planning a rail trip through Japan in April.")
    assert head < said < out.index("> Japan q1") < out.index("Japan a3")
    assert "Japan old q5" not in out  # the archived ones are what the recap stands for


def test_slash_resume_shows_the_recap_and_a_user_summary_wins(scripted: Any) -> None:
    h = scripted()
    sid = long_session(h, "Japan", rolling=TRIP, mine="Our trip, my words.")
    h.run([f"/resume {sid[:6]}\r", "/recap\r"])
    out = h.text()
    assert out.count("Summary: Our trip, my words.") == 2  # on resume, then /recap
    assert "Recap: Planning" not in out


def test_recap_without_a_summary_says_so(scripted: Any) -> None:
    h = scripted()
    h.provider.enqueue("hello back")
    h.run(["/recap\r", "hello\r", "/recap\r"])
    out = h.text()
    assert out.count("No recap yet: this conversation has no summary") == 2


def test_the_picker_and_sessions_list_show_the_gist(scripted: Any) -> None:
    h = scripted()
    japan = long_session(h, "Japan", rolling=TRIP)
    long_session(h, "Plain")
    rows = {r.label.split("  ", 1)[1].split(" · ")[0]: r for r in Picker(h.store).filter("")}
    assert rows["Japan"].snippet == "Planning a rail trip through Japan in April."
    assert rows["Plain"].snippet == ""
    listing = h.cb.invoke("sessions", "list").stdout.splitlines()
    at = next(i for i, line in enumerate(listing) if "Japan" in line)
    assert listing[at + 1].strip() == "↳ Planning a rail trip through Japan in April."
    assert listing[at + 1].startswith(" " * 10)  # under the title, not in a column
    plain = next(i for i, line in enumerate(listing) if "Plain" in line)
    assert plain + 1 == len(listing) or "↳" not in listing[plain + 1]
    assert japan[:6] in listing[at]


HOSTILE = "\x1b]0;pwned\x07Planning the trip.\x1b[2J Trains only.\x1b[?1049h"


def test_escapes_in_a_stored_summary_never_reach_the_terminal(scripted: Any) -> None:
    """A rolling summary is a model's text kept in a file: resume, /recap, `sessions show`
    and `sessions list` show it without its escape sequences."""
    h = scripted()
    sid = long_session(h, "Japan", rolling=HOSTILE)
    h.run(["/recap\r"], session=h.store.load(sid), is_new=False)
    shown = h.text()
    assert shown.count("Recap: ") == 2 and shown.count("Trains only.") == 2  # resume, /recap
    listing = h.cb.invoke("sessions", "list").stdout
    show = h.cb.invoke("sessions", "show", sid).stdout
    assert "Recap: " in show and "Trains only." in show
    assert "Planning the trip." in listing
    for text in (shown, show, listing):
        assert "\x1b" not in text and "\x07" not in text
