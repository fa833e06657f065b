"""Symlink-swap races: while another thread swaps a workspace folder for a symlink to
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
from countbot_cli.tools.approval import ApprovalPolicy
from countbot_cli.tools.registry import ToolContext, ToolRegistry, default_tools

SECRET = "OUTSIDE-SECRET-7f3a9c"
ROUNDS = 300
CALM_EVERY = 20  # every 20th round (with a command) runs with the swapper parked
HANG = 30.0  # seconds: a bound on waiting for the swap thread, never reached unless it hangs


class Swapper:
    """Swaps ws/sub between the real folder and a symlink to `outside`, as fast as it can, in
    its own thread while `race()` lets it. `park()` stops it with the real folder in place, so
    rounds with and without the race alternate deterministically (no timing decides which
    calls met a swap: on a loaded machine a free-running swapper once won every edit_file)."""

    def __init__(self, ws: Path, outside: Path) -> None:
        self.ws, self.outside = ws, outside
        self.swaps = 0
        self._cond = threading.Condition()
        self._racing = threading.Event()
        self._parked = threading.Event()
        self._stopped = False
        self._thread = threading.Thread(target=self._run, daemon=True)
        self._thread.start()
        self.park()

    def race(self) -> None:
        """Swap from now on; returns once the first swap is done (the race is on)."""
        with self._cond:
            before = self.swaps
            self._parked.clear()
            self._racing.set()
            assert self._cond.wait_for(lambda: self.swaps > before, HANG), "no swap"

    def park(self) -> None:
        """Stop swapping; returns once the real folder is back at ws/sub."""
        self._racing.clear()
        assert self._parked.wait(HANG), "the swap thread did not stop"

    def stop(self) -> None:
        self._stopped = True
        self._racing.set()
        self._thread.join(HANG)

    def _run(self) -> None:
        sub, parked = self.ws / "sub", self.ws / "sub.real"
        while not self._stopped:
            if not self._racing.is_set():
                self._parked.set()
                self._racing.wait()
                continue
            try:
                os.rename(sub, parked)
                os.symlink(self.outside, sub)
                with self._cond:
                    self.swaps += 1
                    self._cond.notify_all()
                os.unlink(sub)
                os.rename(parked, sub)
            except OSError:  # a write made ws/sub anew while it was away: move that one aside
                _restore(self.ws, sub, parked, self.swaps)


def _restore(ws: Path, sub: Path, parked: Path, swaps: int) -> None:
    """Put the real folder back at ws/sub; the tools may recreate ws/sub meanwhile, so retry."""
    for _ in range(1000):
        try:
            if sub.is_symlink():
                sub.unlink()
            elif sub.exists() and parked.exists():
                os.rename(sub, ws / f"stray-{swaps}-{time.monotonic_ns()}")
            if parked.exists():
                os.rename(parked, sub)
            return
        except OSError:
            continue


WORKING = {"read_file", "write_file", "edit_file", "list_dir", "exec"}


def _failed(text: str) -> bool:
    return text.startswith(("Error:", "Denied:"))


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


def _rounds(runner: ToolRunner, swapper: Swapper) -> tuple[list[tuple[str, str]], ...]:
    """ROUNDS rounds of calls: (results while racing, results of the calm rounds). Each race
    round starts after a swap and the swapping goes on until its last call has answered."""
    raced: list[tuple[str, str]] = []
    calm: list[tuple[str, str]] = []
    for n in range(ROUNDS):
        quiet = n % CALM_EVERY == 0
        if not quiet:
            swapper.race()
        try:
            done = runner.run_calls(_calls(n), NullView())  # an exception here fails the test
        finally:
            swapper.park()
        (calm if quiet else raced).extend((m["name"], m["content"]) for m in done.messages)
    return raced, calm


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
    swapper = Swapper(ws, outside)
    try:
        raced, calm = _rounds(runner, swapper)
    finally:
        swapper.stop()
    race_rounds = ROUNDS - len(range(0, ROUNDS, CALM_EVERY))
    assert swapper.swaps >= race_rounds  # the race really ran, in every race round
    leaked = [(name, text) for name, text in raced + calm if SECRET in text]
    assert leaked == []
    assert sorted(p.name for p in outside.iterdir()) == ["edit.txt", "secret.txt"]
    assert (outside / "secret.txt").read_text(encoding="utf-8") == SECRET + "\n"
    assert (outside / "edit.txt").read_text(encoding="utf-8") == SECRET + "\n"
    # between the races every tool does its real work on the real folder (so the answers above
    # are not all failures for some other reason), and every failure is an answer for the model
    assert [(name, text) for name, text in calm if _failed(text)] == []
    assert {name for name, _ in calm} == WORKING
    assert "inside text" in "".join(text for name, text in calm if name == "read_file")


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
