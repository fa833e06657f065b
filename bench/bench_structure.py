"""The package's structure in figures (issue 20's "Measured"), for the tree and older revisions
side by side in one run.

Prints, for each tree: modules and lines per folder (a subpackage is its own folder: `conversation/`
is the turn, `conversation/sessions/` the sessions), the largest folder's share of the lines,
modules over the 500-line budget, functions over 40 statements (ruff's PLR0915 at 40, the rule
tests/ and the package are held to) and the hand-written terminal escape sequences (string
literals holding ESC[ or CSI) per module.

Usage: python bench/bench_structure.py [--rev REV ...]   (REV: a commit, e.g. e8e71b2)
"""

from __future__ import annotations

import argparse
import re
import shutil
import subprocess
import sys
import tarfile
import tempfile
from collections import Counter
from dataclasses import dataclass, field
from io import BytesIO
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
PACKAGE = "countbot_cli"
LINE_BUDGET = 500
MAX_STATEMENTS = 40
ESCAPES = re.compile(r"\\x1b\[|\\033\[|\\u001b\[|\\x9b|\\e\[")


@dataclass
class Figures:
    name: str
    modules: Counter[str] = field(default_factory=Counter)
    lines: Counter[str] = field(default_factory=Counter)
    over_budget: list[str] = field(default_factory=list)
    long_functions: list[str] = field(default_factory=list)
    escapes: Counter[str] = field(default_factory=Counter)


def measure(root: Path, name: str) -> Figures:
    """The figures of the package under `root`."""
    out = Figures(name)
    package = root / PACKAGE
    for path in sorted(package.rglob("*.py")):
        rel = path.relative_to(package)
        folder = str(rel.parent) + "/" if rel.parent != Path(".") else "(core)"
        text = path.read_text("utf-8")
        count = len(text.splitlines())
        out.modules[folder] += 1
        out.lines[folder] += count
        if count > LINE_BUDGET:
            out.over_budget.append(f"{rel} ({count})")
        if hits := len(ESCAPES.findall(text)):
            out.escapes[str(rel)] = hits
    out.long_functions = long_functions(package)
    return out


def long_functions(package: Path) -> list[str]:
    """Functions over MAX_STATEMENTS statements, as ruff counts them (its own settings only)."""
    ruff = shutil.which("ruff", path=str(Path(sys.executable).parent)) or shutil.which("ruff")
    if ruff is None:
        return ["(ruff not found)"]
    done = subprocess.run(
        [ruff, "check", "--isolated", "--select", "PLR0915", "--output-format", "concise"]
        + ["--config", f"lint.pylint.max-statements = {MAX_STATEMENTS}", str(package)],
        capture_output=True,
        text=True,
        check=False,
    )
    found = [line for line in done.stdout.splitlines() if "PLR0915" in line]
    return [line.replace(str(package) + "/", "") for line in found]


def exported(rev: str, into: Path) -> Path:
    """The package of revision `rev`, written under `into`."""
    data = subprocess.run(
        ["git", "-C", str(ROOT), "archive", rev, PACKAGE], capture_output=True, check=True
    ).stdout
    with tarfile.open(fileobj=BytesIO(data)) as tar:
        tar.extractall(into, filter="data")
    return into


def report(figures: list[Figures]) -> None:
    folders = sorted({f for fig in figures for f in fig.modules})
    head = "".join(f"{fig.name:>22}" for fig in figures)
    print(f"{'folder':28}{head}")
    print(f"{'':28}" + "".join(f"{'modules':>11}{'lines':>11}" for _ in figures))
    for folder in folders:
        cells = "".join(f"{fig.modules[folder]:>11}{fig.lines[folder]:>11,}" for fig in figures)
        print(f"{folder:28}{cells}")
    totals = "".join(
        f"{sum(fig.modules.values()):>11}{sum(fig.lines.values()):>11,}" for fig in figures
    )
    print(f"{'total':28}{totals}\n")
    for fig in figures:
        folder, most = fig.lines.most_common(1)[0]
        share = 100 * most / sum(fig.lines.values())
        print(f"{fig.name}: largest folder {folder} {share:.0f} % of the lines")
        print(f"  modules over {LINE_BUDGET} lines: {', '.join(fig.over_budget) or 'none'}")
        print(f"  functions over {MAX_STATEMENTS} statements: {len(fig.long_functions)}")
        for line in fig.long_functions:
            print(f"    {line}")
        total = sum(fig.escapes.values())
        where = ", ".join(f"{m} ({n})" for m, n in sorted(fig.escapes.items()))
        print(f"  hand-written escape sequences: {total} in {len(fig.escapes)} modules: {where}")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--rev", action="append", default=[], help="also measure this commit")
    args = parser.parse_args()
    figures = []
    with tempfile.TemporaryDirectory() as tmp:
        for rev in args.rev:
            figures.append(measure(exported(rev, Path(tmp) / rev), rev))
        figures.append(measure(ROOT, "this tree"))
    report(figures)


if __name__ == "__main__":
    main()
