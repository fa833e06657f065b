"""Symlink-swap races (issue 9): while another thread swaps a workspace folder for a symlink to
an outside folder, calls classified as inside never read or write outside, and every failure is
a tool result for the model, never an exception. Driven through the real dispatch (ToolRunner:
prepare, the approval policy with `--yes` semantics, run)."""

from __future__ import annotations

import json
import os
import threading
import time
from pathlib import Path
from typing import Any

from countbot_cli.config.settings import ToolSettings
from countbot_cli.conversation.tool_round import ToolRunner
from countbot_cli.conversation.view import NullView
from countbot_cli.messages import ToolCall
from countbot_cli.tools import ToolContext, ToolRegistry, default_tools
from countbot_cli.tools.approval import ApprovalPolicy

SECRET = "OUTSIDE-SECRET-7f3a9c"
ROUNDS = 300
TIME_LIMIT = 20.0  # seconds; the loop stops early rather than run long on a slow machine


def _swap(ws: Path, outside: Path, stop: threading.Event, swaps: list[int]) -> None:
    """Swap ws/sub between the real folder and a symlink to `outside`, as fast as it can."""
    sub, parked = ws / "sub", ws / "sub.real"
    while not stop.is_set():
        try:
            os.rename(sub, parked)
            os.symlink(outside, sub)
            swaps[0] += 1
            os.unlink(sub)
            os.rename(parked, sub)
        except OSError:  # a write made ws/sub anew while it was away: move that one aside
            _restore(ws, sub, parked, swaps)


def _restore(ws: Path, sub: Path, parked: Path, swaps: list[int]) -> None:
    """Put the real folder back at ws/sub; the tools may recreate ws/sub meanwhile, so retry."""
    for _ in range(1000):
        try:
            if sub.is_symlink():
                sub.unlink()
            elif sub.exists() and parked.exists():
                os.rename(sub, ws / f"stray-{swaps[0]}-{time.monotonic_ns()}")
            if parked.exists():
                os.rename(parked, sub)
            return
        except OSError:
            continue


WORKING = {"read_file", "write_file", "edit_file", "list_dir", "exec"}


def _succeeded(results: list[tuple[str, str]]) -> set[str]:
    return {name for name, text in results if not text.startswith(("Error:", "Denied:"))}


def _calls(n: int) -> list[ToolCall]:
    args: list[tuple[str, dict[str, Any]]] = [
        ("read_file", {"path": "sub/secret.txt"}),
        ("write_file", {"path": "sub/out.txt", "content": f"round {n}\n"}),
        ("write_file", {"path": "sub/log.txt", "content": f"{n}\n", "mode": "append"}),
        ("edit_file", {"path": "sub/edit.txt", "start_line": 1, "new_text": f"v{n}"}),
        ("list_dir", {"path": "sub"}),
    ]
    if n % 4 == 0:  # a command (allowed by a rule) every few rounds: starting one is slower
        args.append(("exec", {"command": "cat secret.txt", "working_dir": "sub"}))
    return [ToolCall(f"c{n}_{i}", name, json.dumps(a)) for i, (name, a) in enumerate(args)]


def test_a_folder_swapped_for_a_symlink_never_leads_a_call_outside(tmp_path: Path) -> None:
    ws, outside = tmp_path / "ws", tmp_path / "outside"
    (ws / "sub").mkdir(parents=True)
    outside.mkdir()
    (ws / "sub" / "secret.txt").write_text("inside text\n", encoding="utf-8")
    (ws / "sub" / "edit.txt").write_text("v0\n", encoding="utf-8")
    (outside / "secret.txt").write_text(SECRET + "\n", encoding="utf-8")
    (outside / "edit.txt").write_text(SECRET + "\n", encoding="utf-8")
    ctx = ToolContext(workspace=ws)
    registry = ToolRegistry(default_tools(ctx), ctx)
    settings = ToolSettings(workspace=ws, allow=("cat secret.txt",))
    runner = ToolRunner(registry, ApprovalPolicy(yes_writes=True), settings)  # --yes, no terminal
    view, results = NullView(), []
    stop, swaps = threading.Event(), [0]
    swapper = threading.Thread(target=_swap, args=(ws, outside, stop, swaps), daemon=True)
    swapper.start()
    started, n = time.monotonic(), 0
    try:
        # ROUNDS rounds, and on until every tool has got through once (on a loaded machine the
        # swapper can win many rounds in a row), within the time limit
        while (n < ROUNDS or not _succeeded(results) >= WORKING) and (
            time.monotonic() - started < TIME_LIMIT
        ):
            done = runner.run_calls(_calls(n), view)  # an exception here fails the test
            results += [(m["name"], m["content"]) for m in done.messages]
            n += 1
    finally:
        stop.set()
        swapper.join(5)
    assert swaps[0] > 50  # the race really ran
    leaked = [(name, text) for name, text in results if SECRET in text]
    assert leaked == []
    assert sorted(p.name for p in outside.iterdir()) == ["edit.txt", "secret.txt"]
    assert (outside / "secret.txt").read_text(encoding="utf-8") == SECRET + "\n"
    assert (outside / "edit.txt").read_text(encoding="utf-8") == SECRET + "\n"
    # the calls did real work in between, and every failure is an answer for the model
    assert _succeeded(results) >= WORKING, _succeeded(results)
    assert "inside text" in "".join(text for name, text in results if name == "read_file")


def test_a_file_swapped_for_a_symlink_after_the_check_is_not_followed(
    tmp_path: Path, monkeypatch: Any
) -> None:
    """The race lost on purpose: the final component becomes a symlink to an outside file
    after the call was checked and its folder opened, just before the file itself is opened.
    The open must not follow it (O_NOFOLLOW on the last component, not only on the folders)."""
    from countbot_cli.tools import confined, textfile

    ws, outside = tmp_path / "ws", tmp_path / "outside"
    ws.mkdir()
    outside.mkdir()
    (ws / "notes.txt").write_text("inside text\n", encoding="utf-8")
    (outside / "secret.txt").write_text(SECRET + "\n", encoding="utf-8")
    swapped: list[str] = []

    def swap_then_open(fd: int, name: str, place: Any, flags: int, mode: int = 0o666) -> int:
        (ws / name).unlink()
        (ws / name).symlink_to(outside / "secret.txt")
        swapped.append(name)
        return confined.open_in(fd, name, place, flags, mode)

    monkeypatch.setattr(textfile, "open_in", swap_then_open)
    ctx = ToolContext(workspace=ws)
    registry = ToolRegistry(default_tools(ctx), ctx)
    prepared = registry.prepare(ToolCall("c1", "read_file", json.dumps({"path": "notes.txt"})))
    assert prepared.error is None and not prepared.needs_approval  # inside: read without asking
    result = registry.run(prepared)
    assert swapped == ["notes.txt"]
    assert SECRET not in result.content
    assert not result.ok and confined.SWAPPED_FILE in result.content
