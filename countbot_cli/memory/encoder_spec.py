"""What countbot and its encoder process (memory/encoder.py, memory/encoder_child.py) agree on:
the models' tag, a vector's layout, how much of a line is embedded, a request's bounds.

A module of constants only, so that the encoder process imports none of countbot's side of
the pipe (subprocess, select, signals) on its way to its first answer. Invariant: a change to
the models or the layout changes MODEL_TAG, so vectors cached by another model are rebuilt.
"""

from __future__ import annotations

MODEL_TAG = "use-m3+e5-small-q4/2"  # stored with cached vectors: another model, another cache
USE_DIM = 512
E5_DIM = 384
DIM = USE_DIM + E5_DIM  # a vector: [USE unit vector | e5 unit vector]
# e5-small reads 512 tokens (its positions, its prefix and ends included) and USE is given the
# same start: a line is embedded by its first LINE_TOKENS tokens however long it is, and at most
# LINE_CHARS characters of it (a token of e5 is rarely shorter) reach the encoder process
LINE_TOKENS = 512
LINE_CHARS = 4 * LINE_TOKENS
BATCH = 4  # lines a request, at most (e5 gains nothing from larger batches, USE little)
MAX_REQUEST = BATCH * LINE_CHARS * 6 + 4096  # bytes: JSON-escaped text, 6 a character at most
RANK_LINES = 1_000_000  # lines a rank request may carry (more: recall scores in countbot)
MAX_RANK_REQUEST = RANK_LINES * 24 + MAX_REQUEST  # bytes: a 16-byte key is 21.3 in base64
# An encoder process may outlive the countbot that started it (`memory.recall_keep`) and serve
# the next ones on a unix socket: SOCKET_NAME in SOCKET_FOLDER (private) of the model cache
# folder. PROTOCOL is in its first line with MODEL_TAG: one that speaks another is not used.
PROTOCOL = 2
SOCKET_FOLDER = "run"
SOCKET_NAME = "encoder.sock"
SOCKET_PATH_MAX = 100  # bytes: a unix socket's path is bounded (107 on Linux, 103 on macOS)
