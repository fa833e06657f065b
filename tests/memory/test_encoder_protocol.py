"""countbot's side of the encoder process (memory/encoder.py) distrusts its child: a reply that
is not JSON, is out of turn, holds vectors of the wrong size or never ends its line is the
child's death (killed, EncoderDied saying how); a child that never says it is ready is killed
after the timeout; through `ask`, an encoder process that dies leaves recall by words, said in
one line, and the answer."""

from __future__ import annotations

import base64
import json
import os
import signal
import sys
from pathlib import Path

import fakeserver as fs
import pytest
from cbenv import make_cb
from processes import alive, children, wait_gone
from recall_env import needs_recall
from waits import wait_until

from countbot_cli.memory.encoder import Encoder, EncoderDied
from countbot_cli.memory.encoder_spec import DIM, MODEL_TAG, PROTOCOL

READY = json.dumps({"ready": True, "model": MODEL_TAG, "protocol": PROTOCOL})


def child(body: str) -> list[str]:
    """A stand-in encoder process: says it is ready, then runs `body` for each request."""
    script = (
        "import sys, json, base64\n"
        f"print({READY!r}, flush=True)\n"
        "for line in sys.stdin:\n"
        "    req = json.loads(line)\n" + "".join(f"    {ln}\n" for ln in body.splitlines())
    )
    return [sys.executable, "-c", script]


def vectors(n: int) -> str:
    return base64.b64encode(b"\0" * (n * DIM * 4)).decode()


def test_a_sound_reply_is_read() -> None:
    enc = Encoder(
        None,
        child(f"print(json.dumps({{'id': req['id'], 'vectors': {vectors(2)!r}}}), flush=True)"),
    )
    enc.wait_ready(30, pytest.fail)
    assert enc.embed(["a", "b"], False, 30).shape == (2, DIM)
    enc.kill()


@pytest.mark.parametrize(
    ("body", "said"),
    [
        ("print('not json', flush=True)", "a malformed reply"),
        ("print(json.dumps({'id': 99, 'vectors': ''}), flush=True)", "out of turn"),
        ("print(json.dumps({'id': req['id'], 'vectors': 'AAAA'}), flush=True)", "wrong size"),
        ("print(json.dumps({'id': req['id'], 'vectors': '!!'}), flush=True)", "malformed"),
        ("print(json.dumps({'id': req['id'], 'error': 'boom'}), flush=True)", "boom"),
        ("sys.exit(3)", "ended"),
    ],
)
def test_a_reply_that_is_not_the_answer_is_the_child_s_death(body: str, said: str) -> None:
    enc = Encoder(None, child(body))
    enc.wait_ready(30, pytest.fail)
    with pytest.raises(EncoderDied, match=said):
        enc.embed(["a line"], False, 30)
    assert not alive(enc.proc.pid)


def test_a_line_that_never_ends_is_cut_at_its_bound() -> None:
    big = "sys.stdout.write('x' * (64 << 20)); sys.stdout.flush()"  # 64 MiB, no newline
    enc = Encoder(None, child(big))
    enc.wait_ready(30, pytest.fail)
    with pytest.raises(EncoderDied, match="over its bound"):  # it stops reading at the bound
        enc.embed(["a line"], False, 30)  # 30 s: a hang bound
    assert not alive(enc.proc.pid)


def test_a_child_that_never_becomes_ready_is_killed() -> None:
    enc = Encoder(None, [sys.executable, "-c", "import time; time.sleep(600)"])
    with pytest.raises(EncoderDied, match="no answer within"):
        enc.wait_ready(0.5, pytest.fail)
    wait_gone(enc.proc.pid)


@needs_recall
def test_an_encoder_process_that_dies_leaves_recall_by_words_and_the_answer(
    tmp_path: Path, server: fs.FakeServer
) -> None:
    memory = {"inject": "relevant", "auto_memory": False, "recall_wait": 1}
    cb = make_cb(tmp_path, server.base_url, memory=memory)
    lines = [f"the staging cluster needs care every {i} days (note {i})" for i in range(3000)]
    body = "".join(f"2025-01-01|user|{c}\n" for c in lines)
    cb.memory_file.write_text("# MEMORY\n" + body + "2025-01-02|user|flies KLM to Amsterdam\n")
    server.default = fs.text("ok", first_delay=3)
    proc = cb.popen("ask", "--plain", "--no-save", "which airline do I fly to Amsterdam?")
    (encoder,) = wait_until(lambda: children(proc.pid), "the encoder process", 30)
    os.kill(encoder, signal.SIGKILL)  # as the OOM killer would
    out, err = proc.communicate(timeout=60)
    assert proc.returncode == 0, err
    assert out == "ok\n"
    said = [ln for ln in err.splitlines() if "by meaning" in ln]
    assert len(said) == 1 and "by words" in said[0], err
    assert "KLM" in server.chat_bodies()[-1]["messages"][-1]["content"]  # by its words
