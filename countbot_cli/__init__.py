"""countbot: a terminal chat client for OpenAI-compatible language models."""

import os

__version__ = "0.1.0"

# the folder countbot_cli is in: the working folder of countbot's own child processes, since
# `python -m` puts its working folder first on the import path (a `json.py` where countbot runs
# would be imported in place of the standard library's)
CHILD_FOLDER = os.path.dirname(os.path.dirname(os.path.realpath(__file__)))
