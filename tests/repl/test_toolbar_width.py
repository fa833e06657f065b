"""The bottom toolbar fits the terminal width (low-priority parts dropped first, the model and
the context kept longest) and shows `--yes`; `/tools` says so too."""

from __future__ import annotations

from typing import Any

from repl_harness import Harness

from countbot_cli.repl.toolbar import fit_parts, toolbar_text


def test_toolbar_fits_40_60_and_120_columns_keeping_model_and_context(scripted: Any) -> None:
    h = scripted(tools=True)
    repl = h.make()
    c = repl.conversation
    c.policy.yes_writes = True
    c.session.title = "A conversation about the toolbar's width"
    model = f"{c.provider.name}/{c.provider.model}"
    context = repl.meter.summary(c)
    wide = toolbar_text(c, repl.meter, 120, upkeep=True)
    assert len(wide) <= 120
    for part in (model, "A conversation about", context, "tools ask --yes", "⟳ memory"):
        assert part in wide
    mid = toolbar_text(c, repl.meter, 60, upkeep=True)
    assert len(mid) <= 60
    assert model in mid and context in mid and "A conversation" not in mid
    narrow = toolbar_text(c, repl.meter, 40, upkeep=True)
    assert len(narrow) <= 40
    assert model in narrow and context in narrow
    assert "tools" not in narrow and "memory" not in narrow
    tiny = toolbar_text(c, repl.meter, 12)
    assert len(tiny) <= 12 and tiny.startswith(f" {model[0]}")


def test_fit_parts_drops_by_rank_then_cuts_the_model() -> None:
    parts = [(0, "provider/a-long-model-name"), (4, "title"), (1, "1k/8k (12%)"), (2, "tools")]
    assert fit_parts(parts, 200) == " provider/a-long-model-name · title · 1k/8k (12%) · tools "
    assert fit_parts(parts, 50) == " provider/a-long-model-name · 1k/8k (12%) · tools "
    assert fit_parts(parts, 42) == " provider/a-long-model-name · 1k/8k (12%) "
    cut = fit_parts(parts, 30)
    assert len(cut) == 30 and cut.endswith("… · 1k/8k (12%) ")


def test_tools_shows_yes(scripted: Any) -> None:
    h = scripted(tools=True)

    def yes(h: Harness) -> None:
        assert h.repl is not None
        h.repl.conversation.policy.yes_writes = True

    h.run([yes, "/tools\r"])
    assert "--yes: file writes and edits run without asking" in h.text()
