"""Benchmark of `-a` (issue 14): the time to attach a 20-page PDF and a 4,000 x 3,000 image.

1. In process (`load_attachments`, what `ask` runs before opening the session), median of
   N runs, each in a fresh interpreter state for the libraries already imported (the first
   run includes importing pypdf / Pillow, shown separately):
   - a 20-page PDF with a text layer (its text, page by page);
   - a 4,000 x 3,000 photo-like JPEG and the same as PNG, scaled to the default 2 MP budget.
2. Whole `countbot ask --no-save -a FILE` processes against a loopback server, against the
   same `ask` without an attachment: the extra wall time a user sees.

Targets: PDF under 0.5 s, JPEG under 0.5 s, PNG under 1.5 s (a PNG must be fully decoded and
encoded again), whole process within 1 s of a plain ask.

Run: .venv/bin/python bench/bench_attach.py [--runs N]
"""

from __future__ import annotations

import argparse
import statistics
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "tests" / "helpers"))

from attach_files import write_pdf  # noqa: E402

from countbot_cli.config.attach import AttachSettings  # noqa: E402
from countbot_cli.conversation.input.attachments import load_attachments  # noqa: E402


def photo(path: Path, fmt: str) -> Path:
    """A 4,000 x 3,000 picture with noise and gradients (compresses like a photo)."""
    from PIL import Image

    noise = Image.effect_noise((4000, 3000), 40)
    grad = Image.linear_gradient("L").resize((4000, 3000))
    Image.merge("RGB", (noise, grad, grad.transpose(Image.Transpose.ROTATE_180))).save(
        path, format=fmt, **({"quality": 90} if fmt == "JPEG" else {})
    )
    return path


def timed(fn: Callable[[], object], runs: int) -> tuple[float, float]:
    """(first run, median of the others) in seconds."""
    times = []
    for _ in range(runs + 1):
        started = time.perf_counter()
        fn()
        times.append(time.perf_counter() - started)
    return times[0], statistics.median(times[1:])


def in_process(folder: Path, runs: int) -> dict[str, Path]:
    pages = [f"Page {i}: " + "lorem ipsum dolor sit amet " * 40 for i in range(1, 21)]
    files = {
        "20-page PDF": write_pdf(folder / "doc.pdf", pages),
        "4000x3000 JPEG": photo(folder / "photo.jpg", "JPEG"),
        "4000x3000 PNG": photo(folder / "photo.png", "PNG"),
    }
    limits = AttachSettings()
    print("1. load_attachments in process (first run includes the import)")
    for name, path in files.items():
        first, median = timed(lambda p=path: load_attachments([("-a", str(p))], limits), runs)
        rec = load_attachments([("-a", str(path))], limits).records[0]
        size = f"{path.stat().st_size / 1e6:.1f} MB"
        detail = rec.get("sent_pixels") or f"{rec.get('pages_sent')} pages"
        print(f"   {name:15} {size:>8}  first {first * 1000:6.0f} ms  median {median * 1000:6.0f} ms"
              f"  -> {detail}")  # fmt: skip
    return files


def whole_process(folder: Path, files: dict[str, Path], runs: int) -> None:
    import fakeserver as fs
    from cbenv import make_cb

    print("2. countbot ask --no-save [-a FILE] against a loopback server (median wall time)")
    with fs.FakeServer() as server:
        server.default = fs.text("ok")
        cb = make_cb(folder / "cb", server.base_url)

        def run(*extra: str) -> float:
            times = []
            for _ in range(runs):
                started = time.perf_counter()
                proc = cb.run("ask", "--no-save", "describe", *extra)
                times.append(time.perf_counter() - started)
                assert proc.returncode == 0, proc.stderr
            return statistics.median(times)

        base = run()
        print(f"   {'no attachment':15} {base * 1000:6.0f} ms")
        for name, path in files.items():
            t = run("-a", str(path))
            print(f"   {name:15} {t * 1000:6.0f} ms  (+{(t - base) * 1000:.0f} ms)")


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--runs", type=int, default=5)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        folder = Path(tmp)
        files = in_process(folder, args.runs)
        whole_process(folder, files, max(1, args.runs // 2))


if __name__ == "__main__":
    main()
