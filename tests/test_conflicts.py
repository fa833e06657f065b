"""conflicts.py: the names sync tools give conflict copies read back, git's marks taken apart."""

from __future__ import annotations

import pytest

from countbot_cli.conflicts import copies_of, git_sides, original_name

COPIES = [
    ("MEMORY.sync-conflict-20250306-101502-7QKZ3AB.md", "MEMORY.md", "Syncthing"),
    (  # a conflict of a conflict copy: Syncthing repeats its tag
        "MEMORY.sync-conflict-20250306-101502-7QKZ3AB.sync-conflict-20250307-080000-ZZZZZZZ.md",
        "MEMORY.md",
        "Syncthing",
    ),
    ("ab12cd34ef56 (conflicted copy 2025-03-06).json", "ab12cd34ef56.json", "Dropbox"),
    ("MEMORY (Ana's MacBook's conflicted copy 2025-03-06 (2)).md", "MEMORY.md", "Dropbox"),
    ("MEMORY.marks (conflicted copy 2025-03-06 101502).json", "MEMORY.marks.json", "Nextcloud"),
    ("MEMORY (conflicted copy ana 2025-03-06 101502).md", "MEMORY.md", "Nextcloud"),
    ("MEMORY_conflict-20250306-101502.md", "MEMORY.md", "Nextcloud"),
    ("MEMORY 2.md", "MEMORY.md", "iCloud"),
    ("ab12cd34ef56 14.json", "ab12cd34ef56.json", "iCloud"),
]
NOT_COPIES = [
    "MEMORY.md",
    "MEMORY 1.md",  # iCloud counts from 2
    "MEMORY-old.md",
    "notes (copy).md",
    "MEMORY.sync-conflict-20250306-101502-7QKZ3AB.md.merged-20250306T101733Z",  # merged already
    "ab12cd34ef56.json.corrupt-20250306T101733Z",
    ".sync-conflict-20250306-101502-7QKZ3AB.md",  # nothing left of the name
]


@pytest.mark.parametrize(("name", "original", "tool"), COPIES)
def test_each_tools_copy_names_its_original(name: str, original: str, tool: str) -> None:
    found = original_name(name)
    assert found is not None and (found.original, found.tool) == (original, tool)


@pytest.mark.parametrize("name", NOT_COPIES)
def test_other_names_are_not_copies(name: str) -> None:
    assert original_name(name) is None


def test_the_copies_of_one_file_among_a_folders_names() -> None:
    names = [c[0] for c in COPIES] + NOT_COPIES
    assert [c.name for c in copies_of("MEMORY.md", names)] == sorted(
        n for n, o, _t in COPIES if o == "MEMORY.md"
    )


def test_git_sides_with_a_base_section_and_crlf() -> None:
    text = (
        "head\r\n<<<<<<< HEAD\r\nours\r\n||||||| base\r\nold\r\n=======\r\ntheirs\r\n"
        ">>>>>>> other\r\ntail\r\n"
    )
    assert git_sides(text) == ("head\r\nours\r\ntail\r\n", "head\r\ntheirs\r\ntail\r\n")


@pytest.mark.parametrize(
    "text",
    [
        "no marks at all\n",
        "<<<<<<< HEAD\nours\n=======\ntheirs\n",  # never closed
        "a line that starts with <<<<<<< is not a mark here\n=======\n",
    ],
)
def test_text_without_a_whole_conflict_has_no_sides(text: str) -> None:
    assert git_sides(text) is None
