"""The body of `countbot memory tidy` and `/memory tidy`: memory/tidy.py's proposals as a diff,
each with the sources of the lines it touches, answered one by one.

Per proposal: `y` applies it, `n` leaves it, `e` edits the line that stays and applies that,
`a` applies it and every one after it, `q` stops. Nothing changes without a yes; with no one to
answer (`ask` None: no terminal) the proposals are only printed. Each yes is applied at once,
under MEMORY.md's lock, against the file as it is then (memory/tidy.py `apply`), so numbers are
shown as they are at that moment. Everything from MEMORY.md or a session goes through textsafe.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TextIO

from countbot_cli import app
from countbot_cli.config.settings import Settings
from countbot_cli.conversation.sessions.session import plural
from countbot_cli.errors import EXIT_OK, CountbotError
from countbot_cli.memory import archive, sources
from countbot_cli.memory.search import Entry
from countbot_cli.memory.store import MemoryStore
from countbot_cli.memory.tidy import Proposal, TidyModel, apply, find
from countbot_cli.provider import Provider
from countbot_cli.textsafe import sanitize_line
from countbot_cli.ui import questions

Ask = Callable[[str], "str | None"]  # a question -> the answer typed (None: gave up)
Edit = Callable[[str], "str | None"]  # the text to edit -> the text after (None: cancelled)
Model = Callable[[list[list[Entry]]], list[Proposal]]  # groups -> the model's proposals
QUESTION = "Apply? [y]es [n]o [e]dit [a]ll [q]uit "


def run_tidy(settings: Settings, out: TextIO, *, no_model: bool, on_terminal: bool) -> int:
    """`countbot memory tidy [--no-model]`: answered on the terminal, else only printed; the
    model's proposals from the configured provider (`tidy_model`)."""
    store = MemoryStore(settings.memory.file)
    model = None if no_model else tidy_model(store, settings, lambda: app.make_provider(settings))

    def edit(text: str) -> str | None:
        out.write(f"  the line now: {text}\n")
        return questions.line("  new text (empty: leave it): ")

    if not on_terminal:
        return memory_tidy(store, out, ask=None, model=model)
    return memory_tidy(store, out, ask=questions.line, edit=edit, model=model)


def tidy_model(
    store: MemoryStore, settings: Settings, provider: Callable[[], Provider]
) -> Model | None:
    """memory tidy's model on `provider()` (the configured one; the chat's in `/memory
    tidy`); None when there is none to ask: the embedded model is too small to judge which
    facts replace which, and a provider that cannot be made leaves the rule-based proposals."""
    if settings.provider.type == "local":
        return None
    try:
        return TidyModel(store, settings, provider())
    except CountbotError:
        return None


def memory_tidy(
    store: MemoryStore,
    out: TextIO,
    *,
    ask: Ask | None,
    edit: Edit | None = None,
    model: Model | None = None,
) -> int:
    found, groups = find(store)
    if model is not None and groups:
        try:
            found += _disjoint(found, model(groups))
        except CountbotError as exc:
            out.write(
                f"(the model's proposals are left out: {sanitize_line(exc.user_message())})\n"
            )
    where = sanitize_line(str(store.path))
    if not found:
        out.write(
            f"Nothing to tidy in {where} ({plural(len(store.entries()), 'entry', 'entries')}).\n"
        )
        return EXIT_OK
    out.write(f"{plural(len(found), 'proposal')} for {where}:\n")
    if ask is None:
        numbers = _numbers(store)
        for k, p in enumerate(found, 1):
            out.write(_block(store, p, k, len(found), numbers))
        out.write("Nothing changed: run `countbot memory tidy` on a terminal to answer them.\n")
        return EXIT_OK
    applied = _review(store, out, found, ask, edit)
    _summary(store, out, applied, len(found))
    return EXIT_OK


def _review(
    store: MemoryStore, out: TextIO, found: list[Proposal], ask: Ask, edit: Edit | None
) -> int:
    applied, every = 0, False
    for k, p in enumerate(found, 1):
        out.write(_block(store, p, k, len(found), _numbers(store)))
        answer = "y" if every else _answer(ask)
        if answer == "q":
            break
        if answer == "e":
            text = edit(p.text) if edit is not None else None
            if not text or not text.strip():
                out.write("  left as it was (nothing to apply)\n")
                continue
            p.text = " ".join(text.split())
        every = every or answer == "a"
        if answer == "n":
            continue
        if apply(store, p):
            applied += 1
            out.write("  applied\n")
        else:
            out.write("  not applied: these lines changed since (run `memory tidy` again)\n")
    return applied


def _answer(ask: Ask) -> str:
    while True:
        got = ask(QUESTION)
        if got is None:
            return "q"
        choice = got.strip().lower()[:1]
        if choice in ("y", "n", "e", "a", "q"):
            return choice


def _disjoint(found: list[Proposal], more: list[Proposal]) -> list[Proposal]:
    """The model's proposals touching no line a rule-based one (or an earlier one) touches."""
    taken = {e.line_no for p in found for e in (p.keep, *p.remove)}
    out = []
    for p in more:
        lines = {e.line_no for e in (p.keep, *p.remove)}
        if not lines & taken:
            out.append(p)
            taken |= lines
    return out


def _numbers(store: MemoryStore) -> dict[str, int]:
    return {sources.line_key(e.line): n for n, e in store.numbered()}


def _block(store: MemoryStore, p: Proposal, k: int, total: int, numbers: dict[str, int]) -> str:
    links = sources.load(store.path)
    rows = [f"\n[{k}/{total}] {p.kind}: {sanitize_line(p.why)}"]
    touched = [*p.remove, p.keep] if p.text != p.keep.content else p.remove
    for e in touched:
        rows.append(f"  - {_row(e, numbers)}")
    kept = p.keep._replace(content=p.text)
    rows.append(f"  + {_row(kept, numbers, key=sources.line_key(p.keep.line))}")
    for e in (*p.remove, p.keep):
        n = numbers.get(sources.line_key(e.line), "?")
        rec = links.get(sources.line_key(e.line))
        said = (
            f"session {sanitize_line(rec['session'])}, "
            f"{plural(len(rec.get('messages', [])), 'message')} (memory why {n})"
            if rec
            else "no source recorded (by hand, the memory tool, or edited)"
        )
        rows.append(f"    entry {n}: {said}")
    return "\n".join(rows) + "\n"


def _row(e: Entry, numbers: dict[str, int], key: str | None = None) -> str:
    n = numbers.get(key or sources.line_key(e.line), "?")
    return f"{n}  {sanitize_line(e.date)}  {sanitize_line(e.source)}  {sanitize_line(e.content)}"


def _summary(store: MemoryStore, out: TextIO, applied: int, total: int) -> None:
    if not applied:
        out.write("Nothing changed.\n")
        return
    where = sanitize_line(str(archive.archive_path(store.path)))
    out.write(
        f"Applied {applied} of {total}; the lines taken out are kept in {where}. "
        "Entries are renumbered: see `countbot memory show`.\n"
    )
