"""The render memo (ui/rendermemo.py): what a frame reuses, and for how long.

That frames drawn through it look as rich draws them is tests/ui/test_stream_look.py's.
"""

from __future__ import annotations

import io
from collections import Counter

import pytest
from rich.console import Console, ConsoleOptions
from rich.text import Text

from countbot_cli.ui import rendermemo
from countbot_cli.ui.rendermemo import MISSING, RenderMemo
from countbot_cli.ui.stream import StreamView


def test_the_key_of_a_text_render_holds_every_field_rich_renders_a_text_from() -> None:
    """A rich version that adds a field to Text or ConsoleOptions fails here, not on screen."""
    assert set(Text.__slots__) == rendermemo.TEXT_FIELDS
    options = Console(file=io.StringIO(), width=50).options
    assert len(rendermemo._options_key(options)) == len(ConsoleOptions.__dataclass_fields__)
    hash(rendermemo._options_key(options))


def test_an_entry_lives_while_consecutive_renders_use_it() -> None:
    memo = RenderMemo()
    memo.put("kept", 1)
    memo.put("dropped", 2)
    memo.rendered()
    assert memo.get("kept") == 1  # used by the second render
    memo.rendered()
    assert memo.get("kept") == 1
    assert memo.get("dropped") is MISSING  # the second render did not use it


def test_a_streamed_list_renders_each_finished_item_once_per_width(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """Each frame draws the whole list, but an item already written is not wrapped again: once
    when it is finished, once more when the ninth item makes the numbers wider."""
    wrapped: Counter[str] = Counter()
    wrap = Text.wrap

    def counted(self: Text, *args: object, **kwargs: object) -> object:
        wrapped[self.plain] += 1
        return wrap(self, *args, **kwargs)  # type: ignore[arg-type]

    monkeypatch.setattr(Text, "wrap", counted)
    items = [f"item {i} has a few words in it" for i in range(1, 13)]
    text = "".join(f"{i}. {item}\n" for i, item in enumerate(items, 1))
    now = [0.0]
    c = Console(file=io.StringIO(), width=60, height=40, force_terminal=True)
    view = StreamView(c, clock=lambda: now[0], max_fps=10.0)
    for i, char in enumerate(text):
        now[0] = i / 100  # 100 characters a second: a frame every 10
        view.feed(char)
    assert view.frames > 30
    assert all(wrapped[item] <= 3 for item in items[:8]), wrapped
