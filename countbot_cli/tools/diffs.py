"""Unified diffs for the approval prompt (write_file and edit_file previews), bounded in time
and size, and the line splitting that read_file, edit_file and the diffs share."""

from __future__ import annotations

import os
import re

_LINE_RE = re.compile(r"[^\n]*\n|[^\n]+$")


def split_lines(text: str) -> list[str]:
    """Lines with their endings, split on "\\n" only (read_file and edit_file number alike)."""
    return _LINE_RE.findall(text)


MAX_DIFF_LINES = 400
MAX_DIFF_CHARS = 20000
EXACT_DIFF_LINES = 2000  # a changed region longer than this is shown as one block (difflib is
# quadratic on many scattered changes: 30 s for 10,000 of them in a 30,000-line file)


def unified_diff(old: str, new: str, label: str, *, new_file: bool = False) -> str:
    """A unified diff old -> new for the approval prompt, capped in lines and characters."""
    import difflib

    a, b = split_lines(old), split_lines(new)
    heads = ["/dev/null" if new_file else _head("a", label), _head("b", label)]
    prefix = _common_prefix(a, b)
    suffix = _common_prefix(a[prefix:][::-1], b[prefix:][::-1])
    if max(len(a), len(b)) - prefix - suffix > EXACT_DIFF_LINES:
        diff = _block_diff(a, b, prefix, suffix, heads)
    else:
        diff = list(difflib.unified_diff(a, b, heads[0], heads[1]))
    out = [d if d.endswith("\n") else d + "\n\\ No newline at end of file\n" for d in diff]
    if not out:
        return f"(no change: {label} already has this content)"
    text = "".join(out[:MAX_DIFF_LINES])
    cut = len(out) - MAX_DIFF_LINES
    if len(text) > MAX_DIFF_CHARS:
        cut = max(cut, 0) + text[MAX_DIFF_CHARS:].count("\n")
        text = text[:MAX_DIFF_CHARS].rsplit("\n", 1)[0] + "\n"
    if cut > 0:
        text += f"[diff truncated: {cut} more line{_s(cut)}]\n"
    return text.rstrip("\n")


def _head(side: str, label: str) -> str:
    """`a/rel/path` for a path in the workspace; an absolute (or `~`) path is shown as is, not
    as `b//tmp/x`."""
    return label if os.path.isabs(label) or label.startswith("~") else f"{side}/{label}"


def _common_prefix(a: list[str], b: list[str]) -> int:
    n = 0
    for x, y in zip(a, b, strict=False):
        if x != y:
            break
        n += 1
    return n


def _block_diff(
    a: list[str], b: list[str], prefix: int, suffix: int, heads: list[str]
) -> list[str]:
    """One hunk replacing the changed middle as a whole, with 3 lines of context."""
    first = max(prefix - 3, 0)
    a_end, b_end = len(a) - suffix, len(b) - suffix
    after = a[a_end : a_end + 3]
    n_a, n_b = a_end + len(after) - first, b_end + len(after) - first
    removed, keep = a[prefix:a_end], MAX_DIFF_LINES // 2  # leave room for the added lines
    hunk = f"@@ -{first + 1 if n_a else first},{n_a} +{first + 1 if n_b else first},{n_b} @@\n"
    return [
        f"--- {heads[0]}\n",
        f"+++ {heads[1]}\n",
        hunk,
        *(" " + x for x in a[first:prefix]),
        *("-" + x for x in removed[:keep]),
        *(
            [f"[{len(removed) - keep} more removed line{_s(len(removed) - keep)} not shown]\n"]
            if len(removed) > keep
            else []
        ),
        *("+" + x for x in b[prefix:b_end]),
        *(" " + x for x in after),
    ]


def _s(n: int) -> str:
    return "" if n == 1 else "s"
