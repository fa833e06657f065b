"""Sessions (SPEC §4): the session value, the folder of session files, the full-text search
index beside them and the `search_sessions` tool. Below the turn: nothing here imports the rest
of `conversation/`."""
