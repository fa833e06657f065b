"""`memory show --json`, `memory why N` and `memory edit` as a user runs them: a memory line
made by an overflow summary is traced to the (now archived) messages it summarised."""

from __future__ import annotations

import json
import sys
from pathlib import Path

import fakeserver as fs
from cbenv import make_cb

from countbot_cli.memory.sources import sidecar_path

FACT = "User's favourite editor is Helix"


def test_an_overflow_line_is_traced_to_its_archived_messages(
    tmp_path: Path, server: fs.FakeServer
) -> None:
    cb = make_cb(
        tmp_path,
        server.base_url,
        persona={"max_history_messages": 2},
        memory={"auto_memory": False},
    )
    server.add(fs.text("answer one"), fs.text("answer two"), fs.text("answer three"))
    server.add(fs.text(FACT))
    assert cb.invoke("ask", "I use \x1b[31mHelix\x1b[0m every day").returncode == 0
    for text in ("question two", "question three"):
        proc = cb.invoke("ask", "-c", text)
        assert proc.returncode == 0, proc.stderr
    assert server.pending == 0
    sid = cb.only_session()["id"]
    (entry,) = json.loads(cb.invoke("memory", "show", "--json").stdout)
    assert entry["content"] == FACT and entry["source"] == "auto-overflow"
    archived = cb.only_session()["archived"]
    assert entry["sources"] == [{"session": sid, "messages": [m["id"] for m in archived]}]
    assert f"|auto-overflow|{FACT}" in cb.memory_file.read_text()  # the line itself unchanged

    why = cb.invoke("memory", "why", str(entry["number"]))
    assert why.returncode == 0, why.stderr
    assert f"From session {sid}" in why.stdout
    assert "I use [31mHelix" not in why.stdout and "\x1b" not in why.stdout  # sanitised
    assert "Helix every day" in why.stdout and "answer two" in why.stdout
    assert why.stdout.count(", archived]") == 4
    bad = cb.invoke("memory", "why", "2")
    assert bad.returncode == 2 and "no memory entry 2" in bad.stderr

    sidecar_path(cb.memory_file).unlink()
    lost = cb.invoke("memory", "why", str(entry["number"]))
    assert lost.returncode == 0 and "No source recorded" in lost.stdout


def test_memory_edit_opens_the_editor_with_the_lock_held(tmp_path: Path) -> None:
    cb = make_cb(tmp_path, "http://127.0.0.1:9")
    assert cb.invoke("memory", "add", "likes tea").returncode == 0
    editor = tmp_path / "editor.py"
    lock = cb.derived(cb.work, "MEMORY.md.lock")  # the lock is the machine's, not the folder's
    editor.write_text(
        "import fcntl, sys\n"
        "path = sys.argv[1]\n"
        f"with open({str(lock)!r}, 'a') as f:\n"
        "    try:\n"
        "        fcntl.flock(f, fcntl.LOCK_EX | fcntl.LOCK_NB)\n"
        "        held = 'free'\n"
        "    except BlockingIOError:\n"
        "        held = 'held'\n"
        "with open(path, 'a') as f:\n"
        "    f.write('2026-01-02|user|edited by hand ' + held + '\\n')\n"
    )
    proc = cb.invoke("memory", "edit", env={"EDITOR": f"{sys.executable} {editor}"})
    assert proc.returncode == 0, proc.stderr
    assert "edited by hand held" in cb.memory_file.read_text()
    shown = json.loads(cb.invoke("memory", "show", "--json").stdout)
    assert [e["content"] for e in shown] == ["likes tea", "edited by hand held"]
    assert all(e["sources"] == [] for e in shown)
    at = tmp_path / "at.py"  # `memory edit N` opens the file at entry N's line
    at.write_text("import sys\nopen(sys.argv[2] + '.args', 'w').write(sys.argv[1])\n")
    proc = cb.invoke("memory", "edit", "2", env={"EDITOR": f"{sys.executable} {at}"})
    assert proc.returncode == 0, proc.stderr
    lines = cb.memory_file.read_text().splitlines()
    want = lines.index("2026-01-02|user|edited by hand held") + 1
    assert Path(str(cb.memory_file) + ".args").read_text() == f"+{want}"
    none = cb.invoke("memory", "edit", env={"EDITOR": "", "VISUAL": ""})
    assert none.returncode == 2 and "$EDITOR" in none.stderr
