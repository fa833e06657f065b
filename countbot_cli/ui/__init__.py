"""The terminal layer: streamed markdown, the turn views, the approval prompt and the
session/memory listings. The only layer below the REPL and CLI that imports rich."""
